"""Run the plugin's CPU unit tests with execution probes at given sites (the forward
matrix's execution column): which tests reached each site, and what failed where.

The plugin tree is exported (the composed branch stays untouched), each probed file is
rewritten by `probes.instrument` in the export only, and the run is the composed-test
run (`testrun.run_pytest`: same environment, same NPU-routed files left out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from overlay import paths
from overlay.testing import probes, testenv, testrun

READ_MAX = 8 << 20


@dataclass(frozen=True)
class ExecutionRun:
    report: testrun.RunReport
    placed: dict[str, bool] = field(default_factory=dict)  # site "path:line" -> a probe was placed


def probe_tree(tree: Path, sites: list[str]) -> dict[str, bool]:
    """Instrument the exported `tree` in place for `sites` ("path:line"); site -> placed."""
    by_file: dict[str, dict[str, int]] = {}
    for site in sites:
        rel, _, line = site.rpartition(":")
        if rel and line.isdigit():
            by_file.setdefault(rel, {})[site] = int(line)
    placed = {site: False for site in sites}
    for rel, wanted in by_file.items():
        path = tree / rel
        try:
            raw = paths.read_capped(path, READ_MAX, within=tree)
        except (OSError, paths.NotARegularFile, paths.OutsideTree):
            continue
        result = probes.instrument(raw.decode("utf-8", "replace"), wanted)
        if result is None:
            continue
        text, made = result
        path.write_text(text, encoding="utf-8")
        placed.update({p.id: p.placed for p in made})
    return placed


def run_with_probes(python: Path, plugin_repo: Path, core_dir: Path, scratch: Path, sites: list[str],
                    echo=None) -> ExecutionRun:
    tree = testenv.export_tree(plugin_repo, "HEAD", scratch / "plugin")
    placed = probe_tree(tree, sites)
    (scratch / "run").mkdir()
    report = testrun.run_pytest(python, tree, core_dir, scratch / "run",
                                ["-q", "--continue-on-collection-errors", "tests/ut",
                                 *testrun.npu_ignores(tree)], echo)
    return ExecutionRun(report, placed)
