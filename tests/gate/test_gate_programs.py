"""A plugin module users run as a program (vllm-gaudi's
`python -m vllm_gaudi.entrypoints.openai.multi_model_api_server`, a module-level
`if __name__ == "__main__":`) is an opt-in way in: what core lacks there is an error, as on an
entry point's chain. Tests, examples, tools and benchmarks that run as programs are not a
configuration the plugin supports, and a plugin that declares no entry point keeps every
module counted as loaded. Synthetic trees; no upstream code is copied."""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/entrypoints/__init__.py": "", "vllm/entrypoints/utils.py": "X = 1\n"}

SERVER = """
    from vllm.entrypoints.utils import cli_env_setup


    def main():
        cli_env_setup()


    if __name__ == "__main__":
        main()
"""


def _severities(tmp_path, files):
    core = gatekit.tree(tmp_path / "core", PKGS)
    plugin = gatekit.tree(tmp_path / "plugin", files)
    report = gatekit.run_gate(core, plugin)
    return {f.plugin_path: f.severity for f in report.findings}, report


def test_a_module_that_runs_as_a_program_is_a_way_in(tmp_path):
    got, report = _severities(tmp_path, {
        "setup.py": gatekit.PLUGIN_ENTRY, "vllm_ascend/__init__.py": "def register():\n    pass\n",
        "vllm_ascend/entrypoints/__init__.py": "", "vllm_ascend/entrypoints/server.py": SERVER,
        "vllm_ascend/benchmarks/__init__.py": "", "vllm_ascend/benchmarks/bench_server.py": SERVER,
        "vllm_ascend/opt_in.py": SERVER.replace('if __name__ == "__main__":', "if False:")})
    assert got == {"vllm_ascend/entrypoints/server.py": "error", "vllm_ascend/benchmarks/bench_server.py": "warning",
                   "vllm_ascend/opt_in.py": "warning"}
    (server,) = [f for f in report.findings if f.plugin_path == "vllm_ascend/entrypoints/server.py"]
    assert "program (opt-in: python -m): vllm_ascend.entrypoints.server" in server.reason
