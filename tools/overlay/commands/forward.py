"""`overlay forward`: the forward matrix, graded by what upstream's maintainers then did.

For one pin set's plugin (composed with the series in scratch state), each core release
of a range: the gate's errors against it, and, where upstream has since shipped a plugin
release that declares that core, the backcast of each error (overlay.gate.backcast):
did the maintainers change the site by that release, and does their release still show
the same finding against the core it declares. Markdown and JSON, and the Markdown into
the CI job summary when `$GITHUB_STEP_SUMMARY` names a file.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

from overlay import paths, reporting
from overlay.errors import OverlayError, printable
from overlay.gate import run_gate
from overlay.gate.backcast import backcast, grade
from overlay.gate.baseline import key as finding_key
from overlay.gate import execution as grade_exec
from overlay.gate.engine import Cache, collector_paused
from overlay.series.model import Project
from overlay.testing import execution, testenv, testrun
from overlay.trees import compose, sources
from overlay.trees.baseline_trees import declared_release

VERSION = re.compile(r"^\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?$")


def register(sub) -> None:
    p = sub.add_parser(
        "forward", help="gate a pin set's plugin against newer core releases, graded by upstream's own releases",
        description="Compose the pin set's plugin with the series in scratch state, gate it against each "
                    "core release of --releases, and grade each error by the plugin release that later "
                    "declared that core (backcast: did the maintainers change the site; does their release "
                    "still show it). Writes FORWARD.md and forward.json into --out. A forecast: exit 0 "
                    "whatever it finds; 2 on bad input.")
    p.add_argument("--pin", required=True, metavar="NAME", help="pin set whose plugin is gated")
    p.add_argument("--releases", required=True, metavar="A..B|A,B,...",
                   help="core releases: a range of the vllm source archives in <mirror>/pypi/ (A..B, "
                        "both included) or a comma list")
    p.add_argument("--mirror", type=Path, default=None, metavar="DIR",
                   help="mirror directory with pypi/ (default: $OVERLAY_MIRROR)")
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="where FORWARD.md and forward.json go (default: print the Markdown only)")
    p.add_argument("--execute", action="store_true",
                   help="also run the plugin's CPU unit tests against each release, with a probe at each "
                        "error's site (the execution column; needs the composed-test environment)")
    p.add_argument("--venv", type=Path, default=None, metavar="DIR",
                   help="composed-test environment for --execute (default: $OVERLAY_COMPOSED_VENV or "
                        "~/.cache/overlay/composed-test-venv)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout, no progress")
    p.set_defaults(func=run)


def _vkey(version: str) -> tuple:
    parts = re.findall(r"\d+|[a-z]+", version)
    return tuple((0, int(x)) if x.isdigit() else (-1, x) for x in parts)


def _archives(folder: Path, name: str) -> dict[str, Path]:
    """{version: archive} of `name`'s source archives in `folder`."""
    out = {}
    if folder.is_dir():
        prefix = name.replace("-", "_")
        for p in folder.iterdir():
            for stem in (name, prefix):
                if p.name.startswith(stem + "-") and p.name.endswith(".tar.gz"):
                    version = p.name[len(stem) + 1:-len(".tar.gz")]
                    if VERSION.match(version):
                        out[version] = p
    return out


def releases_in(spec: str, available: list[str]) -> list[str]:
    """The releases `spec` names (pure): `A..B` over `available`, or a comma list."""
    if ".." in spec:
        lo, hi = (s.strip() for s in spec.split("..", 1))
        if not (VERSION.match(lo) and VERSION.match(hi)):
            raise OverlayError(f"--releases {spec!r}: expected A..B of release versions, e.g. 0.28.0..0.33.0")
        chosen = [v for v in available if _vkey(lo) <= _vkey(v) <= _vkey(hi)]
    else:
        chosen = [s.strip() for s in spec.split(",") if s.strip()]
        bad = [v for v in chosen if not VERSION.match(v)]
        if bad or not chosen:
            raise OverlayError(f"--releases {spec!r}: {bad[0] if bad else 'no release'} is not a release version",
                               hint="e.g. --releases 0.28.0..0.33.0 or --releases 0.28.0,0.29.0")
    if not chosen:
        raise OverlayError(f"--releases {spec}: no vllm source archive in that range",
                           hint="put the archives in <mirror>/pypi/")
    return sorted(chosen, key=_vkey)


READ_MAX = 8 << 20  # a plugin source file, as the gate caps them


def _read(tree: Path, rel: str) -> str | None:
    """A file of a plugin tree as text (regular, inside the tree, capped), or None."""
    try:
        raw = paths.read_capped(tree / rel, READ_MAX, within=tree)
    except (OSError, paths.NotARegularFile, paths.OutsideTree):
        return None
    return None if len(raw) > READ_MAX else raw.decode("utf-8", "replace")


def run(args: argparse.Namespace) -> int:
    root = Path(args.root)
    project = Project.load(root)
    pin = project.pin(args.pin)
    mirror = paths.mirror_root(args.mirror)
    if mirror is None:
        raise OverlayError("overlay forward needs the release archives: no mirror given",
                           hint="pass --mirror DIR (or OVERLAY_MIRROR) holding pypi/")
    progress = reporting.progress("forward", quiet=args.json)
    cores = _archives(mirror / "pypi", "vllm")
    chosen = releases_in(args.releases, sorted(cores, key=_vkey))
    plugin_releases = _archives(mirror / "pypi", "vllm-ascend")
    (root / ".overlay").mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="forward-", dir=root / ".overlay"))
    try:
        compose.compose(project, pin, targets=["plugin"], into=scratch, mirror=mirror, force=False,
                        report=lambda _: None, progress=progress)
        plugin = paths.composed_dir(root, pin.name, "plugin", scratch)
        venv = (args.venv or testenv.default_venv()).resolve() if args.execute else None
        if venv is not None and (venv == root.resolve() or root.resolve() in venv.parents):
            raise OverlayError(f"--venv {venv} is inside the repository", hint="put it outside")
        doc = _matrix(root, mirror, pin.name, plugin, chosen, plugin_releases, progress, venv=venv)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    markdown = render(doc)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "FORWARD.md").write_text(markdown, encoding="utf-8")
        (args.out / "forward.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        with open(summary, "a", encoding="utf-8") as fh:
            fh.write(markdown)
    sys.stdout.write(json.dumps(doc, indent=2, sort_keys=True) + "\n" if args.json else markdown)
    return 0


def _no_home(text: str) -> str:
    """A message for a committed document: no path of this machine (the home folder)."""
    return text.replace(str(Path.home()), "~")


def _execute(root: Path, env: testenv.Environment, plugin: Path, core_dir: Path, version: str, sites: list[str],
             progress) -> execution.ExecutionRun:
    """The plugin's unit tests against the release `core_dir`, probed at `sites`."""
    venv, requirements = env.venv, env.requirements
    python = testenv.ensure_venv(venv, progress, requirements)
    marker = core_dir.parent / ".complete"
    digest = marker.read_text().split()[-1][:16] if marker.is_file() else "release"
    installed = testenv.ensure_release_core(python, venv, core_dir, f"release-{digest}", version, progress)
    if progress:
        progress(f"running the plugin's unit tests against vllm {version} ({len(sites)} probe(s))")
    (root / ".overlay").mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="forward-exec-", dir=root / ".overlay"))
    try:
        return execution.run_with_probes(python, plugin, installed, scratch, sites)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _item_spans(plugin: Path, items: list[dict]) -> list[tuple[str, tuple[int, int]]]:
    """Each error's (path, enclosing function span), each plugin file read once."""
    texts: dict[str, str | None] = {}
    out = []
    for item in items:
        path, _, line = item["where"].rpartition(":")
        if path not in texts:
            texts[path] = _read(plugin, path)
        out.append((path, grade_exec.enclosing_span(texts[path], int(line))))
    return out


def _error_spans(plugin: Path, items: list[dict]) -> dict[str, list[tuple[int, int]]]:
    spans: dict[str, list[tuple[int, int]]] = {}
    for path, span in _item_spans(plugin, items):
        spans.setdefault(path, []).append(span)
    return spans


def _execution_fields(run: execution.ExecutionRun | None, plugin: Path, items: list[dict]) -> dict:
    """Fill each item's execution label; the row's execution summary (pure apart from reads)."""
    if run is None:
        return {}
    if run.report.collected is None:  # nothing ran: never "not reached"
        crash = grade_exec.stopping_crash(list(run.report.output_tail), "vllm_ascend")
        for item in items:
            item["execution"] = grade_exec.DID_NOT_START
        sites = []
        if crash is not None:
            spans = _error_spans(plugin, items)
            for item, (path, span) in zip(items, _item_spans(plugin, items)):
                if path == crash.path and span[0] <= crash.line <= span[1]:
                    item["execution"] = f"{grade_exec.FAILED_THERE} (the tests' import stopped here)"
            sites = grade_exec.grade_failures({"<import>": f"{crash.path}:{crash.line}: {_no_home(crash.message)}"},
                                              "vllm_ascend", spans)
        return {"execution": {
            "collected": None, "passed": 0, "failed": 0, "collect_errors": 0,
            "stopped": _no_home(printable(testrun.real_error(run.report.output_tail)))[:300],
            "errors_failed_there": sum(1 for i in items if i["execution"].startswith(grade_exec.FAILED_THERE)),
            "errors_reached": 0, "errors_not_reached": 0, "errors_not_probed": 0,
            "plugin_crash_sites": sites,
            "forecast": sum(1 for g in sites if g["grade"] == "forecast"),
            "missed": sum(1 for g in sites if g["grade"] == "missed"),
        }}
    failures = run.report.failures()
    spans = _error_spans(plugin, items)
    for item, (path, span) in zip(items, _item_spans(plugin, items)):
        outcome, tests = grade_exec.grade_site(item["where"], span, run.placed.get(item["where"]),
                                               run.report.probes.get(item["where"], ()), failures)
        item["execution"] = grade_exec.label(outcome, tests)
        item["execution_tests"] = tests[:5]
    graded = grade_exec.grade_failures({t: _no_home(w) for t, w in failures.items()}, "vllm_ascend", spans)
    return {"execution": {
        "collected": run.report.collected, "passed": run.report.count("passed"),
        "failed": run.report.count("failed") + run.report.count("error"),
        "collect_errors": len(run.report.collect_errors),
        "errors_failed_there": sum(1 for i in items if i["execution"].startswith(grade_exec.FAILED_THERE)),
        "errors_reached": sum(1 for i in items if i["execution"].startswith(grade_exec.REACHED)),
        "errors_not_reached": sum(1 for i in items if i["execution"] == grade_exec.NOT_REACHED),
        "errors_not_probed": sum(1 for i in items if i["execution"] == grade_exec.NOT_PROBED),
        "plugin_crash_sites": graded,
        "forecast": sum(1 for g in graded if g["grade"] == "forecast"),
        "missed": sum(1 for g in graded if g["grade"] == "missed"),
    }}


def _matrix(root: Path, mirror: Path, pin: str, plugin: Path, chosen: list[str],
            plugin_releases: dict[str, Path], progress, venv: Path | None = None) -> dict:
    with collector_paused():  # one pause for all the gate runs sharing one Cache
        return _gated(root, mirror, pin, plugin, chosen, plugin_releases, progress, venv)


def _gated(root: Path, mirror: Path, pin: str, plugin: Path, chosen: list[str],
           plugin_releases: dict[str, Path], progress, venv: Path | None) -> dict:
    cache = Cache()
    allow = root / "gate-allowlist.yaml"
    allow = allow if allow.is_file() else None
    declared: dict[str, str] = {}  # core version -> the newest plugin release declaring it
    for version in sorted(plugin_releases, key=_vkey):
        tree = sources.release_tree(root, mirror, "vllm-ascend", version, progress)
        core = declared_release(tree)
        if core:
            declared[core] = version
    rows = []
    for version in chosen:
        if progress:
            progress(f"gating against vllm {version}")
        core_dir = sources.release_tree(root, mirror, "vllm", version, progress)
        report = run_gate(core_dir, plugin, allow, pin, note_unused=False, cache=cache)
        errors = list(report.failing)
        row = {"release": version, "errors": len(errors), "plugin_release": declared.get(version),
               "findings": []}
        upstream_keys: set = set()
        release_tree = None
        if version in declared:
            release_tree = sources.release_tree(root, mirror, "vllm-ascend", declared[version], progress)
            upstream = run_gate(core_dir, release_tree, allow, pin, note_unused=False, cache=cache)
            upstream_keys = {finding_key(f)[:2] for f in upstream.failing}
            row["upstream_errors"] = len(upstream.failing)
        for f in errors:
            item = {"kind": f.kind, "symbol": f.symbol, "where": f"{f.plugin_path}:{f.plugin_line}",
                    "summary": printable(f.short())[:200], "execution": "not run"}
            if release_tree is not None:
                outcome, site = backcast(_read(plugin, f.plugin_path), f.plugin_line,
                                         _read(release_tree, f.plugin_path))
                still = finding_key(f)[:2] in upstream_keys
                item.update(site=site, backcast=outcome, upstream_still_has_it=still, grade=grade(outcome, still))
            row["findings"].append(item)
        if venv is not None:
            try:
                env = testenv.select_environment(venv, core_dir)
            except OverlayError:
                env = None
            if env is None:
                wanted = testenv.torch_pin(_read(core_dir, "requirements/cpu.txt"))
                have = testenv.torch_pin(testenv.REQUIREMENTS.read_text())
                row["execution_skipped"] = (f"not run: vllm {version} needs torch {wanted}, the composed-test "
                                            f"environment has {have} (no requirements/composed-test-torch{wanted}.txt)")
                for item in row["findings"]:
                    item["execution"] = "not run (torch)"
            else:
                if env.deviation:
                    row["execution_deviation"] = env.deviation
                run_ = _execute(root, env, plugin, core_dir, version, [i["where"] for i in row["findings"]],
                                progress)
                row.update(_execution_fields(run_, plugin, row["findings"]))
        graded = [i for i in row["findings"] if "grade" in i]
        row["graded"] = {g: sum(1 for i in graded if i["grade"] == g)
                         for g in ("confirmed", "upstream-bug", "not-borne-out")}
        rows.append(row)
    return {"pin": pin, "releases": rows, "declared": declared}


def render(doc: dict) -> str:
    executed = any("execution" in r for r in doc["releases"])
    out = [f"# Forward matrix: pin set `{doc['pin']}`", "",
           "Each row gates the pin set's plugin (with the series) against a core release. Where upstream "
           "has since shipped a plugin release declaring that core, each error is graded by it "
           "(backcast): **confirmed** (the maintainers changed the site), **upstream-bug** (unchanged, "
           "and their release still shows it against the core it declares), **not-borne-out** "
           "(unchanged, and their release does not show it).", "",
           "Execution: the plugin's CPU unit tests run against the release with a probe at each error's "
           "site (`overlay forward --execute`). **failed there**: a test reached the site and failed in "
           "the function holding it; **reached**: tests reached it and none failed there; **not "
           "reached**, **not probed**, **not run**: not proven either way. Each crash of that run in "
           "the plugin's own code is **forecast** (a gate error sits in the same function) or "
           "**missed**.", ""]
    head = "| core release | errors | plugin release declaring it | confirmed | upstream-bug | not-borne-out |"
    rule = "| --- | ---: | --- | ---: | ---: | ---: |"
    if executed:
        head += " unit tests | failed there | reached | not reached | crash sites forecast | missed |"
        rule += " --- | ---: | ---: | ---: | ---: | ---: |"
    out += [head, rule]
    for r in doc["releases"]:
        g = r["graded"]
        pr = f"`{r['plugin_release']}`" if r["plugin_release"] else "none yet (ahead of upstream)"
        cells = [str(g[k]) if r["plugin_release"] else "-" for k in ("confirmed", "upstream-bug", "not-borne-out")]
        line = f"| {r['release']} | {r['errors']} | {pr} | " + " | ".join(cells) + " |"
        if executed:
            e = r.get("execution")
            if not e:
                line += " not run | - | - | - | - | - |"
            else:
                ran = "did not start" if e["collected"] is None else f"{e['passed']}/{e['collected']} passed"
                line += (f" {ran} | " + " | ".join(str(e[k]) for k in ("errors_failed_there", "errors_reached",
                                                                       "errors_not_reached", "forecast",
                                                                       "missed")) + " |")
        out.append(line)
    for r in doc["releases"]:
        out += ["", f"## vLLM {r['release']}", ""]
        e = r.get("execution")
        if r.get("execution_skipped"):
            out += [f"Execution {r['execution_skipped']}.", ""]
        if r.get("execution_deviation"):
            out += [f"Execution deviation: {r['execution_deviation']}.", ""]
        if e and e["collected"] is None:
            out += [f"Unit tests against this release: they did not start (pytest stopped: "
                    f"{e['stopped'].replace('|', '/')}).", ""]
        elif e:
            out += [f"Unit tests against this release: {e['collected']} collected, {e['passed']} passed, "
                    f"{e['failed']} failed, {e['collect_errors']} collection error(s).", ""]
        if not r["findings"]:
            out.append("No gate error.")
        else:
            out += ["| where | finding | backcast | grade | execution |", "| --- | --- | --- | --- | --- |"]
            for i in r["findings"]:
                summary = i["summary"].replace("|", "\\|")
                out.append(f"| `{i['where']}` | {summary} | {i.get('backcast', '-')} | {i.get('grade', '-')} "
                           f"| {i['execution']} |")
        if e and e["plugin_crash_sites"]:
            out += ["", "Crashes in the plugin's own code:", "",
                    "| where | failure | tests | grade |", "| --- | --- | ---: | --- |"]
            for c in e["plugin_crash_sites"]:
                message = printable(c["message"]).replace("|", "\\|")
                out.append(f"| `{c['where']}` | {message} | {c['tests']} | {c['grade']} |")
    return "\n".join(out) + "\n"
