"""Core calls a plain method through the class: vLLM's `SupportsQuant.__new__` runs
`cls._maybe_apply_model_mapping(instance)`, an unbound call whose first argument is the
instance (`self`). A plugin override `def _maybe_apply_model_mapping(self)` takes it; one that
needs another argument does not. Tuned on the twenty-second held-out set (vllm-omni's
`Qwen3OmniNestedSupportsQuant`, reported false in four pairings). Synthetic trees; no upstream
code is copied."""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/models/__init__.py": ""}

CORE = {"vllm/models/interfaces.py": """
    class SupportsQuant:
        def __new__(cls, *args, **kwargs):
            instance = super().__new__(cls)
            cls._maybe_apply_model_mapping(instance)
            cls._scale(instance, 2)
            return instance

        def _maybe_apply_model_mapping(self):
            return None

        @classmethod
        def _scale(cls, instance, factor):
            return factor
"""}


def _findings(tmp_path, body: str):
    plugin = {"vllm_ascend/models/__init__.py": "", "vllm_ascend/models/quant.py": f"""
        from vllm.models.interfaces import SupportsQuant


        class NestedQuant(SupportsQuant):
{body}
    """}
    report = gatekit.gate_loaded(tmp_path, PKGS, CORE, plugin, ("vllm_ascend.models.quant",))
    return sorted((f.symbol, f.severity) for f in report.findings)


def test_an_unbound_call_through_cls_passes_the_instance_as_self(tmp_path):
    assert _findings(tmp_path / "a", """
            def _maybe_apply_model_mapping(self):
                return None

            @classmethod
            def _scale(cls, instance, factor):
                return factor
    """) == []


def test_an_override_that_needs_more_than_the_instance_still_breaks(tmp_path):
    found = _findings(tmp_path / "b", """
            def _maybe_apply_model_mapping(self, mapper):
                return mapper

            @classmethod
            def _scale(cls, instance):
                return 1
    """)
    assert [s for s, _ in found] == ["override:vllm_ascend.models.quant.NestedQuant._maybe_apply_model_mapping",
                                     "override:vllm_ascend.models.quant.NestedQuant._scale"], found


# ------------------------------------------------------------ a fallback for another core

ROPE_CORE = {"vllm/models/rope.py": """
    def get_rope(head_size, max_position, is_neox_style=True, rope_parameters=None):
        return head_size
"""}


def _rope(tmp_path, attempt: str, handler: str = "except TypeError"):
    plugin = {"vllm_ascend/models/__init__.py": "", "vllm_ascend/models/helium.py": f"""
        from vllm.models.rope import get_rope


        def helium_rope(dim, theta):
            try:
                return {attempt}
            {handler}:
                return get_rope(head_size=dim, rotary_dim=dim, max_position=4096, base=theta)
    """}
    report = gatekit.gate_loaded(tmp_path, PKGS, ROPE_CORE, plugin, ("vllm_ascend.models.helium",))
    return sorted((f.symbol, f.plugin_line) for f in report.findings)


def test_a_call_in_an_except_typeerror_fallback_is_not_a_break_where_the_attempt_fits_this_core(tmp_path):
    """vllm-omni's helium rope: `try: get_rope(**new) except TypeError: get_rope(rotary_dim=..., base=...)`.
    With a core whose get_rope takes the attempt, the fallback never runs (four false keys on
    the twenty-second held-out set)."""
    assert _rope(tmp_path / "a", "get_rope(head_size=dim, max_position=4096, rope_parameters={'base': theta})") == []
    # negative twins: the attempt does not fit this core either (both calls break), or the
    # handler does not catch the TypeError (the fallback is not one)
    assert [s for s, _ in _rope(tmp_path / "b", "get_rope(head_size=dim, max_position=4096, theta=theta)")] == [
        "call:vllm.models.rope.get_rope"]
    assert _rope(tmp_path / "c", "get_rope(head_size=dim, max_position=4096)", "except ValueError") == [
        ("call:vllm.models.rope.get_rope", 8)]
