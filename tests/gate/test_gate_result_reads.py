"""Misses, "a core call's result read as the type it used to return" (issue 27, twenty-ninth
session).

The twenty-sixth held-out set (vllm-mblt 0.8.0 against vLLM 0.12.0 and 0.13.0) missed
`mm_missing_data_items.get_all_counts()`: the plugin binds the result of core's
`_get_cache_missing_items(...)`, which 0.12.0 declares `-> tuple[MultiModalIsCached,
MultiModalDataItems]` where 0.11.2 returned the items alone, and reads an attribute that no
tuple has. The gate checked a call's arguments and the length it is unpacked into
(`unpack_problems`), not what its result is used as. Now a name bound once in a function to
a core call's result, read as `name.attr` outside any test of the name and any `try` that
catches AttributeError, is judged against core's return annotation where that names a
builtin type (`tuple[...]`, `list[...]`, `dict[...]`, `str`, `int`, `None`, ...), whose
attributes are Python's own. Under `call:<core callee>`, as the unpacking check.

The fake core is cut from vLLM 0.12.0's `vllm/multimodal/processing.py`
(`BaseMultiModalProcessor._get_cache_missing_items`).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/multimodal/__init__.py": ""}

PROCESSING = """
    class MultiModalDataItems(dict):
        def get_all_counts(self) -> dict[str, int]:
            return {{}}


    class BaseMultiModalProcessor:
        def apply(self, prompt):
            return self._cached_apply_hf_processor(None, prompt, [])

        def _cached_apply_hf_processor(self, cache, items, hashes):
            return items

        def _get_cache_missing_items(self, cache, mm_data_items, mm_hashes) -> {returns}:
            return {value}
"""

PLUGIN = """\
class MyProcessor(BaseMultiModalProcessor):
    def _cached_apply_hf_processor(self, cache, items, hashes):
        missing = self._get_cache_missing_items(cache=cache, mm_data_items=items, mm_hashes=hashes)
{use}
        return missing
"""

HEAD = "from vllm.multimodal.processing import BaseMultiModalProcessor\n\n\n"
SYMBOL = "call:vllm.multimodal.processing.BaseMultiModalProcessor._get_cache_missing_items"

TUPLE = ("tuple[dict[str, list[bool]], MultiModalDataItems]", "({}, MultiModalDataItems())")


def result_findings(tmp_path, use: str, returns: tuple[str, str] = TUPLE, core_header: str = "") -> list:
    text = gatekit.textwrap.dedent(PROCESSING.format(returns=returns[0], value=returns[1]))
    core = {"vllm/multimodal/processing.py": core_header + text}
    block = "\n".join("        " + line for line in use.splitlines())  # the method body's level
    plugin = {"vllm_ascend/proc.py": HEAD + PLUGIN.format(use=block)}
    report = gatekit.gate_loaded(tmp_path, PKGS, core, plugin, ("vllm_ascend.proc",))
    return gatekit.by_symbol(report, SYMBOL)


def test_an_attribute_the_returned_tuple_lacks_is_an_error(tmp_path):
    [f] = result_findings(tmp_path, "if not any(missing.get_all_counts().values()):\n    return None")
    assert (f.plugin_path, f.plugin_line, f.severity) == ("vllm_ascend/proc.py", 6, "error")
    assert "get_all_counts" in f.message and "tuple[" in f.message and "AttributeError" in f.message, f.message


@pytest.mark.parametrize("use", [
    "print(missing.count(1))",  # a tuple has count
    "if isinstance(missing, tuple):\n    missing = missing[1]\nprint(missing.get_all_counts())",  # bound twice
    "if hasattr(missing, 'get_all_counts'):\n    print(missing.get_all_counts())",  # tested first
    "print(missing.get_all_counts() if not isinstance(missing, tuple) else None)",  # tested first
    "print(isinstance(missing, dict) and missing.get_all_counts())",  # tested first
    "try:\n    print(missing.get_all_counts())\nexcept AttributeError:\n    pass",  # caught
])
def test_a_read_that_fits_or_is_guarded_is_no_finding(tmp_path, use):
    assert result_findings(tmp_path, use) == []


def test_a_core_class_or_an_open_annotation_says_nothing(tmp_path):
    use = "print(missing.get_all_counts())"
    for returns in (("MultiModalDataItems", "MultiModalDataItems()"), ("tuple | MultiModalDataItems", "()"),
                    ("'Any'", "()")):
        assert result_findings(tmp_path / returns[0][:5].strip("'|"), use, returns) == [], returns


def test_none_returned_is_read_as_none(tmp_path):
    [f] = result_findings(tmp_path, "print(missing.get_all_counts())", ("None", "None"))
    assert "None" in f.message and "get_all_counts" in f.message


BUILTINS = {"tuple[int, str]": tuple, "list[int]": list, "dict[str, int]": dict, "set[int]": set, "str": str,
            "int": int, "float": float, "bool": bool, "bytes": bytes, "typing.Tuple[int, int]": tuple, "None": None}
ATTRS = st.sampled_from(["count", "index", "append", "items", "get", "keys", "upper", "split", "real", "bit_length",
                         "decode", "get_all_counts", "kv_cache_tensors", "shape", "np", "cpu", "__len__"])


@settings(max_examples=30, deadline=None)
@given(returns=st.sampled_from(sorted(BUILTINS)), attr=ATTRS)
def test_an_attribute_is_missing_exactly_when_python_s_type_lacks_it(tmp_path_factory, returns, attr):
    tmp = tmp_path_factory.mktemp("r")
    kind = BUILTINS[returns]
    header = "import typing\n\n\n" if returns.startswith("typing.") else ""
    found = result_findings(tmp, f"print(missing.{attr})", (returns, "None"), core_header=header)
    assert bool(found) == (not hasattr(kind if kind is not None else type(None), attr)), (returns, attr)
