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
