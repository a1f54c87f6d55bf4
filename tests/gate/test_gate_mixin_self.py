"""Misses, "a call through `self` in a plugin mixin" (issue 27, twenty-ninth session).

The twenty-sixth held-out set (vllm-mblt 0.8.0 against vLLM 0.12.0 and 0.13.0) missed
`_merge_mm_kwargs(cache, mm_hashes=..., mm_missing_kwargs=..., mm_missing_prompt_updates=...)`
without the `mm_is_cached` 0.12.0 made required. The call sits in a mixin with no base
(`MobilintVLCachedProcessorMixin`), which the plugin mixes into its subclasses of core's
Qwen2-VL and Qwen3-VL processors, and it goes through `processor = cast(Any, self)`. The
gate judged `self.meth(...)` only in classes whose own bases reach core, and knew nothing
of a local bound to `self`. Now `self` in a mixin is the plugin classes that mix it into
core classes (one call checked when they all resolve the name to one core signature), and
a local bound once to `self` or to `cast(T, self)` (a cast returns its argument at run time)
is `self`.

The fake core is cut from vLLM 0.12.0's `vllm/multimodal/processing.py`
(`BaseMultiModalProcessor._merge_mm_kwargs(self, cache, mm_hashes, mm_is_cached,
mm_missing_kwargs, mm_missing_prompt_updates)`, called by its `_cached_apply_hf_processor`).
"""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/multimodal/__init__.py": ""}

PROCESSING = """
    class BaseMultiModalProcessor:
        def apply(self, prompt):
            return self._cached_apply_hf_processor(prompt)

        def _cached_apply_hf_processor(self, prompt):
            return self._merge_mm_kwargs(None, [], True, {}, {})

        def _merge_mm_kwargs(self, cache, mm_hashes, mm_is_cached, mm_missing_kwargs, mm_missing_prompt_updates):
            return {}, {}


    class Qwen2VLMultiModalProcessor(BaseMultiModalProcessor):
        pass


    class OtherProcessor:
        def _merge_mm_kwargs(self, cache, mm_hashes=None, mm_missing_kwargs=None, mm_missing_prompt_updates=None):
            return {}, {}
"""

MIXIN = """
    from typing import Any, cast
    import typing


    class CachedProcessorMixin:
        def _cached_apply_hf_processor(self, prompt):
            {bind}
            return {receiver}._merge_mm_kwargs(None, mm_hashes=[], mm_missing_kwargs={{}}, mm_missing_prompt_updates={{}})
"""

USERS = """
    from vllm.multimodal.processing import Qwen2VLMultiModalProcessor, OtherProcessor
    from vllm_ascend.vl_utils import CachedProcessorMixin


    class MyProcessor(CachedProcessorMixin, Qwen2VLMultiModalProcessor):
        {body}
"""

SYMBOL = "call:vllm.multimodal.processing.BaseMultiModalProcessor._merge_mm_kwargs"
CALL_LINE = 8  # the mixin's return line


def merge_findings(tmp_path, bind: str = "pass", receiver: str = "self", body: str = "pass",
                   more: dict[str, str] | None = None) -> list:
    plugin = {"vllm_ascend/vl_utils.py": MIXIN.format(bind=bind, receiver=receiver),
              "vllm_ascend/users.py": USERS.format(body=body), **(more or {})}
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/multimodal/processing.py": PROCESSING}, plugin,
                                 ("vllm_ascend.vl_utils", "vllm_ascend.users", *(
                                     p[:-3].replace("/", ".") for p in (more or {}))))
    return gatekit.by_symbol(report, SYMBOL)


def test_self_in_a_mixin_is_the_core_class_it_is_mixed_into(tmp_path):
    found = merge_findings(tmp_path)
    assert [(f.plugin_path, f.plugin_line) for f in found] == [("vllm_ascend/vl_utils.py", CALL_LINE)]
    assert "mm_is_cached" in found[0].message


def test_a_local_bound_to_a_cast_of_self_is_self(tmp_path):
    for n, bind in enumerate(("processor = cast(Any, self)", "processor = typing.cast(Any, self)",
                              "processor = self")):
        found = merge_findings(tmp_path / str(n), bind=bind, receiver="processor")
        assert [f.plugin_line for f in found] == [CALL_LINE], bind
        assert found[0].message.startswith("processor._merge_mm_kwargs(...) calls core's"), found[0].message


def test_a_local_bound_twice_is_not_self(tmp_path):
    bind = "processor = cast(Any, self)\n            processor = prompt"
    assert merge_findings(tmp_path, bind=bind, receiver="processor") == []


def test_a_cast_of_something_else_is_not_self(tmp_path):
    assert merge_findings(tmp_path, bind="processor = cast(Any, prompt)", receiver="processor") == []


def test_a_subclass_that_defines_the_method_keeps_the_call_its_own(tmp_path):
    body = "def _merge_mm_kwargs(self, cache, **kw):\n            return {}, {}"
    assert merge_findings(tmp_path, body=body) == []


THEIRS = """
    from vllm.multimodal.processing import OtherProcessor
    from vllm_ascend.vl_utils import CachedProcessorMixin


    class Theirs(CachedProcessorMixin, OtherProcessor):
        pass
"""


def test_mixed_into_classes_that_disagree_the_call_is_not_judged(tmp_path):
    # the other class's method takes the call as written: which one runs is the instance's
    # (either file order: the gate must not judge by whichever class it reads first)
    for name in ("vllm_ascend/a_theirs.py", "vllm_ascend/z_theirs.py"):
        assert merge_findings(tmp_path / name[12], more={name: THEIRS}) == [], name


def test_a_call_that_fits_is_no_finding(tmp_path):
    mixin_call = "self._merge_mm_kwargs(None, mm_hashes=[], mm_is_cached=True, mm_missing_kwargs={}, " \
                 "mm_missing_prompt_updates={})"
    plugin = {"vllm_ascend/vl_utils.py": MIXIN.format(bind="pass", receiver="self").replace(
        "self._merge_mm_kwargs(None, mm_hashes=[], mm_missing_kwargs={}, mm_missing_prompt_updates={})",
        mixin_call),
        "vllm_ascend/users.py": USERS.format(body="pass")}
    report = gatekit.gate_loaded(tmp_path, PKGS, {"vllm/multimodal/processing.py": PROCESSING}, plugin,
                                 ("vllm_ascend.vl_utils", "vllm_ascend.users"))
    assert mixin_call in plugin["vllm_ascend/vl_utils.py"]
    assert gatekit.by_symbol(report, SYMBOL) == []
