"""A core class object's attribute read in a plugin function body (`C.name`, `vars(C)["name"]`,
`C.__dict__["name"]`) that core's class no longer binds. vllm-rbln 0.12.1a8 wraps
`vars(VllmConfig)["use_v2_model_runner"].fget`, a property vLLM 0.34.0 removed: a KeyError
at start-up. In a function body a class may get names at run time, so the read is an error
only when nothing could have set the name first. Synthetic trees; the shape is core's
config/vllm.py."""

from __future__ import annotations

import ast

import gatekit
import pytest

from overlay.gate.classreads import namespace
from overlay.gate.index import class_info
from overlay.gate.scan import own_namespace_read

PKGS = {"vllm/__init__.py": "", "vllm/_version.py": "__version__ = version = '0.34.0'\n",
        "vllm/config/__init__.py": "from vllm.config.vllm import VllmConfig\n"}

CORE = """
    from dataclasses import dataclass, field


    class ConfigBase:
        @property
        def inherited(self):
            return 1


    @dataclass
    class VllmConfig(ConfigBase):
        plain: int = 0
        bare: int
        made: list = field(default_factory=list)
        given: int = field(default=3)

        @property
        def kept(self):
            return True
"""

# each read on its own line (5 + i) of one function the platform runs
READS = ['vars(VllmConfig)["use_v2_model_runner"].fget',  # 5: removed
         'VllmConfig.__dict__["gone_too"]',  # 6: removed
         'vars(VllmConfig)["kept"]',  # 7: in the class's own body
         'vars(VllmConfig)["inherited"]',  # 8: only a base binds it: KeyError
         'VllmConfig.gone_attr',  # 9: removed
         'vars(VllmConfig).get("soft")',  # 10: a lookup that cannot fail
         'VllmConfig.inherited',  # 11: getattr finds the base's
         'vars(VllmConfig)["plain"]',  # 12: a class-level default
         'vars(VllmConfig)["bare"]',  # 13: an annotation alone binds nothing
         'vars(VllmConfig)["made"]',  # 14: dataclass removes a default_factory field
         'vars(VllmConfig)["given"]']  # 15: dataclass keeps field(default=...)


def _platform(body: str) -> str:
    return ("class NPUPlatform:\n    @classmethod\n    def patch(cls):\n"
            "        from vllm.config import VllmConfig\n" + body + "\n\nNPUPlatform.patch()\n")


def _reads(tmp_path, plugin_body: str, core: str = CORE, extra_core: dict | None = None,
           extra_plugin: dict | None = None) -> list[tuple[str, int, str]]:
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/config/vllm.py": core, **(extra_core or {})},
                                 {"vllm_ascend/platform.py": _platform(plugin_body), **(extra_plugin or {})},
                                 ("vllm_ascend.platform",))
    return sorted((f.symbol.rsplit(".", 1)[-1], f.plugin_line, f.severity) for f in report.findings
                  if f.kind == "attribute")


ALL = "".join(f"        r{i} = {expr}\n" for i, expr in enumerate(READS))


def test_reads_of_names_core_s_class_does_not_bind_are_errors(tmp_path):
    assert _reads(tmp_path, ALL) == [("bare", 13, "error"), ("gone_attr", 9, "error"),
                                     ("gone_too", 6, "error"), ("inherited", 8, "error"),
                                     ("made", 14, "error"), ("use_v2_model_runner", 5, "error")]
    found = {f.symbol.rsplit(".", 1)[-1]: f for f in gatekit.gate_loaded(
        tmp_path / "again", PKGS, {"vllm/config/vllm.py": CORE}, {"vllm_ascend/platform.py": _platform(ALL)},
        ("vllm_ascend.platform",)).findings}
    assert "a base class defines it" in found["inherited"].message
    assert "no core file sets the name" in found["gone_attr"].message


def test_a_store_later_in_the_same_function_does_not_precede_the_read(tmp_path):
    """vllm-rbln's shape: read the old property, then install its own under the same name."""
    body = ('        getter = vars(VllmConfig)["use_v2_model_runner"].fget\n'
            '        VllmConfig.use_v2_model_runner = property(getter)\n')
    assert _reads(tmp_path, body) == [("use_v2_model_runner", 5, "error")]


@pytest.mark.parametrize("case", ["core_store", "core_setattr", "plugin_store_elsewhere", "plugin_setattr",
                                  "plugin_setattr_at_import", "class_rebound",
                                  "store_before", "key_error_caught", "probed", "unknown_base", "metaclass",
                                  "computed_setattr"])
def test_a_name_something_may_have_set_or_a_handled_read_is_not_reported(tmp_path, case):
    read = '        x = vars(VllmConfig)["gone"]\n        y = VllmConfig.gone\n'
    body, core, extra_core, extra_plugin = read, CORE, {}, {}
    if case == "core_store":
        extra_core = {"vllm/engine.py": "def setup(cfg_cls):\n    cfg_cls.gone = 1\n"}
    elif case == "core_setattr":
        extra_core = {"vllm/engine.py": "def setup(cfg_cls):\n    setattr(cfg_cls, 'gone', 1)\n"}
    elif case == "plugin_store_elsewhere":
        extra_plugin = {"vllm_ascend/other.py": "def f(c):\n    c.gone = 1\n"}
    elif case == "plugin_setattr":
        extra_plugin = {"vllm_ascend/other.py": "import vllm.config\n\n\ndef install():\n"
                                                "    setattr(vllm.config.VllmConfig, 'gone', 1)\n"}
    elif case == "plugin_setattr_at_import":
        extra_plugin = {"vllm_ascend/other.py": "import vllm.config\n\n"
                                                "setattr(vllm.config.VllmConfig, 'gone', 1)\n"}
    elif case == "class_rebound":  # the plugin puts its own class in core's module
        extra_plugin = {"vllm_ascend/other.py": "import vllm.config\n\n\nclass Mine:\n    gone = 1\n\n\n"
                                                "def install():\n    vllm.config.VllmConfig = Mine\n"}
    elif case == "store_before":
        body = "        VllmConfig.gone = 1\n" + read
    elif case == "key_error_caught":
        body = ("        try:\n            x = vars(VllmConfig)['gone']\n            y = VllmConfig.gone\n"
                "        except (KeyError, AttributeError):\n            pass\n")
    elif case == "probed":
        body = "        if hasattr(VllmConfig, 'gone'):\n" + read.replace("        ", "            ")
    elif case == "unknown_base":
        core = CORE.replace("class ConfigBase:", "from somewhere import Unknown\n\n\n    class ConfigBase(Unknown):")
    elif case == "metaclass":
        core = CORE.replace("class ConfigBase:", "class ConfigBase(metaclass=Registry):")
    elif case == "computed_setattr":
        core = CORE.replace("""        @property
        def kept(self):""", """        @classmethod
        def install(cls, names):
            for n in names:
                setattr(cls, n, None)

        @property
        def kept(self):""") + '\n    NAMES = ["gone"]\n'
    assert _reads(tmp_path, body, core, extra_core, extra_plugin) == []


def test_a_handler_for_the_other_exception_does_not_catch_it(tmp_path):
    """`vars(C)["a"]` raises KeyError, `C.a` AttributeError: each handler catches only its own."""
    body = ("        try:\n            x = vars(VllmConfig)['gone']\n        except AttributeError:\n            pass\n"
            "        try:\n            y = VllmConfig.gone\n        except KeyError:\n            pass\n")
    assert _reads(tmp_path, body) == [("gone", 6, "error"), ("gone", 10, "error")]


@pytest.mark.parametrize("expr, read", [
    ('vars(C)["a"]', "C.a"),
    ('mod.C.__dict__["a"]', "mod.C.a"),
    ('vars(C)[name]', None),  # a computed key
    ('vars(C, x)["a"]', None),
    ('vars()["a"]', None),  # the caller's locals
    ('d["a"]', None),
    ('vars(C)["not a name"]', None),
    ('f().__dict__["a"]', None),
])
def test_own_namespace_reads_are_read_as_dotted_names(expr, read):
    assert own_namespace_read(ast.parse(expr, mode="eval").body) == read


def test_the_class_namespace_follows_what_the_body_binds():
    node = ast.parse(__import__("textwrap").dedent(CORE)).body[-1]
    assert namespace(class_info(node)) == {"plain", "given", "kept"}
    plain = ast.parse("class C:\n    a: int\n    b: list = field(default_factory=list)\n    a = 1\n").body[0]
    assert namespace(class_info(plain)) == {"a", "b"}  # not a dataclass: `b` holds the Field object


def test_a_read_in_an_import_fallback_this_core_does_not_take_is_not_reported(tmp_path):
    """vllm-spyre 1.6.0's shape: the new module in the try, the old class's method in the
    `except ImportError:` fallback, which never runs on a core that has the new module."""
    body = ("        try:\n            from vllm.config import ModelConfig\n        except ImportError:\n"
            "            x = VllmConfig.gone\n        y = VllmConfig.also_gone\n")
    with_module = {"vllm/config/__init__.py": "from vllm.config.vllm import VllmConfig\nModelConfig = 1\n"}
    assert _reads(tmp_path / "a", body, extra_core=with_module) == [("also_gone", 9, "error")]
    # without the module the fallback runs, and its read is judged
    assert _reads(tmp_path / "b", body) == [("also_gone", 9, "error"), ("gone", 8, "error")]
