"""Misses, "a read through a loop target the function binds twice" (issue 27, twenty-eighth session).

The hand engine types a name bound once in a function from a typed path (`for t in
cfg.kv_cache_tensors:` makes `t` a `KVCacheTensor`). A name bound twice was not typed at
all, so tpu-inference 0.26.0's `kv_cache_manager.py` hid its live `.shared_by` reads at
vLLM 0.29.0: the function loops over `kv_cache_config.kv_cache_tensors` with
`kv_cache_tensor` and later over a local list with the same name, and reads `.shared_by`
in comprehensions over the same list. The gate cited only two reads in dead DSv4-only code.
Now a loop target is typed inside its own body (where the body does not rebind it), and a
comprehension's target inside the comprehension, which also shadows an outer typed name.
The body of `if isinstance(x, C):` lost its narrowing the same way (its reads were checked
after the scan had undone it) and keeps it now.

The fake core is cut from vLLM 0.29.0's `vllm/v1/kv_cache_interface.py` (`KVCacheTensor`
without `shared_by`; `KVCacheConfig.kv_cache_tensors: list[KVCacheTensor]`).
"""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/v1/__init__.py": ""}

KV_INTERFACE = """
    from dataclasses import dataclass


    @dataclass
    class KVCacheTensor:
        size: int
        layers: list[str]


    @dataclass
    class KVCacheConfig:
        num_blocks: int
        kv_cache_tensors: list[KVCacheTensor]


    @dataclass
    class Other:
        shared_by: list[str]
"""

HEAD = """
    from vllm.v1.kv_cache_interface import KVCacheConfig


    class TPURunner:
        def initialize(self, kv_cache_config: KVCacheConfig, others: list):
"""

SYMBOL = "attribute:vllm.v1.kv_cache_interface.KVCacheTensor.shared_by"


def shared_by_lines(tmp_path, body: str, head: str = HEAD) -> list[int]:
    plugin = {"vllm_ascend/runner.py": head + body}
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/v1/kv_cache_interface.py": KV_INTERFACE},
                                 plugin, ("vllm_ascend.runner",))
    found = [f for f in report.findings if f.symbol == SYMBOL]
    lines = sorted({f.plugin_line for f in found})
    for f in found:
        lines += [int(x) for x in f.message.rsplit("also at line(s) ", 1)[-1].rstrip(")").split(", ")] \
            if "also at line(s)" in f.message else []
    return sorted(set(lines))


# lines are numbered from HEAD's first line (1: the import)
TWICE = """
            for kv_cache_tensor in kv_cache_config.kv_cache_tensors:
                if any(name for name in kv_cache_tensor.shared_by):
                    break
            for kv_cache_tensor in others:
                print(kv_cache_tensor)
"""


def test_a_loop_target_bound_twice_is_typed_inside_its_own_loop(tmp_path):
    assert shared_by_lines(tmp_path / "a", TWICE) == [8]


def test_the_other_loop_with_the_same_name_is_not_typed(tmp_path):
    body = TWICE.replace("print(kv_cache_tensor)", "print(kv_cache_tensor.shared_by)")
    assert shared_by_lines(tmp_path / "a", body) == [8]


def test_a_loop_body_that_rebinds_the_target_keeps_it_untyped(tmp_path):
    body = TWICE.replace("                    break\n",
                         "                    kv_cache_tensor = others[0]\n"
                         "                print(kv_cache_tensor.shared_by)\n")
    assert shared_by_lines(tmp_path / "a", body) == []


def test_a_comprehension_target_is_typed_inside_the_comprehension(tmp_path):
    body = """
            kept = [t for t in kv_cache_config.kv_cache_tensors if not any("mtp" in n for n in t.shared_by)]
            return kept
"""
    assert shared_by_lines(tmp_path / "a", body) == [7]


def test_a_comprehension_target_shadows_an_outer_typed_name(tmp_path):
    # `t` outside is a KVCacheTensor; inside the comprehension it is an element of `others`
    body = """
            t = kv_cache_config.kv_cache_tensors[0]
            names = [t.shared_by for t in others]
            return names
"""
    assert shared_by_lines(tmp_path / "a", body) == []


def test_an_isinstance_test_types_the_name_in_its_body(tmp_path):
    # the same loss: the body's reads were checked after the narrowing had been undone
    head = HEAD.replace("import KVCacheConfig", "import KVCacheConfig, KVCacheTensor")
    body = """
            x = others[0]
            if isinstance(x, KVCacheTensor):
                print(x.shared_by)
            print(x.shared_by)
"""
    assert shared_by_lines(tmp_path / "a", body, head) == [9]
