"""What the gate's reachability derives from one file is shared across releases by the
file's content (issue 27 item 5, issue 30 item 9).

The forward view gates one plugin against several core releases in one process. Call
sites, function scopes, receiver types and the text searches over every file are
functions of a file's content (and, for receiver types in core, of what the core
factories they call return), so a release re-analyses only the files that differ from
a release already gated. These tests count analyses (never time them) and check that
the findings are exactly those of a run that shares nothing.
"""

from __future__ import annotations

from pathlib import Path

import gatekit

from overlay.gate import callers as callers_mod
from overlay.gate import run_gate
from overlay.gate.engine import Cache

ENGINE = '''
from vllm.sched import make_scheduler, Scheduler, KVConfig


class Engine:
    def __init__(self, config):
        self.scheduler = make_scheduler(config)
        self.kv: KVConfig = config.kv

    def step(self):
        return self.scheduler.schedule(1, budget=2)

    def run(self, sched: Scheduler):
        return sched.schedule(3, budget=4) + self.kv.size

    def reset(self, how):
        self.scheduler.reset_state(how, hard=True)
'''

PLUGIN = '''
from vllm.sched import Scheduler, KVConfig


class AscendScheduler(Scheduler):
    def __init__(self, config, kv: KVConfig):
        super().__init__(config)
        self.kv: KVConfig = kv

    def schedule(self, n):
        return self.kv.shared_by

    def reset_state(self, how):
        return how
'''


def sched(release: int) -> str:
    """Core's scheduler module at a release: 1 adds `budget`; 2 makes the factory build
    another class (engine.py, which calls it, is the same file in every release)."""
    budget = ", budget=None" if release >= 1 else ""
    made = "OtherScheduler" if release == 2 else "Scheduler"
    return (f"from dataclasses import dataclass\n\n\n@dataclass\nclass KVConfig:\n    size: int\n\n\n"
            f"class Scheduler:\n    def __init__(self, config):\n        self.config = config\n\n"
            f"    def schedule(self, n{budget}):\n        return n\n\n"
            f"    def reset_state(self, how, hard=False):\n        return how\n\n\n"
            f"class OtherScheduler(Scheduler):\n    pass\n\n\n"
            f"def make_scheduler(config) -> {made}:\n    return {made}(config)\n")


def util(release: int) -> str:
    """A core module that sets `shared_by` on some object (which KVConfig never has) except
    at release 1: only there is the plugin's read of it a finding (no core file sets the name)."""
    return "def helper(x):\n    return x\n" + ("" if release == 1 else "\n\ndef mark(x):\n    x.shared_by = 1\n")


def releases(tmp_path: Path) -> tuple[list[Path], Path]:
    cores = [gatekit.tree(tmp_path / f"core{r}", {
        "vllm/__init__.py": "", "vllm/_version.py": f"__version__ = version = '0.{r}.0'\n",
        "vllm/engine.py": ENGINE, "vllm/util.py": util(r), "vllm/sched.py": sched(r)})
        for r in range(3)]
    return cores, gatekit.tree(tmp_path / "plugin", {"vllm_ascend/__init__.py": "", "vllm_ascend/sched.py": PLUGIN})


def shown(report) -> list[tuple]:
    return [(f.kind, f.symbol, f.severity, f.plugin_path, f.plugin_line, f.core_path, f.core_line, f.message,
             f.reason) for f in report.findings]


def test_forward_findings_are_the_same_with_and_without_sharing(tmp_path):
    cores, plugin = releases(tmp_path)
    shared = Cache()
    seen = []
    for core in cores:
        together = shown(run_gate(core, plugin, cache=shared))
        alone = shown(run_gate(core, plugin, cache=Cache()))
        assert together == alone, core.name
        seen.append(together)
    # the fixture has teeth: the releases' findings differ, the unchanged engine.py's
    # receiver resolves through the changed factory, and only at release 1 does no core
    # file mention the field the plugin reads
    assert len({tuple(s) for s in seen}) == 3, seen
    assert [any("shared_by" in f[7] for f in s) for s in seen] == [False, True, False]
    assert [any("self.scheduler.schedule" in f[7] for f in s) for s in seen] == [False, True, False]


def _counting(monkeypatch):
    calls: list[tuple[str, str]] = []
    walks: list[str] = []
    real_sites = callers_mod.module_sites
    real_walk = getattr(callers_mod.Callers, "_receivers_walk", None)

    def module_sites(mod, plugin, name, data, scopes=None):
        calls.append((mod.path, name))
        return real_sites(mod, plugin, name, data, scopes)

    def walk(mod, core, factory):
        walks.append(mod.path if mod is not None else "")
        return real_walk(mod, core, factory)

    monkeypatch.setattr(callers_mod, "module_sites", module_sites)
    if real_walk is not None:
        monkeypatch.setattr(callers_mod.Callers, "_receivers_walk", staticmethod(walk))
    return calls, walks


def test_a_release_reanalyses_only_the_files_that_changed(tmp_path, monkeypatch):
    cores, plugin = releases(tmp_path)
    calls, walks = _counting(monkeypatch)
    shared = Cache()
    run_gate(cores[0], plugin, cache=shared)
    first_calls, first_walks = set(calls), set(walks)
    assert ("vllm/engine.py", "schedule") in first_calls
    for core in cores[1:]:
        del calls[:], walks[:]
        run_gate(core, plugin, cache=Cache())  # alone: every file it asks about is analysed
        alone_calls, alone_walks = set(calls), set(walks)
        del calls[:], walks[:]
        run_gate(core, plugin, cache=shared)
        # shared: an unchanged file is analysed again only for a name no release asked
        again = {c for c in calls if c[0] != "vllm/sched.py"}
        assert not again & first_calls, again & first_calls
        assert alone_calls & first_calls - {c for c in alone_calls if c[0] == "vllm/sched.py"}
        # receiver types: engine.py is the same file, but in release 2 the factory it calls
        # builds another class, so there (only there) it is read again
        assert "vllm/engine.py" in first_walks and "vllm/engine.py" in alone_walks
        assert ("vllm/engine.py" in walks) == (core.name == "core2"), (core.name, walks)
        first_calls |= set(calls)



def _text_callers(core: Path, plugin: Path, cache):
    from overlay.gate.callers import Callers
    from overlay.gate.index import TreeIndex
    from overlay.gate.source import DirSource

    csrc, psrc = DirSource(core), DirSource(plugin)
    cidx = TreeIndex(csrc, {}, packages=frozenset({"vllm"}))
    pidx = TreeIndex(psrc, {}, packages=frozenset({"vllm_ascend"}), other=cidx)
    return Callers([(csrc, frozenset({"vllm"}), cidx, False), (psrc, frozenset({"vllm_ascend"}), pidx, True)],
                   frozenset(), cache)


def test_the_class_used_otherwise_search_reads_only_the_changed_files(tmp_path, monkeypatch):
    """instances._used_otherwise (a class read as `Cls.x` or passed as a value anywhere)
    and instances.derived_by_name (the classes deriving from it) are searches over every
    file: a later release shares their answers for the files it holds unchanged, and
    answers as a run that shares nothing."""
    from overlay.gate import instances
    from overlay.gate.callers import Callers, TextCache

    base = {"vllm/__init__.py": "", "vllm/a.py": "class Runner:\n    pass\n",
            "vllm/c.py": "def f(x):\n    return x\n"}
    cores = [gatekit.tree(tmp_path / f"core{r}", {**base, "vllm/b.py": body}) for r, body in enumerate((
        "def g():\n    return 1\n",
        "from vllm.a import Runner\n\n\nclass Other(Runner):\n    pass\n",
        "def g():\n    return 2\n"))]
    plugin = gatekit.tree(tmp_path / "plugin", {"vllm_ascend/__init__.py": "", "vllm_ascend/p.py": "X = 1\n"})
    read: list[str] = []
    real = Callers.text

    def text(self, path, tree):
        read.append(path)
        return real(self, path, tree)

    monkeypatch.setattr(Callers, "text", text)
    shared = TextCache()
    answers = []
    def answer(callers):
        return instances._used_otherwise(callers, "Runner"), instances.derived_by_name(callers, "Runner")

    for r, core in enumerate(cores):
        alone = answer(_text_callers(core, plugin, TextCache()))
        del read[:]
        together = answer(_text_callers(core, plugin, shared))
        assert together == alone, core.name
        answers.append(together)
        if r:
            assert set(read) <= {"vllm/b.py"}, (core.name, read)
    assert answers == [(False, []), (False, [("vllm.b", "Other")]), (False, [])]
