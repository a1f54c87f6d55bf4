"""One gate run: index both trees, scan the plugin, run the checks.

`gate_sources` works on any two TreeSources (directories or git commits) and is
what bisection calls at every step; `run_gate` in `overlay.gate` wraps it for two
directories and applies the allowlist.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from overlay.gate import checks
from overlay.gate.conditions import Env, core_version
from overlay.gate.findings import Finding
from overlay.gate.index import ModuleInfo, TreeIndex
from overlay.gate.scan import PluginFacts, scan_module
from overlay.gate.source import TreeSource

# Top-level directories that are never the importable package of a tree.
NOT_PACKAGES = frozenset({"tests", "test", "docs", "doc", "examples", "benchmarks", "tools", "csrc",
                          "cmake", "build", "dist", "scripts", "requirements"})


def top_packages(source: TreeSource) -> frozenset[str]:
    """Importable top-level packages of a tree: directories with an __init__.py."""
    names = set()
    for path in source.py_files():
        parts = path.split("/")
        if len(parts) == 2 and parts[1] == "__init__.py" and parts[0] not in NOT_PACKAGES:
            names.add(parts[0])
    return frozenset(names)


@dataclass
class Cache:
    """Parsed modules shared across runs (bisect steps), keyed by content."""

    core: dict[str, ModuleInfo] = field(default_factory=dict)
    plugin: dict[str, ModuleInfo] = field(default_factory=dict)


@dataclass(frozen=True)
class RawResult:
    findings: tuple[Finding, ...]
    core_version: str | None
    core_files_read: tuple[str, ...]
    plugin_files: int
    seconds: float


def gate_sources(core_src: TreeSource, plugin_src: TreeSource, *, version: str | None = None,
                 cache: Cache | None = None, core_packages: frozenset[str] | None = None,
                 plugin_packages: frozenset[str] | None = None) -> RawResult:
    started = time.perf_counter()
    cache = cache or Cache()
    core_packages = core_packages if core_packages is not None else top_packages(core_src)
    plugin_packages = plugin_packages if plugin_packages is not None else top_packages(plugin_src)
    core_packages = core_packages - plugin_packages
    core = TreeIndex(core_src, cache.core, packages=core_packages)
    world = TreeIndex(plugin_src, cache.plugin, packages=plugin_packages, other=core)

    def is_core(name: str) -> bool:
        return name.split(".")[0] in core_packages

    version = version or core_version(core, next(iter(sorted(core_packages)), "vllm"))
    env = Env(world=world, is_core=is_core, version=version)
    facts = PluginFacts()
    for pkg in sorted(plugin_packages):
        for path in plugin_src.py_files(pkg):
            name = path[:-3].replace("/", ".")
            if name.endswith(".__init__"):
                name = name[: -len(".__init__")]
            mod = world.module(name)
            if mod is not None and mod.path == path:
                scan_module(mod, env, facts)
    found = (checks.check_imports(facts, core) + checks.check_overrides(facts, world, is_core)
             + checks.check_replacements(facts, world, core))
    unique = sorted(set(found), key=Finding.sort_key)
    return RawResult(findings=tuple(unique), core_version=version,
                     core_files_read=tuple(sorted(core.files_read)), plugin_files=facts.files,
                     seconds=time.perf_counter() - started)
