"""A receiver core builds from its own class is not the plugin's object because the
plugin has a class of the same name (issue 27, twenty-seventh session).

vLLM 0.9.0's `SimpleConnector` keeps `self.consumer_buffer = SimpleBuffer(...)`, core's
own `SimpleBuffer` imported from `kv_lookup_buffer.simple_buffer`, and calls
`self.consumer_buffer.drop_select(input_tokens, roi)`. vllm-ascend 0.8.5rc1 to 0.9.2rc1
have a `SimpleBuffer(KVLookupBufferBase)` of their own, with another `drop_select`.
Matching the built class by name alone took core's call for one of the plugin's
(4 false keys, classified in benchmarks/gate_eval.yaml). Resolved through the core
module's own bindings, the name is core's class; a class the plugin replaces there, or
registers out of tree under that name, may still be the plugin's.

Synthetic fixtures; the shapes follow vLLM 0.9.0's
`distributed/kv_transfer/kv_connector/simple_connector.py` and
`kv_lookup_buffer/simple_buffer.py`.
"""

from __future__ import annotations

import gatekit

PKGS = {"vllm/__init__.py": "", "vllm/kv/__init__.py": ""}


BUFFER = """
    class KVLookupBufferBase:
        def drop_select(self, input_tokens, roi):
            raise NotImplementedError


    class SimpleBuffer(KVLookupBufferBase):
        def drop_select(self, input_tokens, roi):
            return input_tokens
"""

CONNECTOR = """
    from vllm.kv.simple_buffer import SimpleBuffer


    class SimpleConnector:
        def __init__(self):
            self.consumer_buffer = SimpleBuffer()

        def recv_kv_caches(self, input_tokens, roi):
            return self.consumer_buffer.drop_select(input_tokens, roi)
"""

PLUGIN = """
    from vllm.kv.simple_buffer import KVLookupBufferBase


    class SimpleBuffer(KVLookupBufferBase):
        def drop_select(self, input_tokens):
            return input_tokens
"""

CORE = {"vllm/kv/simple_buffer.py": BUFFER, "vllm/kv/simple_connector.py": CONNECTOR}
OVERRIDE = "SimpleBuffer.drop_select"


def gate(tmp_path, plugin: str = PLUGIN, core: dict[str, str] = CORE):
    return gatekit.gate_loaded(tmp_path, PKGS, core, {"vllm_ascend/buffer.py": plugin}, ("vllm_ascend.buffer",))


def errors(report) -> list[str]:
    return [f.message for f in report.findings if f.symbol.endswith(OVERRIDE) and f.severity == "error"]


def test_core_s_own_class_of_the_plugin_s_name_builds_no_plugin_object(tmp_path):
    assert errors(gate(tmp_path / "a")) == []


def test_a_receiver_built_from_a_name_the_core_module_does_not_bind_to_core_s_class_may_hold_it(tmp_path):
    # the connector takes its buffer class from a table it does not import: the name may be
    # the plugin's class, so core's call is the plugin's contract
    connector = CONNECTOR.replace("from vllm.kv.simple_buffer import SimpleBuffer\n",
                                  "SimpleBuffer = None  # set by a registry\n")
    found = errors(gate(tmp_path / "a", core={**CORE, "vllm/kv/simple_connector.py": connector}))
    assert len(found) == 1 and "drop_select" in found[0]


def test_a_core_class_the_plugin_replaces_there_may_hold_it(tmp_path):
    plugin = PLUGIN + ("\n\n    import vllm.kv.simple_connector as connector\n\n"
                       "    connector.SimpleBuffer = SimpleBuffer\n")
    found = errors(gate(tmp_path / "a", plugin=plugin))
    assert len(found) == 1


def test_a_class_the_plugin_registers_out_of_tree_under_that_name_may_hold_it(tmp_path):
    # `CustomOp.register_oot(_decorated_op_cls=SimpleBuffer, name="SimpleBuffer")`: core's
    # `SimpleBuffer(...)` builds the plugin's class (oot.py: the op's base defines `__new__`
    # and `register_oot`, as vLLM's CustomOp), so core's call reaches it
    custom_op = ("\n\n    class CustomOp:\n"
                 "        def __new__(cls, *args, **kwargs):\n            return super().__new__(cls)\n\n"
                 "        @classmethod\n"
                 "        def register_oot(cls, _decorated_op_cls=None, name=None):\n            return _decorated_op_cls\n")
    core = {**CORE, "vllm/kv/simple_buffer.py": BUFFER.replace("class KVLookupBufferBase:",
                                                               "class KVLookupBufferBase(CustomOp):") + custom_op}
    plugin = PLUGIN + ("\n\n    from vllm.kv.simple_buffer import CustomOp\n\n"
                       "    CustomOp.register_oot(_decorated_op_cls=SimpleBuffer, name=\"SimpleBuffer\")\n")
    # the same core tree without the registration: core's own class, no error
    assert errors(gate(tmp_path / "a", core=core)) == []
    found = errors(gate(tmp_path / "b", plugin=plugin, core=core))
    assert len(found) == 1


def test_a_class_the_plugin_replaces_where_core_imports_it_from_may_hold_it(tmp_path):
    # replaced in the module the connector imports it from: which class the connector binds
    # depends on import order, so its call stays the plugin's contract
    plugin = PLUGIN + ("\n\n    import vllm.kv.simple_buffer as buffers\n\n"
                       "    buffers.SimpleBuffer = SimpleBuffer\n")
    found = errors(gate(tmp_path / "a", plugin=plugin))
    assert len(found) == 1
