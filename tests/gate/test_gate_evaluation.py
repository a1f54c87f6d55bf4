"""Scoring the gate against a hand classification (tools/overlay/gate/evaluation.py),
and the committed classification file itself."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from overlay.errors import OverlayError
from overlay.gate.evaluation import finding_key, load, render, score, totals
from overlay.gate.findings import Finding

ROOT = Path(__file__).resolve().parents[2]


def finding(symbol: str, path: str, severity: str = "error") -> Finding:
    return Finding("override", symbol, path, 3, "core.py", 9, "m", severity=severity)


def write(tmp_path, body: str) -> Path:
    p = tmp_path / "eval.yaml"
    p.write_text(body)
    return p


BODY = """
pairings:
  - name: a-vs-1
    plugin: "abc123"
    core: "0.25.0"
    findings:
      - key: "override:m.A.f @ p.py"
        verdict: true
        reason: "core passes x"
      - key: "override:m.B.f @ p.py"
        verdict: false
        reason: "the plugin's runner calls it"
      - key: "override:m.C.f @ q.py"
        verdict: true
        reason: "found only as a warning"
      - key: "override:m.D.f @ q.py"
        verdict: true
        reason: "not found at all"
"""


def test_precision_recall_and_unclassified(tmp_path):
    (pairing,) = load(write(tmp_path, BODY))
    found = (finding("override:m.A.f", "p.py"), finding("override:m.B.f", "p.py"),
             finding("override:m.C.f", "q.py", "warning"), finding("override:m.E.f", "r.py"))
    s = score(pairing, found)
    assert (s.errors, s.true_errors, s.false_errors, s.warnings) == (3, 1, 1, 1)
    assert s.precision == pytest.approx(1 / 3)  # the unclassified error is not shown to be real
    assert (s.true_breaks, s.caught) == (3, 1) and s.recall == pytest.approx(1 / 3)
    assert [finding_key(f) for f in s.unclassified] == ["override:m.E.f @ r.py"]
    assert s.missed == ("override:m.C.f @ q.py", "override:m.D.f @ q.py")
    table = render([s])
    assert "| a-vs-1 | 3 | 1 | 1 | 33% | 3 | 1 | 33% | 0 | 0 | - | 0 | 1 | 0 | 1 | 0.0 |" in table
    assert "unclassified (a-vs-1): error: override:m.E.f @ r.py" in table


TRUTH = BODY + """
    source: "b4b04c5eb1"
    truth:
      - item: "core renamed the keyword the plugin passes"
        keys: ["override:m.A.f @ p.py"]
        reach: true
        reason: "bump diff: the call now passes new_name"
      - item: "core's kernel lost a constexpr"
        keys: ["override:m.C.f @ q.py", "call:m.k @ q.py"]
        reach: true
        reason: "bump diff: the launch drops the keyword"
      - item: "output written in place instead of returned"
        reach: false
        reason: "an output contract: no signature shows it"
  - name: control
    plugin: "def456"
    core: "0.25.0"
    control: true
"""


def test_recall_on_truth_items_counts_errors_only_and_lists_out_of_reach(tmp_path):
    pairing, control = load(write(tmp_path, TRUTH))
    assert control.control and not pairing.control and pairing.source == "b4b04c5eb1"
    found = (finding("override:m.A.f", "p.py"), finding("override:m.C.f", "q.py", "warning"))
    s = score(pairing, found, seconds=2.5)
    assert (s.truth_items, s.truth_caught) == (2, 1) and s.truth_recall == pytest.approx(0.5)
    assert s.truth_missed == ("core's kernel lost a constexpr",)  # named only by a warning
    assert s.out_of_reach == ("output written in place instead of returned",)
    table = render([s, score(control, (finding("x", "y.py"),))])
    assert "release bumps (1): precision of errors 100% (1/1), recall on truth items as errors 50% (1/2)" in table
    assert "| control (control) | 1 |" in table and "| 2.5 |" in table
    assert "out of reach (a-vs-1): output written in place instead of returned" in table


@pytest.mark.parametrize("body, message", [
    ("pairings: 3\n", "'pairings' list"),
    ("pairings:\n  - name: x\n    plugin: a\n", "needs 'plugin'"),
    ("pairings:\n  - name: x\n    plugin: abcd\n    core: \"0.1\"\n    findings:\n      - key: k\n        verdict: maybe\n"
     "        reason: r\n", "verdict must be true or false"),
    ("pairings:\n  - name: x\n    plugin: abcd\n    core: \"0.1\"\n    findings:\n      - key: k\n        verdict: true\n",
     "missing 'reason'"),
    ("pairings:\n  - name: x\n    plugin: abcd\n    core: \"0.1\"\n    colour: red\n", "unknown key 'colour'"),
    ("pairings:\n  - name: x\n    plugin: abcd\n    core: \"0.1\"\n    truth:\n      - {item: i, reach: true, reason: r}\n",
     "names no finding key"),
    ("pairings:\n  - name: x\n    plugin: abcd\n    core: \"0.1\"\n    truth:\n      - {item: i, reach: maybe, reason: r}\n",
     "reach must be true or false"),
    ("pairings:\n  - name: x\n    plugin: abcd\n    core: \"0.1\"\n    findings:\n      - {key: k, verdict: true, reason: r}\n"
     "      - {key: k, verdict: false, reason: s}\n", "classified twice"),
    ("pairings:\n  - name: x\n    plugin: \"--output=x\"\n    core: \"0.1\"\n",
     "plugin '--output=x' is not a commit id"),
    ("pairings:\n  - name: x\n    plugin: abcd\n    core: \"../../etc\"\n",
     "core '../../etc' is not a release version"),
])
def test_bad_classification_is_one_error_naming_the_file(tmp_path, body, message):
    with pytest.raises(OverlayError) as exc:
        load(write(tmp_path, body))
    assert message in str(exc.value) and exc.value.path.endswith("eval.yaml")


def test_the_committed_classification_loads_and_covers_the_pairings():
    pairings = load(ROOT / "benchmarks" / "gate_eval.yaml")
    assert [p.name for p in pairings if not p.held_out] == ["15818534ec-vs-0.24.0", "fe7bfc4746-vs-0.25.0",
                                          "801a6b41-vs-0.24.0", "801a6b41-vs-0.25.0",
                                          "bb474a6a94-vs-0.25.0", "76ab5e28b9-vs-0.25.1", "b909a4703d-vs-0.26.0",
                                          "e8f25e304d-vs-0.27.1", "cda592a640-vs-0.27.1", "351879064c-vs-0.27.1",
                                          # the first held-out set, moved into the tuned set on 2026-12-02
                                          "803711ea40-vs-0.29.0", "434b332d70-vs-0.26.0", "b1038f13d7-vs-0.28.0",
                                          "2ec57c0a21-vs-0.26.0"]
    assert all(p.verdicts and all(v.reason for v in p.verdicts) for p in pairings if not p.held_out)
    bumps = [p for p in pairings if p.truth and not p.held_out]
    assert len(bumps) == 9 and all(p.source for p in bumps)  # every truth set names the commits it was read from
    assert [p.name for p in pairings if p.control] == ["351879064c-vs-0.27.1"]
    held = [p for p in pairings if p.held_out]
    assert [p.name for p in held] == ["be940519a2-vs-0.25.0", "185462da5b-vs-0.26.0", "071c10bfbd-vs-0.23.0"]
    assert {p.held_out for p in held} == {"2026-12-02"}
    assert all(p.source and p.truth for p in held)
    # enough held-out breaks for a recall figure to mean something (issue 27: >= 15 over several pairings)
    assert sum(t.reach for p in held for t in p.truth) >= 15
    assert len({p.core for p in held}) >= 3
    def commits(p):
        return {p.plugin, *re.findall(r"\b[0-9a-f]{8,40}\b", p.source)}
    tuned_commits = {c for p in pairings if not p.held_out for c in commits(p)}
    assert not any(commits(p) & tuned_commits for p in held)  # the rule: nothing the tuned set uses


# ----------------------------------------------------------------------------- issue 26, case 4


def _eval_mirror(tmp_path: Path) -> tuple[Path, Path]:
    """A mirror gate-eval reads: the plugin repository and one release archive."""
    import io
    import tarfile

    from tests.fixtures import commit_all, init_repo, write as write_files

    mirror = tmp_path / "mirror"
    repo = init_repo(mirror / "vllm-project+vllm-ascend")
    write_files(repo, {"vllm_ascend/__init__.py": "x = 1\n"})
    commit_all(repo, "plugin")
    (mirror / "pypi").mkdir()
    with tarfile.open(mirror / "pypi" / "vllm-0.25.0.tar.gz", "w:gz") as tar:
        data = b"__version__ = '0.25.0'\n"
        info = tarfile.TarInfo("vllm-0.25.0/vllm/__init__.py")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return mirror, repo / ".git"


OPTIONS = ("--output={victim}", "-o{victim}", "--output={fresh}")


@pytest.mark.parametrize("option", OPTIONS)
def test_a_plugin_value_is_never_an_option_of_git(tmp_path, capsys, option):
    """`plugin: --output=<file>` once truncated that file through `git archive`."""
    from overlay.cli import main

    mirror, _ = _eval_mirror(tmp_path)
    victim, fresh = tmp_path / "victim", tmp_path / "fresh"
    victim.write_text("precious\n")
    value = option.format(victim=victim, fresh=fresh)
    body = f'pairings:\n  - name: x\n    plugin: "{value}"\n    core: "0.25.0"\n'
    rc = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror),
               "--classification", str(write(tmp_path, body))])
    out, err = capsys.readouterr()
    assert victim.read_text() == "precious\n" and not fresh.exists()
    assert rc == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert "eval.yaml" in err and "not a commit id" in err


@pytest.mark.parametrize("option", OPTIONS)
def test_the_archive_step_takes_its_commit_as_a_revision(tmp_path, option):
    """The same, a layer down: `plugin_tree` puts the commit after --end-of-options."""
    from overlay.commands.gate_eval import plugin_tree

    _, repo = _eval_mirror(tmp_path)
    victim, fresh = tmp_path / "victim", tmp_path / "fresh"
    victim.write_text("precious\n")
    with pytest.raises(OverlayError) as exc:
        plugin_tree(repo, option.format(victim=victim, fresh=fresh), tmp_path / "tree")
    assert "is not in the mirror" in str(exc.value)
    assert victim.read_text() == "precious\n" and not fresh.exists()


# ----------------------------------------------------------------------------- issue 27, item 6

HELD_OUT = BODY + """
held_out:
  chosen: "2026-12-01"
  rule: "main2main fix commits the tuned set does not use"
  pairings:
    - name: h-vs-2
      plugin: "def456"
      core: "0.29.0"
      source: "fix1, fix2"
      findings:
        - key: "call:m.X @ h.py"
          verdict: false
          reason: "not a break"
      truth:
        - item: "moved import"
          keys: ["import:m.Y @ h.py"]
          reach: true
          reason: "fix1"
        - item: "new kwarg"
          keys: ["call:m.Z @ h.py"]
          reach: true
          reason: "fix2"
"""


def test_held_out_pairings_are_scored_apart_from_the_tuned_ones(tmp_path):
    tuned, held = load(write(tmp_path, HELD_OUT))
    assert not tuned.held_out and held.held_out and held.source == "fix1, fix2"
    s_tuned = score(tuned, (finding("override:m.A.f", "p.py"),))
    s_held = score(held, (finding("import:m.Y", "h.py"), finding("call:m.X", "h.py")))
    assert s_held.held_out and (s_held.truth_items, s_held.truth_caught) == (2, 1)
    t = totals([s_tuned, s_held], held_out=True)
    assert (t["pairings"], t["errors"], t["true_errors"], t["truth_items"], t["truth_caught"]) == (1, 2, 0, 2, 1)
    table = render([s_tuned, s_held])
    assert "| h-vs-2 (held out) | 2 |" in table
    assert ("held out (1, chosen 2026-12-01): precision of errors 0% (0/2), recall on truth items as errors "
            "50% (1/2)") in table
    assert "release bumps (" not in table  # the tuned pairing has no truth items; the held-out one is apart


def test_held_out_pairings_never_count_in_the_tuned_figures(tmp_path):
    _, held = load(write(tmp_path, HELD_OUT))
    s_held = score(held, (finding("import:m.Y", "h.py"),))
    assert totals([s_held])["pairings"] == 0 and totals([s_held], held_out=True)["pairings"] == 1


@pytest.mark.parametrize("extra, message", [
    ("held_out: 3\n", "'held_out' is a mapping"),
    ("held_out:\n  rule: r\n  pairings: []\n", "missing 'chosen'"),
    ("held_out:\n  chosen: \"2026-12-01\"\n  pairings: []\n", "missing 'rule'"),
    ("held_out:\n  chosen: \"2026-12-01\"\n  rule: r\n  pairings:\n  - name: a-vs-1\n    plugin: abcd\n"
     "    core: \"0.1\"\n", "pairing 'a-vs-1' appears twice"),
])
def test_a_bad_held_out_section_is_one_error(tmp_path, extra, message):
    with pytest.raises(OverlayError) as exc:
        load(write(tmp_path, BODY + extra))
    assert message in str(exc.value)
