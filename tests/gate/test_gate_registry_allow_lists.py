"""False positives, "a registry name the plugin's platform refuses" (issue 27, twenty-eighth session).

Core registers KV connectors by name (`KVConnectorFactory.register_connector("Name",
"module", "Class")`, at module level), so each is a pick: the user's configuration may choose
it, and a core connector calling a plugin override with a new argument is a break. But
tpu-inference's platform refuses every connector outside its own list at start-up:

    kv_transfer_config = vllm_config.kv_transfer_config
    if kv_transfer_config is not None:
        allowed = ("TPUConnector", "TPUConnectorHMA", "TPUOffloadConnector")
        if kv_transfer_config.kv_connector not in allowed:
            raise ValueError(...)

Over vLLM 0.34.0 with tpu-inference 0.32.0rc1 the gate reported core's
`SimpleCPUOffloadConnector` calling `TPUDualBlockPool.free_blocks` with arguments the override
lacks: an error that cannot happen. An allow-list counts only where it is proven to run
whenever a name is chosen, and guards only a registry it shares names with or whose module
reads the value it checks (`refusals.py`); each twin below keeps the error.

The fixtures are synthetic; their shapes follow vLLM 0.34.0's
`distributed/kv_transfer/kv_connector/factory.py`, tpu-inference's `tpu_platform.py`
(`check_and_update_config`) and its connector module's own `register_connector` call.
"""

from __future__ import annotations

import ast
import textwrap

import gatekit
from hypothesis import given, settings
from hypothesis import strategies as st

from overlay.gate import refusals

PKGS = {"vllm/__init__.py": "", "vllm/platforms/__init__.py": "", "vllm/core/__init__.py": "",
        "vllm/kv/__init__.py": ""}

INTERFACE = """
    class Platform:
        @classmethod
        def check_and_update_config(cls, vllm_config):
            pass
"""

CONFIG = """
    from vllm.platforms.interface import Platform


    class VllmConfig:
        def __post_init__(self):
            Platform.check_and_update_config(self)
"""

BLOCK_POOL = """
    class BlockPool:
        def free_blocks(self, ids, touched=False):
            return ids
"""

BASE = """
    class KVConnectorBase:
        def finish(self, pool, ids):
            return ids
"""

OFFLOAD = """
    from vllm.kv.base import KVConnectorBase


    class OffloadConnector(KVConnectorBase):
        def finish(self, pool, ids):
            return pool.free_blocks(ids, touched=True)
"""

# core's registry: every connector by name, at module level
FACTORY = """
    class KVConnectorFactory:
        _registry = {}

        @classmethod
        def register_connector(cls, name, module_path, class_name):
            cls._registry[name] = (module_path, class_name)


    KVConnectorFactory.register_connector("NixlConnector", "vllm.kv.nixl", "NixlConnector")
    KVConnectorFactory.register_connector("OffloadConnector", "vllm.kv.offload", "OffloadConnector")
"""

CORE = {"vllm/platforms/interface.py": INTERFACE, "vllm/config.py": CONFIG, "vllm/core/block_pool.py": BLOCK_POOL,
        "vllm/kv/base.py": BASE, "vllm/kv/offload.py": OFFLOAD, "vllm/kv/factory.py": FACTORY}

# the plugin's own connector and block pool; it registers its connector as core does
CONNECTOR = """
    from vllm.core.block_pool import BlockPool
    from vllm.kv.base import KVConnectorBase
    from vllm.kv.factory import KVConnectorFactory


    class TPUBlockPool(BlockPool):
        def free_blocks(self, ids):
            return ids


    class TPUConnector(KVConnectorBase):
        def finish(self, pool, ids):
            return TPUBlockPool().free_blocks(ids)


    KVConnectorFactory.register_connector("TPUConnector", "vllm_ascend.connector", "TPUConnector")
"""

GUARD = """
        kv_transfer_config = vllm_config.kv_transfer_config
        if kv_transfer_config is not None:
            allowed = ("TPUConnector", "TPUConnectorHMA")
            if kv_transfer_config.kv_connector not in allowed:
                raise ValueError("unsupported kv_connector")
"""


def platform(body: str = GUARD, method: str = "check_and_update_config", prelude: str = "") -> str:
    inner = textwrap.indent(textwrap.dedent(body).strip("\n"), " " * 8)
    return (f"from vllm.platforms.interface import Platform\n\n{prelude}\n\n\n"
            f"class TpuPlatform(Platform):\n    @classmethod\n    def {method}(cls, vllm_config):\n{inner}\n")


INIT = 'def register():\n    import vllm_ascend.connector  # noqa\n    return "vllm_ascend.platform.TpuPlatform"\n'


# tpu-inference registers nothing: its connectors are named by module path
# (`kv_connector_module_path`), and core's factory looks the name up in its registry
UNREGISTERED = CONNECTOR[:CONNECTOR.index("    KVConnectorFactory.register_connector")]
FACTORY_READING = FACTORY.replace("""            cls._registry[name] = (module_path, class_name)
""", """            cls._registry[name] = (module_path, class_name)

        @classmethod
        def create_connector(cls, kv_transfer_config):
            return cls._registry.get(kv_transfer_config.kv_connector)
""")


def gate(tmp_path, plugin_platform: str | None, init: str = INIT, connector: str = CONNECTOR,
         factory: str = FACTORY):
    plugin = {"vllm_ascend/__init__.py": init, "vllm_ascend/connector.py": connector}
    if plugin_platform is not None:
        plugin["vllm_ascend/platform.py"] = plugin_platform
    return gatekit.gate_loaded(tmp_path, PKGS, {**CORE, "vllm/kv/factory.py": factory}, plugin,
                               ("vllm_ascend.connector",))


def severities(report) -> list[str]:
    return sorted(f.severity for f in report.findings if f.symbol.endswith("TPUBlockPool.free_blocks"))


def test_without_an_allow_list_a_registered_core_connector_is_picked(tmp_path):
    # the premise: core's registration picks OffloadConnector, whose call breaks the override
    assert severities(gate(tmp_path / "a", platform("pass"))) == ["error"]


def test_the_platform_s_allow_list_refuses_the_other_registered_connectors(tmp_path):
    assert "error" not in severities(gate(tmp_path / "a", platform()))


def test_an_allow_list_in_a_one_line_guard_refuses_too(tmp_path):
    body = """
        kv_transfer_config = vllm_config.kv_transfer_config
        if kv_transfer_config is not None and kv_transfer_config.kv_connector not in ("TPUConnector",):
            raise ValueError("unsupported kv_connector")
    """
    assert "error" not in severities(gate(tmp_path / "a", platform(body)))


def test_a_module_level_allow_list_refuses_too(tmp_path):
    body = """
        if vllm_config.kv_transfer_config.kv_connector not in SUPPORTED:
            raise ValueError("unsupported kv_connector")
    """
    prelude = 'SUPPORTED = ["TPUConnector"]'
    assert "error" not in severities(gate(tmp_path / "a", platform(body, prelude=prelude)))


def test_an_allow_list_guards_the_registry_whose_module_reads_the_value_it_checks(tmp_path):
    # no name shared: the factory reads `kv_transfer_config.kv_connector` to choose
    assert "error" not in severities(gate(tmp_path / "a", platform(), connector=UNREGISTERED,
                                          factory=FACTORY_READING))


def test_an_allow_list_sharing_neither_names_nor_the_value_guards_nothing(tmp_path):
    assert severities(gate(tmp_path / "a", platform(), connector=UNREGISTERED)) == ["error"]


def test_an_allow_list_of_another_value_guards_nothing_where_the_factory_reads_its_own(tmp_path):
    body = GUARD.replace("kv_transfer_config.kv_connector not in", "kv_transfer_config.kv_role not in")
    assert severities(gate(tmp_path / "a", platform(body), connector=UNREGISTERED,
                           factory=FACTORY_READING)) == ["error"]


def test_an_allow_list_that_names_the_connector_keeps_it(tmp_path):
    body = GUARD.replace('"TPUConnectorHMA"', '"OffloadConnector"')
    assert severities(gate(tmp_path / "a", platform(body))) == ["error"]


def test_an_allow_list_of_another_registry_s_names_refuses_nothing(tmp_path):
    # `if quantization not in ("awq", "gptq"): raise` says nothing about KV connectors
    body = GUARD.replace('("TPUConnector", "TPUConnectorHMA")', '("awq", "gptq")')
    assert severities(gate(tmp_path / "a", platform(body))) == ["error"]


def test_an_allow_list_under_another_condition_is_not_proven(tmp_path):
    # vllm-ascend's AFD check refuses other connectors only when AFD is on
    body = """
        kv_transfer_config = vllm_config.kv_transfer_config
        if vllm_config.afd_config is not None:
            if kv_transfer_config.kv_connector not in ("TPUConnector",):
                raise ValueError("AFD needs the TPU connector")
    """
    assert severities(gate(tmp_path / "a", platform(body))) == ["error"]


def test_an_allow_list_after_a_return_is_not_proven(tmp_path):
    body = """
        if vllm_config.lenient:
            return
        if vllm_config.kv_transfer_config.kv_connector not in ("TPUConnector",):
            raise ValueError("unsupported kv_connector")
    """
    assert severities(gate(tmp_path / "a", platform(body))) == ["error"]


def test_a_guard_that_does_not_raise_refuses_nothing(tmp_path):
    # vllm-rbln's `reject(...)` may only warn
    body = """
        if vllm_config.kv_transfer_config.kv_connector not in ("TPUConnector",):
            reject("unsupported kv_connector")
    """
    assert severities(gate(tmp_path / "a", platform(body))) == ["error"]


def test_an_allow_list_in_a_method_core_never_calls_refuses_nothing(tmp_path):
    assert severities(gate(tmp_path / "a", platform(method="validate_for_tests"))) == ["error"]


def test_an_allow_list_outside_the_platform_class_refuses_nothing(tmp_path):
    # the same guard in a class the entry point does not name
    init = 'def register():\n    import vllm_ascend.connector  # noqa\n    return None\n'
    assert severities(gate(tmp_path / "a", platform(), init=init)) == ["error"]


# ----------------------------------------------------------------------------- the rule as a class

WRAPPERS = {
    "not-none": "if kv_transfer_config is not None:",  # the value's own object: no name is chosen without it
    "other-not-none": "if vllm_config.afd_config is not None:",
    "condition": "if vllm_config.strict:",
}


@settings(max_examples=200, deadline=None)
@given(wrappers=st.lists(st.sampled_from(sorted(WRAPPERS)), max_size=3), return_before=st.booleans(),
       raises=st.booleans(), return_in_body=st.booleans(), one_line=st.booleans(), by_name=st.booleans())
def test_an_allow_list_is_read_exactly_where_it_is_proven_to_run(wrappers, return_before, raises, return_in_body,
                                                                  one_line, by_name):
    lines = ["kv_transfer_config = vllm_config.kv_transfer_config"]
    if return_before:
        lines += ["if vllm_config.lenient:", "    return"]
    if by_name:
        lines.append('allowed = ("TPUConnector", "TPUConnectorHMA")')
    strings = "allowed" if by_name else '("TPUConnector", "TPUConnectorHMA")'
    indent = ""
    for w in wrappers:
        lines.append(indent + WRAPPERS[w])
        indent += "    "
    test = (f"kv_transfer_config is not None and kv_transfer_config.kv_connector not in {strings}" if one_line
            else f"kv_transfer_config.kv_connector not in {strings}")
    lines.append(f"{indent}if {test}:")
    if return_in_body:
        lines += [f"{indent}    if vllm_config.lenient:", f"{indent}        return"]
    lines.append(f"{indent}    " + ('raise ValueError("unsupported")' if raises else 'logger.warning("unsupported")'))
    source = platform("\n".join(lines))
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    found = refusals.read([("p.py", tree, cls)], frozenset({"TpuPlatform"}), lambda name: True, [])
    proven = all(w == "not-none" for w in wrappers) and not return_before and raises and not return_in_body
    assert bool(found.allow_lists) == proven, source
    if proven:
        (allow,) = found.allow_lists
        assert allow.allowed == {"TPUConnector", "TPUConnectorHMA"} and allow.read == "kv_connector"
        # it refuses another name of a registry whose module reads the value, and only there
        assert found.refusing("OffloadConnector", lambda: frozenset(), None, lambda: frozenset({"kv_connector"})) is allow
        assert found.refusing("TPUConnector", lambda: frozenset(), None, lambda: frozenset({"kv_connector"})) is None
        assert found.refusing("OffloadConnector", lambda: frozenset(), None, lambda: frozenset({"kv_role"})) is None


# core's registry as a table instead of calls: the dict's keys are the registry's names
# (vLLM's model registry, `"SarvamMLAForCausalLM": ("sarvam", "SarvamMLAForCausalLM")`)
TABLE = """
    _CONNECTORS = {
        "NixlConnector": ("vllm.kv.nixl", "NixlConnector"),
        "OffloadConnector": ("vllm.kv.offload", "OffloadConnector"),
    }
"""


def test_an_allow_list_sharing_a_table_s_keys_refuses_its_other_entries(tmp_path):
    body = GUARD.replace('"TPUConnectorHMA"', '"NixlConnector"')
    assert "error" not in severities(gate(tmp_path / "a", platform(body), connector=UNREGISTERED, factory=TABLE))


def test_an_allow_list_sharing_no_key_of_the_table_refuses_nothing(tmp_path):
    assert severities(gate(tmp_path / "a", platform(), connector=UNREGISTERED, factory=TABLE)) == ["error"]


def test_an_allow_list_name_bound_twice_is_not_proven(tmp_path):
    body = GUARD.replace('            if kv_transfer_config.kv_connector',
                         '            allowed = allowed + extra_connectors()\n'
                         '            if kv_transfer_config.kv_connector')
    assert severities(gate(tmp_path / "a", platform(body))) == ["error"]
