"""`make gate-eval`: the contract gate on real pairings, scored against a hand-made
classification (benchmarks/gate_eval.yaml; see tools/overlay/gate/evaluation.py).

Needs a mirror ($OVERLAY_MIRROR or --mirror) holding the vllm-ascend repository and the
vLLM release source archives `pypi/vllm-<version>.tar.gz`. For each pairing the plugin
tree is `git archive`d at its commit (no series applied), or for a plugin release
(`plugin: vllm-ascend==VERSION`) imported from the mirror's `pypi/vllm_ascend-VERSION.tar.gz`
as compose imports an archive, and gated against the extracted release with the project's committed allowlist, as a maintainer runs it from the project
root. Prints the precision/recall table and every unclassified finding; exits 1 when
some finding is not classified yet (so the classification keeps up), 2 on bad input.
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import sys
import tarfile
import tempfile
from dataclasses import replace
from pathlib import Path

from overlay import gitcmd, paths
from overlay.errors import OverlayError
from overlay.gate import add_checker, evaluation, run_gate
from overlay.gate.engine import Cache
from overlay.series.model import ArchiveSource
from overlay.trees import baseline_trees, sources

CLASSIFICATION = Path("benchmarks") / "gate_eval.yaml"  # under the project root
# A held-out set's truth, while it is held out: apart from the classification, which the
# classifiers read for the style of reasons (read too when it exists)
HELD_OUT = Path("benchmarks") / "gate_eval_held_out.yaml"

PLUGIN_REPO = "vllm-project+vllm-ascend"
PLUGIN_PACKAGE = "vllm-ascend"


def plugin_tree(repo: Path, commit: str, into: Path) -> Path:
    into.mkdir(parents=True)
    # The mirror is data (read through its view, see gitcmd.data_view), and so is the
    # classification's commit: after --end-of-options it is a revision, never an option.
    data = gitcmd.git(["archive", "--format=tar", "--end-of-options", commit], git_dir=repo,
                      data=True, text=False, check=False)
    if data.returncode != 0:
        raise OverlayError(f"commit {commit} is not in the mirror's vllm-ascend repository", path=str(repo))
    with tarfile.open(fileobj=io.BytesIO(data.stdout)) as tar:
        tar.extractall(into, filter="data")
    return into


def release_plugin_tree(root: Path, mirror: Path, version: str, dist: str = PLUGIN_PACKAGE) -> Path:
    """A plugin release's tree, from the mirror's archive only (the evaluation is reproducible
    from the mirror; nothing is downloaded): vetted and imported as compose imports archives."""
    src = ArchiveSource(name=dist, version=version, sha256="")
    if sources.find_archive(mirror / "pypi", src) is None:
        raise OverlayError(f"the mirror has no {dist} {version} source archive", path=str(mirror / "pypi"),
                           hint=f"put {dist.replace('-', '_')}-{version}.tar.gz (from the package index) in the mirror's pypi/")
    return sources.release_tree(root, mirror, dist, version)


def core_tree(mirror: Path, version: str, tmp: Path, cache: dict[str, Path]) -> Path:
    if version not in cache:
        sdist = mirror / "pypi" / f"vllm-{version}.tar.gz"
        if not sdist.is_file():
            raise OverlayError(f"the mirror has no vLLM {version} source archive", path=str(sdist),
                               hint="the evaluation needs pypi/vllm-<version>.tar.gz in the mirror")
        with tarfile.open(sdist) as tar:
            tar.extractall(tmp, filter="data")
        cache[version] = tmp / f"vllm-{version}"
    return cache[version]


def declared_core(mirror: Path, plugin: Path, core: str, stated: str = "") -> str | None:
    """The core the checker's differential starts from: the one the pairing states
    (`declared:`, for a plugin that declares it only in prose), else what the plugin tree
    declares (its release tag file, Dockerfile tag, image folder or install script), else the
    newest release in the mirror older than the pairing's that its pyproject's core
    requirement admits, else the newest older one (the one it ran on)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    if stated:  # validated at load: an older release version
        return stated
    declared = baseline_trees.declared_release(plugin)
    # upstream data: only a release version is joined into the sdist's name
    if declared and declared != core and evaluation.is_release_version(declared):
        return declared
    older = []
    for sdist in (mirror / "pypi").glob("vllm-*.tar.gz"):
        try:
            v = Version(sdist.name[len("vllm-"):-len(".tar.gz")])
        except InvalidVersion:
            continue
        if v < Version(core):
            older.append(v)
    admitted = baseline_trees.declared_requirement(plugin)
    try:
        spec = SpecifierSet(admitted, prereleases=True) if admitted else None
    except InvalidSpecifier:
        spec = None
    if spec is not None:
        within = [v for v in older if spec.contains(v)]
        older = within or older
    return str(max(older)) if older else None


def run_order(pairings) -> list[int]:
    """The pairings' indexes in the order they run: by core release (then as listed), so
    consecutive runs share what their cores have in common."""
    from packaging.version import InvalidVersion, Version

    def core(i: int):
        try:
            return (0, Version(pairings[i].core), i)
        except InvalidVersion:  # load admits `0.25.0_x`, which packaging does not: last, as listed
            return (1, Version("0"), i)
    return sorted(range(len(pairings)), key=core)


def _say(line: str) -> None:
    print(f"gate-eval: {line}", file=sys.stderr, flush=True)


def register(sub) -> None:
    ap = sub.add_parser("gate-eval", help="gate precision/recall on real pairings (needs a mirror)",
                        description=__doc__.splitlines()[0])
    ap.add_argument("--mirror", type=Path, default=None, help="upstream mirror (default: $OVERLAY_MIRROR)")
    ap.add_argument("--classification", type=Path, action="append", default=None,
                    help="the hand classification, repeatable (default: benchmarks/gate_eval.yaml and, "
                         "when it exists, benchmarks/gate_eval_held_out.yaml)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME", help="run only this pairing")
    ap.add_argument("--engine", choices=("hand", "both"), default="hand",
                    help="both: add the type checker (differential, mypy) and score its forecasts too; the "
                         "declared core is the pairing's `declared:`, else the plugin's .github/vllm-release-tag.commit (or its Dockerfile's VLLM_TAG), else the mirror's "
                         "release before the pairing's")
    ap.add_argument("--json", action="store_true", help="scores and unclassified findings as JSON")
    ap.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.classification is None:
        held = args.root / HELD_OUT
        args.classification = [args.root / CLASSIFICATION] + ([held] if held.is_file() else [])
    mirror = paths.mirror_root(args.mirror)
    if mirror is None:
        raise OverlayError("make gate-eval needs the upstream mirror",
                           hint="set OVERLAY_MIRROR=DIR (or --mirror DIR)")
    pairings = [p for p in evaluation.load_all(args.classification) if not args.only or p.name in args.only]
    repo = paths.find_mirror_repo(mirror, PLUGIN_REPO)
    if repo is None and any(p.plugin_release is None for p in pairings):
        raise OverlayError("the mirror has no vllm-ascend repository", path=str(mirror))
    allowlist = args.root / "gate-allowlist.yaml"
    done: dict[int, tuple[evaluation.Score, tuple]] = {}
    with tempfile.TemporaryDirectory(prefix="gate-eval-") as tmp:
        cores: dict[str, Path] = {}
        # Syntax trees shared by content between pairings, kept only while used: the
        # pairings run in core order, so neighbours share the files their cores have in
        # common, and a table ages out what the pairing before did not use (memory stays
        # that of a pairing or two, not of every core read).
        shared = Cache.bounded()
        for step, i in enumerate(run_order(pairings)):
            p = pairings[i]
            if not args.json:
                print(f"gate-eval: [{step + 1}/{len(pairings)}] {p.name}", file=sys.stderr, flush=True)
            core = core_tree(mirror, p.core, Path(tmp), cores)
            if p.plugin_release is not None:
                plugin = release_plugin_tree(args.root, mirror, p.plugin_release, p.plugin_dist)
            else:
                assert repo is not None
                plugin = plugin_tree(repo, p.plugin, Path(tmp) / f"plugin-{i}")
            report = run_gate(core, plugin, allowlist if allowlist.is_file() else None, note_unused=False,
                              cache=shared)
            skipped = ""
            if args.engine == "both":
                declared = declared_core(mirror, plugin, p.core, p.declared)
                if declared is None:  # not proven either way: said, never counted as the checker's silence
                    skipped = f"no release older than {p.core} in the mirror to diff from"
                else:
                    report = add_checker(report, core, plugin, core_tree(mirror, declared, Path(tmp), cores),
                                         declared, "both", None if args.json else _say, cache=shared)
            scored = evaluation.score(p, report.findings, float(report.stats.get("seconds", 0.0)))
            done[i] = (replace(scored, checker_skipped=skipped), report.findings)
            shared.age()
            if p.plugin_release is None:
                shutil.rmtree(plugin)  # the archive extracted above, into this run's own folder
    ordered = [done[i] for i in sorted(done)]  # the classification's order
    scores = [score for score, _ in ordered]
    reports = [found for _, found in ordered]
    if args.json:
        print(json.dumps([{"pairing": s.pairing, "errors": s.errors, "true_errors": s.true_errors,
                           "precision": s.precision, "true_breaks": s.true_breaks, "caught": s.caught,
                           "recall": s.recall, "warnings": s.warnings, "info": s.infos,
                           "truth_items": s.truth_items, "truth_caught": s.truth_caught,
                           "truth_recall": s.truth_recall, "truth_missed": list(s.truth_missed),
                           "truth_forecast": list(s.truth_forecast_items), "agreed": s.agreed,
                           "hand_only_errors": s.hand_only_errors, "checker_forecasts": s.checker_forecasts,
                           "checker_confirmed": s.checker_confirmed, "truth_confirmed": s.truth_confirmed,
                           "checker_skipped": s.checker_skipped or None,
                           "out_of_reach": list(s.out_of_reach), "seconds": round(s.seconds, 2),
                           "control": s.control, "held_out": s.held_out,
                           "missed": list(s.missed), "false_alarms": list(s.false_alarms),
                           "unclassified": [dict(f.to_dict(), key=evaluation.finding_key(f))
                                            for f in s.unclassified],
                           "findings": [dict(f.to_dict(), key=evaluation.finding_key(f)) for f in found]}
                          for s, found in zip(scores, reports)], indent=2))
    else:
        sys.stdout.write(evaluation.render(scores))
    return 1 if any(s.unclassified for s in scores) else 0

