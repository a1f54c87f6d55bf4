"""The smoke's stand-ins keep what the real objects' `__init__`s made: a request
state's own views of its arrays, and layers registered where core looks them up."""

from __future__ import annotations

import sys
import textwrap
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "overlay" / "smoke"))
import decode_steps  # noqa: E402  (runs in the composed env, so it is loaded by path here too)
import runner_init  # noqa: E402
import walker  # noqa: E402

STATES = """
    class RequestState:
        def __init__(self, max_num_reqs, device):
            self.req_id_to_index = {}
            self.num_computed_tokens_np = [0] * max_num_reqs
            self.num_computed_tokens = device.staged(max_num_reqs)   # needs the device

    class AscendRequestState(RequestState):
        def __init__(self, max_num_reqs, device):
            super().__init__(max_num_reqs, device)
            self.num_computed_tokens_cpu = self.num_computed_tokens_np   # one storage, two names
"""


@pytest.fixture
def states(tmp_path):
    path = tmp_path / "vllm_ascend" / "fake_states.py"
    path.parent.mkdir()
    path.write_text(textwrap.dedent(STATES))
    namespace: dict = {"__name__": "fake_states"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)  # noqa: S102 - the test's own source
    return namespace["AscendRequestState"]


def test_seeding_writes_in_place_so_the_class_views_see_the_smoke_values(states):
    state, skipped = runner_init.build(states, 4, "cpu")
    assert [s.attributes for s in skipped] == [("num_computed_tokens",)]
    decode_steps.seed(state, {"num_computed_tokens_np": [10, 11, 12, 13],
                              "num_computed_tokens": types.SimpleNamespace(gpu=[10, 11, 12, 13])})
    # What core's update_requests writes to the NumPy mirror is what the plugin reads from its CPU view.
    state.num_computed_tokens_np[1] = 20
    assert state.num_computed_tokens_cpu == [10, 20, 12, 13]
    assert state.num_computed_tokens.gpu == [10, 11, 12, 13]  # not built on the CPU: the stand-in


def test_seeding_a_namespace_fills_the_built_objects_own_attributes(states):
    state, _ = runner_init.build(states, 2, "cpu")
    state.num_computed_tokens = types.SimpleNamespace(gpu=[0, 0], np=[0, 0])
    built = state.num_computed_tokens
    decode_steps.seed(state, {"num_computed_tokens": types.SimpleNamespace(gpu=[3, 4])})
    assert state.num_computed_tokens is built and built.gpu == [3, 4] and built.np == [0, 0]


def test_layers_are_registered_in_the_configs_forward_context_for_the_block_only():
    config = types.SimpleNamespace(static_forward_context={"kept": 1})
    with walker.registered(config, {"model.layers.0.self_attn.attn": "layer"}):
        assert config.static_forward_context == {"kept": 1, "model.layers.0.self_attn.attn": "layer"}
    assert config.static_forward_context == {"kept": 1}
    with pytest.raises(RuntimeError, match="already holds kept"):
        with walker.registered(config, {"kept": 2}):
            pass
    assert config.static_forward_context == {"kept": 1}
