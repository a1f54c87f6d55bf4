"""`overlay rebase`: move a pin set's series onto newer upstream, on a fixture history
with every outcome (tests/drift/series_history.py):

  0001  merged upstream at u3 (#203)        -> dropped, applied-upstream recorded
  0002  its context reworded at u4 (#204)   -> refreshed by 3-way (an overlap, no merge)
  0003  upstream's own o_10 at u2 (#202)    -> conflict: continue after resolving,
                                               skip, or abort
  0004  built on 0003                        -> applied on top, refreshed
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from overlay.trees import lockfile
from overlay.cli import main
from overlay.series.model import Project
from tests.drift.series_history import build
from tests.hostile_text import unsafe_in

REAL_MIRROR = os.environ.get("OVERLAY_MIRROR")  # read before the autouse fixture clears it


@pytest.fixture(scope="session")
def _history(tmp_path_factory):
    return build(tmp_path_factory.mktemp("rebase"))


@pytest.fixture
def project(_history, tmp_path, monkeypatch) -> Path:
    dest = tmp_path / "project"
    shutil.copytree(_history.project, dest)
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OVERLAY_MIRROR", str(_history.mirror))
    return dest


def rebase(capsys, project: Path, *args: str) -> tuple[int, str, str]:
    rc = main(["--root", str(project), "rebase", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def snapshot(project: Path) -> dict[str, bytes]:
    """Every file of the project outside build/ and .overlay/, with its bytes."""
    return {str(p.relative_to(project)): p.read_bytes() for p in sorted(project.rglob("*"))
            if p.is_file() and p.relative_to(project).parts[0] not in ("build", ".overlay")}


def resolve_o_py(work: Path) -> None:
    text = (work / "o.py").read_text()
    resolved = re.sub(r"<<<<<<< [^\n]*\n.*?=======\n.*?>>>>>>> [^\n]*\n",
                      "o_10 = 'theirs, ours'\no_10b = 'ours too'\n", text, flags=re.S)
    assert resolved != text, "expected conflict markers in o.py"
    (work / "o.py").write_text(resolved)
    subprocess.run(["git", "add", "o.py"], cwd=work, check=True)


def test_conflict_then_continue_drops_merged_refreshes_and_locks(capsys, project):
    before = snapshot(project)
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    assert rc == 1 and "CONFLICT: 0003-o-ours-at-o_10.patch conflicts at u4 (o.py)" in out, err
    assert "upstream overlap: " in out and "(#202)" in out
    assert snapshot(project) == before  # nothing of pins/, patches/, series.yaml yet
    work = project / "build" / "next" / "plugin"
    assert (work / ".git" / "rebase-apply").is_dir()  # git's own resolution state
    # --continue before resolving is refused, and changes nothing
    rc, _, err = rebase(capsys, project, "--continue")
    assert rc == 2 and "o.py still has conflicts" in err and err.count("\n") == 1
    resolve_o_py(work)
    rc, out, err = rebase(capsys, project, "--continue", "--json")
    assert rc == 0, err
    result = json.loads(out)
    outcome = {p["patch"][:4]: (p["outcome"], p["drift"]) for p in result["patches"]}
    assert outcome == {"0001": ("dropped", "merged (reverse)"),
                       "0002": ("refreshed", "fuzz"),
                       "0003": ("conflicted", "conflict"),
                       "0004": ("kept", "blocked (alone: clean)")}
    notes = {p["patch"][:4]: p["overlap"] for p in result["patches"]}
    assert any("upstream did this too" in line and "(#203)" in line for line in notes["0001"])
    assert len(notes["0002"]) == 1 and "upstream did this too" not in notes["0002"][0]
    assert result["check"] == [] and result["ok"]

    project_now = Project.load(project)
    entry = {e.patch[:4]: e for e in project_now.series.entries}
    prov = entry["0001"].provenance
    assert (prov.applied_upstream, prov.applied_upstream_rule, prov.applied_upstream_pins) == (
        "acme/plugin#203", "reverse", ("next",))
    assert prov.applied_upstream_commit == _commit(project, "u3")
    # Pin sets are independent: the versions the rebase rewrote are the new pin set's
    # own entries (only-pins: [next]); base keeps its patches byte for byte. 0004's old
    # bytes make the same tree at next: one entry serves both.
    assert [e.patch[:4] for e in project_now.series.for_target("plugin", "next")] == ["0005", "0006", "0004"]
    assert [e.patch[:4] for e in project_now.series.for_target("plugin", "base")] == ["0001", "0002", "0003", "0004"]
    for old in ("0002", "0003", "0004"):
        name = entry[old].patch
        assert (project / "patches" / name).read_bytes() == before[f"patches/{name}"]
    pin = project_now.pin("next")
    assert pin.target("plugin").source.commit == _commit(project, "u4")
    assert pin.target("plugin").tree == result["tree"] and not pin.default
    assert "0003-o-ours-at-o_10.patch" in "".join(result["refresh"]["written"])
    assert {p["patch"][:4]: p["split_as"][:4] for p in result["patches"] if p["split_as"]} == {
        "0002": "0005", "0003": "0006"}
    assert (project / "pins" / "base.yaml").read_bytes() == before["pins/base.yaml"]
    # refresh at the new pin set kept the entry it leaves out, and its file, as they were
    dropped = "patches/0001-m-add-m_05b-and-raise-m_06.patch"
    assert (project / dropped).read_bytes() == before[dropped]
    assert not (project / ".overlay" / "rebase.json").exists()

    # the new pin set composes from the files alone, to the locked tree
    shutil.rmtree(project / "build")
    assert main(["--root", str(project), "apply", "--pin", "next", "--json"]) == 0
    applied = json.loads(capsys.readouterr().out)["targets"][0]
    assert applied["tree_matches_lock"] is True
    assert [p["patch"][:4] for p in applied["patches"]] == ["0005", "0006", "0004"]


def test_summary_is_fit_for_a_pull_request(capsys, project):
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    resolve_o_py(project / "build" / "next" / "plugin")
    rc, out, _ = rebase(capsys, project, "--continue")
    assert rc == 0
    assert out.startswith("## Rebase of pin set `base` onto plugin `u4`")
    assert "| `0001-m-add-m_05b-and-raise-m_06.patch` | dropped | merged (reverse) |" in out
    assert "carried by acme/plugin#203" in out
    assert "- check: ok" in out
    assert "- gate: not run: no composed core tree" in out
    # the new versions are the new pin set's own: the old pin set still applies exactly
    assert "- pin set `base` (plugin " in out and "the series still applies there" in out
    assert "`0002-n-raise-n_10.patch` -> `0005-n-raise-n-10.patch`" in out


def test_conflict_then_abort_leaves_everything_as_it_was(capsys, project):
    before = snapshot(project)
    rc, _, _ = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    assert rc == 1
    rc, out, err = rebase(capsys, project, "--abort")
    assert rc == 0 and "rebase aborted" in out, err
    assert snapshot(project) == before
    assert not (project / "build" / "next").exists()
    assert not (project / ".overlay" / "rebase.json").exists()
    rc, _, err = rebase(capsys, project, "--continue")
    assert rc == 2 and "no rebase is in progress" in err


def test_conflict_then_skip_records_upstreams_own_version(capsys, project):
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    rc, out, err = rebase(capsys, project, "--skip", "--json")
    assert rc == 0, err
    outcome = {p["patch"][:4]: p["outcome"] for p in json.loads(out)["patches"]}
    # 0004 applied as it is on upstream's o.py: its old bytes make the same tree (kept, shared)
    assert outcome == {"0001": "dropped", "0002": "refreshed", "0003": "skipped", "0004": "kept"}
    prov = {e.patch[:4]: e.provenance for e in Project.load(project).series.entries}["0003"]
    # drift saw upstream rewrite 0003's lines at u2 (#202): that is what the skip leaves to
    assert (prov.applied_upstream, prov.applied_upstream_pins) == ("acme/plugin#202", ("next",))
    assert prov.applied_upstream_rule == "skipped (upstream's own version)"


def test_a_failure_at_the_end_puts_every_byte_back(capsys, project, monkeypatch):
    before = snapshot(project)
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    resolve_o_py(project / "build" / "next" / "plugin")

    def broken_lock(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(lockfile, "lock", broken_lock)
    rc, _, err = rebase(capsys, project, "--continue")
    assert rc == 2 and "No space left on device" in err and err.count("\n") == 1
    assert snapshot(project) == before  # series.yaml, patches/ and pins/ as they were


def test_merged_patches_alone_need_no_stop(capsys, project):
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u3", "--as", "at-u3")
    # u3 has 0001 merged and 0003 in conflict: it still stops for 0003
    assert rc == 1 and "0003-o-ours-at-o_10.patch conflicts" in out
    rebase(capsys, project, "--abort")
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u1", "--as", "at-u1")
    assert rc == 0, err
    assert "| `0001-m-add-m_05b-and-raise-m_06.patch` | kept | clean |  | applies as it is |" in out


@pytest.mark.parametrize("args, message", [
    (["--pin", "base"], "give --onto TARGET=REF"),
    (["--onto", "plugin"], "'plugin' is not TARGET=REF"),
    (["--onto", "plugin=u1,core=k"], "unknown target 'core'"),
    (["--onto", "plugin=u1", "--onto", "plugin=u2"], "target 'plugin' is given twice"),
    (["--onto", "gpu=u1"], "unknown target 'gpu'"),
    (["--onto", "plugin=no-such"], "'no-such' is not a commit"),
    (["--onto", "plugin=u0"], "nothing to move"),
    (["--onto", "plugin=u1", "--as", "base"], "pin set 'base' already exists"),
    (["--onto", "plugin=u1", "--as", "../x"], "is not a pin set name"),
    (["--continue"], "no rebase is in progress"),
    (["--skip"], "no rebase is in progress"),
    (["--abort"], "no rebase is in progress"),
    (["--continue", "--pin", "base"], "take no --pin, --onto or --as"),
])
def test_bad_input_is_one_line_and_changes_nothing(capsys, project, args, message):
    before = snapshot(project)
    rc, out, err = rebase(capsys, project, *args)
    assert rc == 2 and err.count("\n") == 1 and message in err and "Traceback" not in err
    assert snapshot(project) == before and not (project / "build").exists()


def test_a_second_rebase_waits_for_the_first(capsys, project):
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    rc, _, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u1", "--as", "other")
    assert rc == 2 and "a rebase is already in progress" in err


def _commit(project: Path, tag: str) -> str:
    mirror = Path(os.environ["OVERLAY_MIRROR"]) / "acme+plugin"
    return subprocess.run(["git", "rev-parse", tag], cwd=mirror, capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.mirror
def test_real_rebase_onto_cd76505e_drops_by_provenance_and_aborts_cleanly(capsys, tmp_path, monkeypatch):
    """The real series on the real mirror (OVERLAY_MIRROR): cd76505e holds the upstream
    commits 0001-0004, 0007, 0008 and 0010 cite, and it declares core 1f486d96 (its
    main-verified commit), the pin set's core. Provenance proves history, not content: 0001,
    0002, 0004, 0008 and 0010 are dropped (upstream carries all their code; their own tests
    go with them, named); 0003 (its input_batch.py `mark_padding_rows`, which upstream never
    wrote) and 0007 (`RecomputeScheduler.schedule(throttle_prefills)`, which 8c28b0eb never
    did) are kept as their residue. 0006 has one of its two upstream commits (8c28b0eb, not
    15818534): kept, and it is the first to conflict; --abort restores."""
    real = REAL_MIRROR
    if not real:
        pytest.fail("OVERLAY_MIRROR was not set when the session started")
    root = Path(__file__).resolve().parents[2]
    project = tmp_path / "project"
    project.mkdir()
    for name in ("series.yaml", "pins", "patches", "evidence", "gate-allowlist.yaml"):
        src = root / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, project / name)
    monkeypatch.setenv("OVERLAY_MIRROR", real)
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    before = snapshot(project)
    rc, out, err = rebase(capsys, project, "--pin", "1f486d96", "--onto", "plugin=cd76505e",
                          "--as", "cd76505e", "--json")
    assert rc == 1, err
    stop = json.loads(out)
    assert stop["status"] == "conflict" and stop["patch"] == "0006-parser-patches-by-core-capability.patch"
    assert any("(#10935)" in line and "upstream did this too" in line for line in stop["overlap"])
    plans = json.loads((project / ".overlay" / "rebase.json").read_text())["plans"]
    dropped = [p["patch"][:4] for p in plans if p["action"] == "dropped"]
    assert dropped == ["0001", "0002", "0004", "0008", "0010"]
    assert all("main-verified commit" in p["why"] and "with it: the code tested is upstream" in p["why"]
               for p in plans if p["action"] == "dropped")
    residue = {p["patch"][:4]: p["note"] for p in plans if "only in part" in (p.get("note") or "")}
    assert set(residue) == {"0003", "0007"}
    assert "vllm_ascend/worker/v2/input_batch.py hunk 1/2" in residue["0003"].split("the residue")[1]
    assert "recompute_scheduler.py" in residue["0007"].split("the residue")[1]
    assert rebase(capsys, project, "--abort")[0] == 0
    assert snapshot(project) == before


@pytest.mark.parametrize("block, message", [
    ("    applied-upstream:\n      commit: " + "a" * 40 + "\n", "field 'ref' of 'applied-upstream' of series entry 1: missing"),
    ("    applied-upstream:\n      ref: x#1\n      commit: abc123\n", "is not a full 40-hex commit id"),
    ("    applied-upstream:\n      ref: x#1\n      pins: ['../evil']\n", "'../evil' is not a pin set name"),
    ("    applied-upstream:\n      ref: x#1\n      when: now\n", "unknown field 'when'"),
])
def test_a_bad_applied_upstream_record_is_one_line(capsys, project, block, message):
    series = project / "series.yaml"
    lines = series.read_text().splitlines(keepends=True)
    lines.insert(5, block)  # inside the first entry
    series.write_text("".join(lines))
    rc = main(["--root", str(project), "apply", "--pin", "base"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and message in err and "series.yaml:" in err
    assert not (project / "build").exists()


def test_apply_leaves_out_what_a_pin_sets_upstream_carries(capsys, project):
    series = project / "series.yaml"
    lines = series.read_text().splitlines(keepends=True)
    lines.insert(5, "    applied-upstream:\n      ref: acme/plugin#203\n      pins: [\"other\"]\n")
    series.write_text("".join(lines))
    (project / "pins" / "other.yaml").write_text(
        (project / "pins" / "base.yaml").read_text().replace("default: true\n", ""))
    assert main(["--root", str(project), "apply", "--pin", "other", "--json"]) == 0
    patches = [p["patch"][:4] for p in json.loads(capsys.readouterr().out)["targets"][0]["patches"]]
    assert patches == ["0002", "0003", "0004"]
    assert main(["--root", str(project), "apply", "--pin", "base", "--json"]) == 0
    patches = [p["patch"][:4] for p in json.loads(capsys.readouterr().out)["targets"][0]["patches"]]
    assert patches == ["0001", "0002", "0003", "0004"]


def test_recording_applied_upstream_keeps_every_other_byte():
    from overlay.rebase.plan import record_applied_upstream
    from overlay.series.model import AppliedRecord

    text = ("# header\nseries:\n  - patch: a.patch\n    target: plugin\n    applied-upstream: old#1\n"
            "    tests:\n      - t.py\n\n  # about b\n  - patch: b.patch\n    target: plugin\n")
    same = AppliedRecord("x/y#2", "c" * 40, "reverse", ("older",))
    out = record_applied_upstream(text, 3, {"ref": "x/y#2", "commit": "c" * 40, "rule": "reverse"},
                                  "new", (same,))
    assert out == ("# header\nseries:\n  - patch: a.patch\n    target: plugin\n"
                   "    tests:\n      - t.py\n"
                   "    applied-upstream:  # recorded by overlay rebase\n      ref: \"x/y#2\"\n"
                   f"      commit: {'c' * 40}\n      rule: \"reverse\"\n      pins: [\"older\", \"new\"]\n"
                   "\n  # about b\n  - patch: b.patch\n    target: plugin\n")


def test_a_failure_while_starting_leaves_no_rebase_behind(capsys, project, monkeypatch):
    from overlay.trees import sources
    from overlay.errors import OverlayError

    def unreachable(*args, **kwargs):
        raise OverlayError("target 'plugin' is unreachable: no network", path="pins/next.yaml")

    monkeypatch.setattr(sources, "obtain", unreachable)
    before = snapshot(project)
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    assert rc == 2 and "unreachable" in err and err.count("\n") == 1
    assert snapshot(project) == before
    assert not (project / "build" / "next").exists()
    assert not (project / ".overlay" / "rebase.json").exists()
    assert not (project / ".overlay" / "rebase-pins").exists()


# ----------------------------------------------------------------------------- provenance
# The history of tests/drift/provenance_history.py: 0001 and 0002 are carried upstream by
# provenance at p5 (their upstream commits are ancestors, their text conflicts), 0003 is
# superseded by upstream's #305 there, and p5 declares core release v1.1.


@pytest.fixture(scope="session")
def _provenance(tmp_path_factory):
    from tests.drift.provenance_history import build as build_provenance

    return build_provenance(tmp_path_factory.mktemp("rebase-provenance"))


@pytest.fixture
def prov(_provenance, tmp_path, monkeypatch):
    dest = tmp_path / "project"
    shutil.copytree(_provenance.project, dest)
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OVERLAY_MIRROR", str(_provenance.mirror))
    return _provenance, dest


def _port(work: Path, text: str = "c_10 = 'fast path where proven'\n") -> None:
    p = work / "c.py"
    p.write_text(p.read_text().replace("c_10 = 'fast path, default on'\n", text))
    env = {**os.environ, "GIT_AUTHOR_NAME": "Overlay Dev", "GIT_AUTHOR_EMAIL": "overlay@example.org"}
    subprocess.run(["git", "commit", "-qam", "c: port the fast path onto upstream's"], cwd=work,
                   check=True, env=env)


def test_provenance_drops_stop_for_the_superseded_port_and_move_core(capsys, prov):
    history, project = prov
    before = snapshot(project)
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=p5",
                          "--onto", "core=pypi:core==1.1", "--as", "next")
    archive, digest = history.archives["1.1"]
    assert rc == 1 and f"core to PyPI `core==1.1` (sha256 `{digest}`)" in out, err
    assert "0001-a-fix-a_10-backport-of-301.patch: drift says merged (upstream-commit); drop it" in out
    assert "core core==1.1 is the plugin's release (v1.1)" in out
    assert "DECISION: 0003-c-experimental-fast-path.patch is superseded at p5 by upstream's own " \
           "version acme/plugin#305" in out
    assert snapshot(project) == before
    work = project / "build" / "next" / "plugin"
    rc, _, err = rebase(capsys, project, "--continue")  # nothing ported yet
    assert rc == 2 and "nothing was ported" in err and err.count("\n") == 1
    _port(work)
    rc, _, err = rebase(capsys, project, "--skip")  # a port exists: --skip would lose it
    assert rc == 2 and "1 commit(s) were added since the stop" in err
    rc, out, err = rebase(capsys, project, "--continue", "--json")
    result = json.loads(out)
    # it finishes; what is left is the port's provenance (check) and a gate that finds no
    # package in this fixture plugin: exit 1, "finished with check or gate findings"
    assert rc == 1 and result["status"] == "done", err
    assert [f["message"].split(": ", 1)[1] for f in result["check"]] == [
        "a local patch needs 'forwarded' (where it was or will be sent upstream)"]
    assert result["gate"]["ran"] is False and "no Python package" in result["gate"]["why"]
    outcome = {p["patch"][:4]: p["outcome"] for p in result["patches"]}
    assert outcome == {"0001": "dropped", "0002": "dropped", "0003": "ported", "0004": "kept"}
    assert set(result["timings"]) >= {"drift", "compose", "git am -3", "refresh", "lock", "gate"}
    records = {p["patch"][:4]: p["applied_upstream"] for p in result["patches"]}
    assert records["0001"] == {"ref": "acme/plugin#301", "commit": history.commits["p1"],
                               "rule": "upstream-commit"}
    assert records["0002"]["commit"] == history.commits["p4"]  # the last of its two
    assert records["0003"]["rule"] == "superseded-by (ported)"
    (port,) = result["refresh"]["added"]

    series = Project.load(project).series
    entry = {e.patch[:4]: e for e in series.entries}
    assert entry["0003"].provenance.applied_upstream_pins == ("next",)
    # the provenance fields survive the records and the refresh
    assert entry["0001"].provenance.upstream_commits == (history.commits["p1"],)
    assert entry["0002"].provenance.upstream_commits == (history.commits["p2"], history.commits["p4"])
    assert entry["0003"].provenance.superseded_by_pr == "acme/plugin#305"
    assert entry[port[:4]].only_pins == ("next",)
    assert [e.patch for e in series.for_target("plugin", "next")] == [entry["0004"].patch, port]
    assert port not in [e.patch for e in series.for_target("plugin", "base")]
    pin = Project.load(project).pin("next")
    core = pin.target("core")
    assert (core.source.requirement, core.source.sha256) == ("core==1.1", digest)
    assert core.tree and pin.target("plugin").tree == result["tree"]
    # the new pin set composes from the files alone, to its lock, core included
    shutil.rmtree(project / "build")
    assert main(["--root", str(project), "apply", "--pin", "next", "--json"]) == 0
    applied = {t["target"]: t for t in json.loads(capsys.readouterr().out)["targets"]}
    assert applied["core"]["tree_matches_lock"] and applied["plugin"]["tree_matches_lock"]
    # and the old one still carries the whole series, without the port
    assert main(["--root", str(project), "apply", "--pin", "base", "--json", "--targets", "plugin"]) == 0
    patches = [p["patch"][:4] for p in json.loads(capsys.readouterr().out)["targets"][0]["patches"]]
    assert patches == ["0001", "0002", "0003", "0004"]


def test_a_superseded_patch_can_be_dropped_at_the_decision(capsys, prov):
    history, project = prov
    rebase(capsys, project, "--pin", "base", "--onto", "plugin=p5", "--onto",
           "core=pypi:core==1.1", "--as", "next")
    rc, out, err = rebase(capsys, project, "--skip", "--json")
    result = json.loads(out)
    assert result["status"] == "done" and result["check"] == [], err
    p3 = next(p for p in result["patches"] if p["patch"].startswith("0003"))
    assert p3["outcome"] == "dropped" and p3["applied_upstream"] == {
        "ref": "acme/plugin#305", "commit": history.commits["p5"], "rule": "superseded-by"}
    assert result["refresh"]["added"] == []


def test_a_core_the_new_plugin_does_not_declare_keeps_what_upstream_carries(capsys, prov):
    history, project = prov
    # core stays at 1.0; p5 declares v1.1: upstream's versions of 0001/0002 are unproven here
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=p5", "--as", "next")
    assert "0001-a-fix-a_10-backport-of-301.patch: drift says merged (upstream-commit); apply it " \
           "with 3-way (upstream carries it" in out, err
    assert "but core core==1.0 is not a core the new plugin declares (release v1.1): upstream's " \
           "version is proven only there: kept" in out
    # kept, it meets upstream's own text: git am -3 stops there for the maintainer
    assert rc == 1 and "CONFLICT: 0001-a-fix-a_10-backport-of-301.patch" in out
    assert rebase(capsys, project, "--abort")[0] == 0


def test_a_backport_with_one_of_two_upstream_commits_is_kept(capsys, prov):
    history, project = prov
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=p3", "--as", "at-p3")
    lines = {line[2:6]: line for line in out.splitlines() if line.startswith("  000")}
    # only p2 of 0002's two upstream commits has landed: the text rules decide
    assert "0002-b-both-halves-backport-of-302-303.patch: drift says conflict; apply it with " \
           "3-way" in lines["0002"] and "upstream carries it" not in lines["0002"], out
    # 0001 is carried, but the plugin at p3 declares no core at all
    assert "(it declares none)" in lines["0001"] and rc == 1
    assert rebase(capsys, project, "--abort")[0] == 0


@pytest.mark.parametrize("onto, message", [
    ("core=pypi:core", "expected pypi:NAME==VERSION"),
    ("core=pypi:core==9.9", "cannot download core==9.9"),
    ("core=pypi:core==1.1#sha256=" + "0" * 64, "has sha256"),
])
def test_a_bad_core_move_is_one_line_and_changes_nothing(capsys, prov, monkeypatch, onto, message):
    from overlay.trees import sources
    from overlay.errors import OverlayError

    def offline(src, folder, progress=None):
        raise OverlayError(f"cannot download {src.requirement}: no network")

    monkeypatch.setattr(sources, "download_archive", offline)
    history, project = prov
    before = snapshot(project)
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=p5", "--onto", onto)
    assert rc == 2 and message in err and err.count("\n") == 1, err
    assert snapshot(project) == before and not (project / "build").exists()


def test_the_new_pin_set_carries_what_the_old_one_carried(tmp_path):
    """What the old pin set left out stays out at the new one; what only it carried (a
    port) the new one carries too; every other byte of series.yaml is kept."""
    from overlay.rebase.state import RebaseState
    from overlay.rebase.steps import _carriage

    (tmp_path / "series.yaml").write_text(
        "series:\n"
        "  - patch: 0001-a.patch\n    target: plugin\n    origin: local\n"
        "    applied-upstream:\n      ref: acme/plugin#1\n      rule: upstream-commit\n"
        "      pins: [old]\n"
        "  - patch: 0002-b.patch  # kept everywhere\n    target: plugin\n    origin: local\n"
        "  - patch: 0003-port.patch\n    target: plugin\n    origin: local\n"
        "    only-pins: [old]\n"
        "  - patch: 0004-other.patch\n    target: plugin\n    origin: local\n"
        "    only-pins: [elsewhere]\n")
    project = Project.load(tmp_path)
    state = RebaseState("old", "new", "plugin", "REF", "0" * 40, "", "", "", [], [])
    (tmp_path / "series.yaml").write_text(_carriage((tmp_path / "series.yaml").read_text(),
                                                    project, state))
    series = Project.load(tmp_path).series
    assert [e.patch[:4] for e in series.for_target("plugin", "new")] == ["0002", "0003"]
    assert [e.patch[:4] for e in series.for_target("plugin", "old")] == ["0002", "0003"]
    first = series.entries[0].provenance
    assert (first.applied_upstream, first.applied_upstream_rule) == ("acme/plugin#1", "upstream-commit")
    assert "  - patch: 0002-b.patch  # kept everywhere\n" in (tmp_path / "series.yaml").read_text()


# Upstream text with terminal escapes (issue 26 case 13): a title change, a colour, a
# screen clear through C1's CSI, a bidi override. Each subject keeps its PR number last.
HOSTILE = "\x1b]0;owned\x07 \x1b[31mred\x1b[0m \x9b2J \u202eevil"


def test_upstream_subjects_and_authors_print_no_control_character(capsys, tmp_path, monkeypatch):
    history = build(tmp_path / "hostile", author="Evil\x1b[2J Dev\x9b",
                    dress=lambda subject: subject.replace(" (#", f" {HOSTILE} (#"))
    project = tmp_path / "project"
    shutil.copytree(history.project, project)
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OVERLAY_MIRROR", str(history.mirror))
    rc, out, err = rebase(capsys, project, "--pin", "base", "--onto", "plugin=u4", "--as", "next")
    assert rc == 1 and "upstream overlap: " in out and "(#202)" in out, out + err
    assert "owned" in out and "Evil" in out  # shown, made visible
    assert unsafe_in(out + err, newlines=True) == []
    resolve_o_py(project / "build" / "next" / "plugin")
    rc, out, err = rebase(capsys, project, "--continue")  # the pull request's summary
    assert rc == 0 and "upstream did this too" in out, out + err
    assert unsafe_in(out + err, newlines=True) == []


@pytest.fixture(scope="session")
def _provenance_residue(tmp_path_factory):
    from tests.drift.provenance_history import build as build_provenance

    return build_provenance(tmp_path_factory.mktemp("rebase-residue"), residue=True)


def _rebase_onto_p5(capsys, history, tmp_path, monkeypatch):
    """A copy of the provenance project, rebased from `base` onto plugin p5 and core 1.1."""
    project = tmp_path / "project"
    shutil.copytree(history.project, project)
    monkeypatch.setenv("OVERLAY_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OVERLAY_MIRROR", str(history.mirror))
    return project, rebase(capsys, project, "--pin", "base", "--onto", "plugin=p5",
                           "--onto", "core=pypi:core==1.1", "--as", "next")


@pytest.fixture(scope="session")
def _provenance_test_residue(tmp_path_factory):
    from tests.drift.provenance_history import build as build_provenance

    return build_provenance(tmp_path_factory.mktemp("rebase-test-residue"), residue="tests")


def test_provenance_drops_a_patch_whose_only_residue_is_its_own_test_and_names_the_test(
        capsys, _provenance_test_residue, tmp_path, monkeypatch):
    """0001's code is all upstream's (p1); what upstream lacks is only the test 0001 adds.
    A test of code the series no longer carries is not a residue to keep: 0001 is dropped,
    and the plan names the test that goes with it, so nothing leaves unsaid."""
    project, (rc, out, err) = _rebase_onto_p5(capsys, _provenance_test_residue, tmp_path, monkeypatch)
    line = next(x for x in out.splitlines() if x.startswith("  0001"))
    assert "drop" in line and "tests/test_a.py" in line, out
    plans = json.loads((project / ".overlay" / "rebase.json").read_text())["plans"]
    first = next(p for p in plans if p["patch"].startswith("0001"))
    assert first["action"] == "dropped" and "tests/test_a.py" in first["why"]


def test_provenance_drops_only_what_upstream_carries_and_keeps_the_residue(capsys, _provenance_residue, tmp_path,
                                                                            monkeypatch):
    """0001's upstream commit (p1) is an ancestor of p5, but it never touched e.py, which
    0001 also changes: dropping 0001 would lose that change (issue 30: "dropping by
    provenance loses code"). It is kept as its residue, and the old pin set keeps it whole."""
    project, (rc, out, err) = _rebase_onto_p5(capsys, _provenance_residue, tmp_path, monkeypatch)
    line = next(x for x in out.splitlines() if x.startswith("  0001"))
    assert "apply it with 3-way" in line and "only in part: a.py hunk 1/1" in line, out
    assert "the residue, e.py hunk 1/1, is kept as the patch" in line
    rc, out, err = rebase(capsys, project, "--skip", "--json")  # 0003's decision: drop it
    result = json.loads(out)
    assert result["status"] == "done", err
    outcome = {p["patch"][:4]: p["outcome"] for p in result["patches"]}
    assert outcome["0001"] != "dropped" and outcome["0002"] == "dropped"
    tree = project / "build" / "next" / "plugin"
    assert "e_05 = 'throttle'" in (tree / "e.py").read_text()  # the residue is there
    assert "a_10 = 'upstream'" in (tree / "a.py").read_text()  # upstream's own version, not the backport's
    # the new pin set composes from the files alone, to its lock; the old one keeps 0001 whole
    shutil.rmtree(project / "build")
    assert main(["--root", str(project), "apply", "--pin", "next", "--json", "--targets", "plugin"]) == 0
    (plugin,) = json.loads(capsys.readouterr().out)["targets"]
    assert plugin["tree_matches_lock"]
    assert main(["--root", str(project), "apply", "--pin", "base", "--json", "--targets", "plugin"]) == 0
    base_patches = [p["patch"] for p in json.loads(capsys.readouterr().out)["targets"][0]["patches"]]
    first = (project / "patches" / base_patches[0]).read_text()
    assert "a_10 = 'backport'" in first and "e_05 = 'throttle'" in first
