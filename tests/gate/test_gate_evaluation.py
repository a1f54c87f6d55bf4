"""Scoring the gate against a hand classification (tools/overlay/gate/evaluation.py),
and the committed classification file itself."""

from __future__ import annotations

import re
from dataclasses import replace
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
                                          "2ec57c0a21-vs-0.26.0",
                                          # the second held-out set, moved into the tuned set on 2026-12-02
                                          "be940519a2-vs-0.25.0", "185462da5b-vs-0.26.0", "071c10bfbd-vs-0.23.0",
                                          # the third held-out set, moved into the tuned set on 2026-12-03
                                          "9154baadc9-vs-0.24.0", "585d76c714-vs-0.26.0", "686732c187-vs-0.27.0",
                                          "29894920f0-vs-0.24.0", "6e784075dc-vs-0.26.0",
                                          # the fourth held-out set, moved into the tuned set on 2026-12-03
                                          "97163123c9-vs-0.23.0", "ac4dc7cf3f-vs-0.24.0", "b328d3497e-vs-0.23.0",
                                          "010e089f31-vs-0.27.0",
                                          # the fifth held-out set, moved into the tuned set on 2026-12-03
                                          "327beef090-vs-0.24.0", "4adc032007-vs-0.24.0", "c511ca4a97-vs-0.26.0",
                                          # the sixth held-out set, moved into the tuned set on 2026-12-03
                                          "0.27.1rc1-vs-0.28.0", "0.28.0rc1-vs-0.29.0", "0.29.0rc1-vs-0.30.0",
                                          # the seventh (never tuned on) and eighth held-out sets, moved
                                          # when the ninth was committed (2026-12-03)
                                          "0.24.0rc1-vs-0.25.1", "0.25.1rc1-vs-0.26.0", "0.26.0rc1-vs-0.27.1",
                                          "0.17.0rc1-vs-0.18.0", "0.18.0-vs-0.19.1", "0.19.1rc1-vs-0.20.2",
                                          "0.20.2rc1-vs-0.22.1",
                                          # the ninth held-out set, moved when the tenth was committed
                                          "0.13.0-vs-0.14.1", "0.14.0rc1-vs-0.15.0", "0.15.0rc1-vs-0.16.0",
                                          "0.16.0rc1-vs-0.17.0",
                                          # the tenth, moved when it was tuned on
                                          "0.10.1rc1-vs-0.10.2", "0.10.2rc1-vs-0.11.0", "0.11.0-vs-0.12.0",
                                          "0.12.0rc1-vs-0.13.0",
                                          # the eleventh, moved when it was tuned on
                                          "0.8.5rc1-vs-0.9.0", "0.9.0rc2-vs-0.9.1", "0.9.1rc1-vs-0.9.2",
                                          "0.9.2rc1-vs-0.10.0", "0.10.0rc1-vs-0.10.1.1",
                                          # the twelfth (the plugin's first releases, V0 era), moved
                                          # when it was tuned on: no unspent held-out set is left
                                          "0.7.1rc1-vs-0.7.3", "0.7.3rc2-vs-0.8.4", "0.8.4rc2-vs-0.8.5.post1",
                                          # the thirteenth: another plugin (vllm-spyre), moved when it was tuned on
                                          "spyre-0.9.4-vs-0.10.2", "spyre-1.0.2-vs-0.11.0", "spyre-1.4.3-vs-0.13.0",
                                          "spyre-1.8.0-vs-0.16.0", "spyre-1.9.1-vs-0.18.0", "spyre-2.0.0rc1-vs-0.16.0",
                                          "spyre-2.0.0rc3-vs-0.17.1", "spyre-2.0.0rc7-vs-0.18.0",
                                          # the fourteenth: vllm-spyre's other pairings, moved when it was tuned on
                                          "spyre-0.4.1-vs-0.9.2", "spyre-0.6.0-vs-0.10.0", "spyre-0.8.0-vs-0.10.1.1",
                                          "spyre-1.3.0-vs-0.11.1", "spyre-1.4.0-vs-0.12.0", "spyre-1.6.0-vs-0.14.0",
                                          "spyre-1.7.0-vs-0.15.1", "spyre-2.0.0rc8-vs-0.18.1",
                                          # the fifteenth: a third plugin (vllm-rbln), moved when it was tuned on
                                          "rbln-0.9.2-vs-0.10.2", "rbln-0.10.0-vs-0.13.0", "rbln-0.10.2.post2-vs-0.18.0",
                                          "rbln-0.11.0a1-vs-0.22.0", "rbln-0.11.2a6-vs-0.24.0", "rbln-0.11.3a12-vs-0.26.0",
                                          "rbln-0.11.3a21-vs-0.30.0", "rbln-0.12.1a3-vs-0.31.0",
                                          # the sixteenth: a fourth plugin (tpu-inference), moved when it was tuned on
                                          "tpu-0.21.0-vs-0.24.0", "tpu-0.22.1-vs-0.25.0", "tpu-0.23.0-vs-0.26.0",
                                          "tpu-0.24.0-vs-0.27.0", "tpu-0.26.0-vs-0.29.0", "tpu-0.28.0-vs-0.30.0",
                                          "tpu-0.29.0-vs-0.32.0", "tpu-0.31.0-vs-0.33.0",
                                          # the seventeenth: a fifth plugin (vllm-gaudi), moved when it was tuned on
                                          "gaudi-0.13.0-vs-0.14.1", "gaudi-0.14.1-vs-0.15.1", "gaudi-0.15.1-vs-0.16.0",
                                          "gaudi-0.16.0-vs-0.17.1", "gaudi-0.17.1-vs-0.19.0", "gaudi-0.19.1-vs-0.21.0",
                                          "gaudi-0.21.0-vs-0.24.0", "gaudi-0.24.0-vs-0.26.0",
                                          # the eighteenth: a sixth plugin (vllm-metax), moved when it was tuned on
                                          "metax-0.13.0-vs-0.14.0", "metax-0.14.0-vs-0.15.0", "metax-0.15.0-vs-0.17.0",
                                          "metax-0.17.0-vs-0.18.0", "metax-0.18.0-vs-0.19.0", "metax-0.19.0-vs-0.20.0",
                                          "metax-0.20.0-vs-0.21.0", "metax-0.21.0-vs-0.22.0",
                                          # the nineteenth: vllm-kunlun, vllm-neuron, vllm-mindspore, moved when tuned on
                                          "kunlun-0.10.1.1-vs-0.11.0", "kunlun-0.11.0.dev20260212-vs-0.15.1",
                                          "neuron-0.1.0-vs-0.11.0", "mindspore-0.3.0-vs-0.9.1",
                                          "mindspore-0.4.0-vs-0.11.0",
                                          # the twentieth: a tenth plugin (vllm-gcu), moved when measured
                                          "gcu-0.7.2.dev0494399-vs-0.8.0", "gcu-0.8.0-vs-0.9.2",
                                          # the twenty-first (vllm-omni), moved when it was tuned on
                                          "omni-0.11.0rc1-vs-0.12.0", "omni-0.12.0rc1-vs-0.14.0",
                                          "omni-0.14.0-vs-0.16.0", "omni-0.16.0-vs-0.18.0", "omni-0.18.0-vs-0.20.0",
                                          # the twenty-second (vllm-omni's wheel-only releases), moved when it was tuned on
                                          "omni-0.20.0-vs-0.21.0", "omni-0.21.0rc1-vs-0.22.0", "omni-0.22.0-vs-0.23.0",
                                          "omni-0.23.0rc1-vs-0.24.0", "omni-0.24.0-vs-0.25.0", "omni-0.25.0rc1-vs-0.26.0",
                                          "omni-0.26.0-vs-0.27.0", "omni-0.27.0rc1-vs-0.28.0", "omni-0.28.0-vs-0.29.0",
                                          "omni-0.29.0rc1-vs-0.30.0", "omni-0.30.0-vs-0.31.0", "omni-0.31.0rc1-vs-0.32.0",
                                          # the twenty-third (vllm-metal's main2main bumps), moved when it was tuned on
                                          "metal-0.13.0-vs-0.14.1", "metal-0.14.1-vs-0.17.1", "metal-0.17.1-vs-0.19.0",
                                          "metal-0.19.1-vs-0.20.0", "metal-0.20.2-vs-0.21.0", "metal-0.21.0-vs-0.22.0",
                                          "metal-0.22.1-vs-0.23.0", "metal-0.23.0-vs-0.24.0", "metal-0.24.0-vs-0.25.1",
                                          "metal-0.25.1-vs-0.26.0", "metal-0.26.0-vs-0.27.0",
                                          # the twenty-fourth (vllm-qaic's bump), moved once measured
                                          "qaic-0.15.0-vs-0.23.0",
                                          # the twenty-fifth (vllm-metal's 0.27.1 bump) and the forward
                                          # set on vLLM 0.34.0 (no truth: precision only), moved once measured
                                          "metal-0.27.0-vs-0.27.1", "forward-omni-0.32.0rc1-vs-0.34.0",
                                          "forward-tpu-0.32.0rc1-vs-0.34.0", "forward-rbln-0.12.1a8-vs-0.34.0",
                                          "forward-metal-0.27.1-vs-0.34.0", "forward-qaic-0.23.0-vs-0.34.0",
                                          # the twenty-sixth: a fourteenth plugin (vllm-mblt), truth by
                                          # reading, moved when it was tuned on
                                          "mblt-0.8.0-vs-0.12.0", "mblt-0.8.0-vs-0.13.0",
                                          # the twenty-seventh: a fifteenth plugin (arctic-inference), moved
                                          # when it was tuned on
                                          "arctic-0.0.7-vs-0.9.0.1", "arctic-0.0.8-vs-0.9.2",
                                          "arctic-0.0.9-vs-0.10.1", "arctic-0.1.1-vs-0.11.0",
                                          "arctic-0.1.2-vs-0.18.0", "arctic-0.2.0-vs-0.26.0"]
    no_error = {"spyre-2.0.0rc3-vs-0.17.1", "spyre-2.0.0rc7-vs-0.18.0",  # the gate reported no error there
                "spyre-0.6.0-vs-0.10.0", "spyre-2.0.0rc8-vs-0.18.1",
                "metal-0.20.2-vs-0.21.0", "metal-0.21.0-vs-0.22.0", "metal-0.22.1-vs-0.23.0",
                "metal-0.24.0-vs-0.25.1", "metal-0.26.0-vs-0.27.0", "metal-0.27.0-vs-0.27.1"}
    assert all((p.verdicts or p.name in no_error) and all(v.reason for v in p.verdicts)
               for p in pairings if not p.held_out)
    bumps = [p for p in pairings if p.truth and not p.held_out]
    assert len(bumps) == 143 and all(p.source for p in bumps)  # every truth set names where it was read from
    assert [p.name for p in pairings if p.control] == ["351879064c-vs-0.27.1"]
    assert not any(p.held_out for p in pairings)  # every held-out set so far is spent (tuned on)
    rbln = [p for p in pairings if p.name.startswith("rbln-")]
    assert {p.plugin_dist for p in rbln} == {"vllm-rbln"} and all(p.truth and p.source for p in rbln)
    assert {p.plugin_dist for p in pairings if p.name.startswith("spyre-")} == {"vllm-spyre"}
    # the last four sets gated cores no earlier pairing was gated against, each measured before tuning
    archives = [p for p in pairings if p.plugin_release]
    assert {p.core for p in archives} >= {"0.7.3", "0.8.4", "0.8.5.post1", "0.9.0", "0.9.1", "0.9.2", "0.10.0", "0.10.1.1",
                                          "0.10.2", "0.11.0", "0.12.0", "0.13.0", "0.14.1", "0.15.0", "0.16.0",
                                          "0.17.0", "0.18.0", "0.19.1", "0.20.2", "0.22.1"}


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


TRUTH_BODY = """
pairings:
  - name: t-vs-1
    plugin: "abc123"
    core: "0.28.0"
    truth:
      - item: "free_blocks lost a parameter"
        keys: ["call:vllm.core.BlockPool.free_blocks @ p.py"]
        reach: true
        reason: "r"
      - item: "running_mean is gone"
        keys: ["attribute:vllm.vision.Norm.running_mean @ v.py"]
        reach: true
        reason: "r"
      - item: "make_dummy gained max_query_len"
        keys: ["override:a.Batch.make_dummy @ b.py"]
        reach: true
        reason: "r"
      - item: "a guarded read"
        keys: ["attribute:vllm.x.Y.z @ g.py"]
        reach: true
        reason: "r"
"""


def checker_finding(path: str, message: str, severity: str = "warning", confidence: str = "",
                    engine: str = "checker") -> Finding:
    return Finding("type", f"type:call-arg:{message}", path, 7, "", 0, message, severity=severity,
                   engine=engine, confidence=confidence)


def test_a_checker_forecast_names_a_truth_item_only_in_its_file_and_quoting_its_name(tmp_path):
    """The second engine's figure: a truth item is caught as an error, or forecast by a
    checker warning (not demoted to info by the hand filters) in the item's plugin file
    whose message quotes the item's name. Checker findings are never 'unclassified'."""
    (pairing,) = load(write(tmp_path, TRUTH_BODY))
    found = (
        checker_finding("p.py", 'Too many arguments for "free_blocks" of "BlockPool"'),
        checker_finding("b.py", 'Unexpected keyword argument "free_blocks"'),  # another item's file
        checker_finding("v.py", '"Norm" has no attribute "running_var"'),  # another name
        checker_finding("g.py", '"Y" has no attribute "z"', severity="info", confidence="low"),  # guarded
        finding("override:a.Batch.make_dummy", "b.py"),  # a hand error
    )
    s = score(pairing, found)
    assert (s.truth_items, s.truth_caught, s.truth_forecast) == (4, 1, 1)
    assert s.checker_forecasts == 3 and s.unclassified[0].symbol == "override:a.Batch.make_dummy"
    assert len(s.unclassified) == 1
    table = render([s])
    assert ("engines (t-vs-1): 0 agreed (both), 1 hand-only error(s), 0 confirmed forecast(s) (errors), "
            "3 checker forecast(s)") in table
    assert "recall on truth items as errors or forecasts 50% (2/4)" in table


def test_a_confirmed_forecast_is_an_error_scored_like_the_hand_gates(tmp_path):
    """A checker-only error (a forecast the hand gate's filters confirmed) catches a truth
    item by the forecast rule, is counted apart (`truth_confirmed`), and, being an error,
    needs a verdict like any hand error: unclassified until it has one, then in precision."""
    (pairing,) = load(write(tmp_path, TRUTH_BODY))
    confirmed = checker_finding("p.py", 'Too many arguments for "free_blocks" of "BlockPool"', severity="error",
                                confidence="high")
    other = checker_finding("v.py", '"Norm" has no attribute "running_var"', severity="error", confidence="high")
    s = score(pairing, (confirmed, other, finding("override:a.Batch.make_dummy", "b.py")))
    assert (s.truth_items, s.truth_caught, s.truth_confirmed, s.truth_forecast) == (4, 2, 1, 0)
    assert s.errors == 3 and s.checker_confirmed == 2
    assert {f.symbol for f in s.unclassified} == {confirmed.symbol, other.symbol, "override:a.Batch.make_dummy"}
    assert "2 confirmed forecast(s) (errors)" in render([s])
    # classified: the true one counts for precision, the false one against it
    body = TRUTH_BODY.replace("    truth:\n", f"""    findings:
      - key: '{confirmed.symbol} @ p.py'
        verdict: true
        reason: "r"
      - key: '{other.symbol} @ v.py'
        verdict: false
        reason: "r"
    truth:
""", 1)
    assert body != TRUTH_BODY
    (pairing,) = load(write(tmp_path, body))
    s = score(pairing, (confirmed, other))
    assert (s.errors, s.true_errors, s.false_errors, s.unclassified) == (2, 1, 1, ())


def test_a_forecast_quoting_the_name_qualified_still_names_the_item(tmp_path):
    """mypy quotes a function used as a type by its qualified name ("vllm.core.BlockPool
    .free_blocks"): that quotes the key's last name too; a longer name ending in it does not."""
    (pairing,) = load(write(tmp_path, TRUTH_BODY))
    qualified = checker_finding("p.py", 'Function "vllm.core.BlockPool.free_blocks" is not valid as a type')
    longer = checker_finding("v.py", 'Function "vllm.vision.Norm.running_mean_v2" is not valid as a type')
    s = score(pairing, (qualified, longer))
    assert (s.truth_forecast, s.truth_forecast_items) == (1, ("free_blocks lost a parameter",))


def test_without_the_checker_there_is_no_forecast_line(tmp_path):
    (pairing,) = load(write(tmp_path, TRUTH_BODY))
    s = score(pairing, (finding("override:a.Batch.make_dummy", "b.py"),))
    assert s.truth_forecast == 0 and not s.checker_ran
    assert "forecasts" not in render([s])


def _sdist(pypi: Path, version: str, files: dict[str, str]) -> None:
    import io
    import tarfile

    with tarfile.open(pypi / f"vllm-{version}.tar.gz", "w:gz") as tar:
        for name, text in {"vllm/__init__.py": f"__version__ = '{version}'\n", **files}.items():
            data = text.encode()
            info = tarfile.TarInfo(f"vllm-{version}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _eval_both(tmp_path, capsys, plugin_files: dict[str, str], releases: dict[str, str], truth: str):
    """`gate-eval --engine both` from the CLI on a synthetic mirror: the plugin committed,
    one `vllm/pool.py` per release; `truth` is the pairing's truth list (YAML, 4 spaces
    in). Returns (exit status, stdout, stderr)."""
    from tests.fixtures import commit_all, init_repo, write as write_files
    from overlay.cli import main

    mirror = tmp_path / "mirror"
    repo = init_repo(mirror / "vllm-project+vllm-ascend")
    write_files(repo, plugin_files)
    commit = commit_all(repo, "plugin")
    (mirror / "pypi").mkdir()
    for version, pool in releases.items():
        _sdist(mirror / "pypi", version, {"vllm/pool.py": pool})
    core = max(releases, key=lambda v: tuple(int(x) for x in v.split(".")))
    body = f'pairings:\n  - name: x-vs-{core}\n    plugin: "{commit}"\n    core: "{core}"\n    truth:\n{truth}'
    rc = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror), "--engine", "both",
               "--classification", str(write(tmp_path, body))])
    out, err = capsys.readouterr()
    return rc, out, err


def test_gate_eval_with_both_engines_end_to_end(tmp_path, capsys):
    """`gate-eval --engine both`: the checker runs differentially from the release before
    the pairing's (the plugin declares none), and the table says what each engine found."""
    pytest.importorskip("mypy")
    rc, out, err = _eval_both(
        tmp_path, capsys,
        {"vllm_ascend/__init__.py": "",
         "vllm_ascend/worker.py": "from vllm.pool import free\n\n\ndef run() -> None:\n    free(1, 2)\n"},
        {"0.25.0": "def free(a: int, b: int) -> None:\n    pass\n", "0.26.0": "def free(a: int) -> None:\n    pass\n"},
        '      - item: "free lost b"\n        keys: ["call:vllm.pool.free @ vllm_ascend/worker.py"]\n'
        '        reach: true\n        reason: "r"\n')
    assert "engines (x-vs-0.26.0): 1 agreed (both), 0 hand-only error(s)" in out, out + err
    assert "recall on truth items as errors or forecasts 100% (1/1)" in out
    assert rc == 1  # the agreed error is not classified yet


def test_the_checker_starts_from_the_declared_release_else_the_one_before(tmp_path):
    from overlay.commands.gate_eval import declared_core

    pypi = tmp_path / "pypi"
    pypi.mkdir()
    for v in ("0.9.0", "0.10.0", "0.10.1rc1", "0.11.0"):
        _sdist(pypi, v, {})
    (pypi / "vllm-notaversion.tar.gz").write_text("")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    assert declared_core(tmp_path, plugin, "0.11.0") == "0.10.1rc1"  # PEP 440 order, not text order
    (plugin / "install.sh").write_text('VLLM_VERSION="0.9.0"\n')  # vllm-metal's declaration
    assert declared_core(tmp_path, plugin, "0.11.0") == "0.9.0"
    (plugin / "install.sh").unlink()
    (plugin / "Dockerfile").write_text("ARG VLLM_TAG=v0.10.0\n")  # a release older than the tag file
    assert declared_core(tmp_path, plugin, "0.11.0") == "0.10.0"
    (plugin / ".github").mkdir()
    (plugin / ".github" / "vllm-release-tag.commit").write_text("v0.9.0\n")
    assert declared_core(tmp_path, plugin, "0.11.0") == "0.9.0"
    (plugin / ".github" / "vllm-release-tag.commit").unlink()
    (plugin / "Dockerfile").unlink()
    assert declared_core(tmp_path, plugin, "0.9.0") is None


def test_a_pairing_the_checker_cannot_diff_is_said_and_the_others_still_run(tmp_path, capsys):
    """Nothing older than the pairing's core: the checker did not run there, said on the
    pairing's line, and the run goes on (it once stopped the whole evaluation)."""
    from tests.fixtures import commit_all, init_repo, write as write_files
    from overlay.cli import main

    mirror = tmp_path / "mirror"
    repo = init_repo(mirror / "vllm-project+vllm-ascend")
    write_files(repo, {"vllm_ascend/__init__.py": "", "vllm_ascend/worker.py": "from vllm.pool import free\n"})
    commit = commit_all(repo, "plugin")
    (mirror / "pypi").mkdir()
    _sdist(mirror / "pypi", "0.25.0", {"vllm/pool.py": "def free(a: int) -> None:\n    pass\n"})
    body = f'pairings:\n  - name: x-vs-0.25.0\n    plugin: "{commit}"\n    core: "0.25.0"\n'
    rc = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror), "--engine", "both",
               "--classification", str(write(tmp_path, body))])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "engines (x-vs-0.25.0): the checker did not run: no release older than 0.25.0 in the mirror" in out


def test_a_truth_item_named_by_a_checker_key_is_forecast_by_that_diagnostic_only(tmp_path):
    body = TRUTH_BODY.replace('keys: ["attribute:vllm.x.Y.z @ g.py"]',
                              'keys: ["type:misc:Attributes without a default cannot follow attributes with one @ g.py"]')
    (pairing,) = load(write(tmp_path, body))
    other = Finding("type", "type:misc:Something else", "g.py", 3, "", 0, "Something else", severity="warning",
                    engine="checker")
    assert score(pairing, (other,)).truth_forecast == 0
    hit = replace(other, symbol="type:misc:Attributes without a default cannot follow attributes with one")
    assert score(pairing, (hit,)).truth_forecast_items == ("a guarded read",)


@pytest.mark.parametrize("tag", ["../../outside", "v0.9.0/../../x", "--output=x", "0.9.0 extra"])
def test_a_hostile_declared_tag_is_not_a_release_and_reaches_no_path(tmp_path, tag):
    """The tag file is upstream data: a value that is not a release version is read as no
    declaration (the release before the pairing's is used), never joined into a path."""
    from overlay.commands.gate_eval import declared_core

    pypi = tmp_path / "pypi"
    pypi.mkdir()
    for v in ("0.9.0", "0.10.0"):
        _sdist(pypi, v, {})
    plugin = tmp_path / "plugin"
    (plugin / ".github").mkdir(parents=True)
    (plugin / ".github" / "vllm-release-tag.commit").write_text(tag + "\n")
    assert declared_core(tmp_path, plugin, "0.10.0") == "0.9.0"


def test_gate_eval_scores_a_confirmed_forecast_end_to_end(tmp_path, capsys):
    """`gate-eval --engine both` on a plugin with entry points: a read only the checker sees
    (a comprehension's variable), at module level of a module start-up loads, is a
    confirmed forecast: an error to classify, and it catches the truth item."""
    pytest.importorskip("mypy")
    rc, out, err = _eval_both(
        tmp_path, capsys,
        {"setup.py": 'from setuptools import setup\nsetup(name="vllm-ascend", entry_points={"vllm.platform_plugins": '
                     '["ascend = vllm_ascend:register"]})\n',
         "vllm_ascend/__init__.py": "def register():\n    import vllm_ascend.runner  # noqa\n",
         "vllm_ascend/runner.py": "from vllm.pool import Pool\n\n\ndef owners(pools: list[Pool]) -> list[int]:\n"
                                  "    return [p.shared for p in pools]\n\n\nOWNERS = owners([])\n"},
        {"0.25.0": "class Pool:\n    shared: int = 0\n", "0.26.0": "class Pool:\n    size: int = 0\n"},
        '      - item: "Pool lost shared"\n        keys: ["attribute:vllm.pool.Pool.shared @ vllm_ascend/runner.py"]\n'
        '        reach: true\n        reason: "r"\n')
    assert "1 confirmed forecast(s) (errors)" in out, out + err
    assert "(1 by confirmed forecasts, 1 confirmed-forecast errors)" in out, out
    assert 'unclassified (x-vs-0.26.0): error: type:attr-defined:"Pool" has no attribute "shared"' in out, out
    assert rc == 1


# ----------------------------------------------------------------------------- plugin release archives

def _plugin_sdist(pypi: Path, version: str, files: dict[str, str], dist: str = "vllm_ascend",
                  wheel: bool = False) -> None:
    """A synthetic plugin release archive, laid out as PyPI's vllm_ascend sdists are (or, with
    `wheel`, a wheel: the files at its top, PKG-INFO as `<dist>-<version>.dist-info/METADATA`)."""
    import io
    import tarfile
    import zipfile

    if wheel:
        with zipfile.ZipFile(pypi / f"{dist}-{version}-py3-none-any.whl", "w") as zf:
            for name, text in files.items():
                zf.writestr(f"{dist}-{version}.dist-info/METADATA" if name == "PKG-INFO" else name, text)
        return

    with tarfile.open(pypi / f"{dist}-{version}.tar.gz", "w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{dist}-{version}/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _eval_release_both(tmp_path, capsys, dist: str, version: str, declares: dict[str, str],
                       before: tuple[str, ...], name: str = "r-vs-0.26.0",
                       declared: str | None = None, wheel: bool = False) -> tuple[int, str, str]:
    """`gate-eval --engine both` on one pairing `name` of the plugin release archive
    `dist==version` (declaring its core through `declares`), whose `free(1, 2)` breaks where core's
    `free` lost `b`: in 0.25.0 and 0.26.0, not in the releases `before` (the declared one among them)."""
    pytest.importorskip("mypy")
    from overlay.cli import main

    package = dist.replace("-", "_")
    mirror = tmp_path / "mirror"
    (mirror / "pypi").mkdir(parents=True)
    _plugin_sdist(mirror / "pypi", version, {
        **declares, f"{package}/__init__.py": "",
        f"{package}/worker.py": "from vllm.pool import free\n\n\ndef run() -> None:\n    free(1, 2)\n"},
        dist=package, wheel=wheel)
    two, one = "def free(a: int, b: int) -> None:\n    pass\n", "def free(a: int) -> None:\n    pass\n"
    for core, pool in {**dict.fromkeys(before, two), "0.25.0": one, "0.26.0": one}.items():
        _sdist(mirror / "pypi", core, {"vllm/pool.py": pool})
    stated = f'    declared: "{declared}"\n' if declared else ""
    body = (f'pairings:\n  - name: {name}\n    plugin: "{dist}=={version}"\n    core: "0.26.0"\n{stated}'
            f'    truth:\n      - item: "free lost b"\n        keys: ["call:vllm.pool.free @ {package}/worker.py"]\n'
            '        reach: true\n        reason: "r"\n')
    rc = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror), "--engine", "both",
               "--classification", str(write(tmp_path, body))])
    out, err = capsys.readouterr()
    return rc, out, err


def test_gate_eval_gates_a_plugin_release_archive_end_to_end(tmp_path, capsys):
    """`plugin: vllm-ascend==VERSION` gates the release archive in the mirror's pypi/ (no
    plugin repository needed), and the checker diffs from the core the archive declares
    (0.24.0), not from the release before the pairing's (0.25.0, where the break already is):
    only then do both engines agree."""
    rc, out, err = _eval_release_both(tmp_path, capsys, "vllm-ascend", "0.9.0rc1",
                                      {".github/vllm-release-tag.commit": "v0.24.0\n"}, ("0.24.0",))
    assert "engines (r-vs-0.26.0): 1 agreed (both), 0 hand-only error(s)" in out, out + err
    assert "recall on truth items as errors or forecasts 100% (1/1)" in out
    assert rc == 1  # the agreed error is not classified yet


def test_gate_eval_gates_another_plugins_release_archive_from_its_declared_requirement(tmp_path, capsys):
    """`plugin: vllm-spyre==VERSION`: another out-of-tree plugin's release archive (no release
    tag file; its pyproject admits `vllm>=0.23.0,<0.24.1`) is gated like vllm-ascend's, and the
    checker diffs from the newest release the requirement admits (0.24.0), not from the one
    before the pairing's (0.25.0, where the break already is): only then do both engines agree."""
    rc, out, err = _eval_release_both(
        tmp_path, capsys, "vllm-spyre", "2.0.0rc3",
        {"pyproject.toml": '[project]\nname = "vllm-spyre"\ndependencies = ["torch", "vllm>=0.23.0,<0.24.1"]\n'},
        ("0.23.0", "0.24.0"), name="s-vs-0.26.0")
    assert "engines (s-vs-0.26.0): 1 agreed (both), 0 hand-only error(s)" in out, out + err
    assert "recall on truth items as errors or forecasts 100% (1/1)" in out
    assert rc == 1  # the agreed error is not classified yet


def test_gate_eval_gates_a_plugin_whose_archive_declares_its_core_in_pkg_info(tmp_path, capsys):
    """`plugin: vllm-rbln==VERSION`: a plugin whose archive has no pyproject (vllm-rbln ships
    wheels; the archive holds their files as an sdist does) declares its core in PKG-INFO's
    `Requires-Dist: vllm==0.24.0+cpu` (a local build of 0.24.0): the checker diffs from 0.24.0,
    not from 0.25.0 (where the break already is), so both engines agree."""
    rc, out, err = _eval_release_both(
        tmp_path, capsys, "vllm-rbln", "0.11.2a6",
        {"PKG-INFO": "Metadata-Version: 2.4\nName: vllm-rbln\nVersion: 0.11.2a6\n"
                     "Requires-Dist: torch\nRequires-Dist: vllm==0.24.0+cpu\n"
                     "Requires-Dist: vllm[audio]; extra == \"audio\"\n\nlong description\n"},
        ("0.23.0", "0.24.0"), name="b-vs-0.26.0")
    assert "engines (b-vs-0.26.0): 1 agreed (both), 0 hand-only error(s)" in out, out + err
    assert rc == 1  # the agreed error is not classified yet


def test_gate_eval_gates_a_plugin_that_publishes_a_wheel_only_end_to_end(tmp_path, capsys):
    """`plugin: vllm-omni==VERSION` where the mirror holds the release's wheel only (vllm-omni from
    0.21.0rc1 on, vllm-rbln): the wheel is the archive, its `*.dist-info/METADATA` declares the core
    (0.24.0, so the checker starts there and both engines agree), and its
    `*.dist-info/entry_points.txt` names the way in."""
    meta = ("Metadata-Version: 2.4\nName: vllm-omni\nVersion: 0.24.0\n"
            "Requires-Dist: vllm==0.24.0\n\nlong description\n")
    rc, out, err = _eval_release_both(tmp_path, capsys, "vllm-omni", "0.24.0", {
        "PKG-INFO": meta,
        "vllm_omni-0.24.0.dist-info/entry_points.txt": "[console_scripts]\nvllm-omni = vllm_omni.worker:run\n"},
        ("0.23.0", "0.24.0"), name="w-vs-0.26.0", wheel=True)
    assert "checking the plugin against core 0.24.0" in err, err
    assert "engines (w-vs-0.26.0): 1 agreed (both), 0 hand-only error(s)" in out, out + err
    assert rc == 1  # the agreed error is not classified yet


def test_gate_eval_starts_the_checker_from_a_pairings_stated_declared_core_end_to_end(tmp_path, capsys):
    """`declared: 0.24.0` on a pairing whose archive declares its core only in prose (vllm-metax's
    README, vllm-kunlun's own version): the checker diffs from 0.24.0, not from the release before
    the pairing's (0.25.0, where the break already is), so both engines agree; without it the
    checker starts from 0.25.0 and the break is the hand engine's alone."""
    rc, out, err = _eval_release_both(tmp_path, capsys, "vllm-metax", "0.24.0", {"README.md": "aligned with vLLM v0.24.0\n"},
                                      ("0.24.0",), name="m-vs-0.26.0", declared="0.24.0")
    assert "checking the plugin against core 0.24.0" in err, err
    assert "engines (m-vs-0.26.0): 1 agreed (both), 0 hand-only error(s)" in out, out + err
    assert rc == 1  # the agreed error is not classified yet
    rc, out, err = _eval_release_both(tmp_path / "without", capsys, "vllm-metax", "0.24.0",
                                      {"README.md": "aligned with vLLM v0.24.0\n"}, ("0.24.0",), name="m-vs-0.26.0")
    assert "checking the plugin against core 0.25.0" in err, err
    assert "1 agreed (both)" not in out and "unclassified (m-vs-0.26.0): error: call:vllm.pool.free" in out, out


def _declared_core(tmp_path, releases: tuple[str, ...], files: dict[str, str], core: str = "0.11.0") -> str | None:
    """declared_core for a plugin tree holding `files`, with the mirror holding `releases`."""
    from overlay.commands.gate_eval import declared_core

    pypi = tmp_path / "pypi"
    pypi.mkdir(exist_ok=True)
    for v in releases:
        _sdist(pypi, v, {})
    plugin = tmp_path / "plugin"
    plugin.mkdir(exist_ok=True)
    for name, text in files.items():
        (plugin / name).write_text(text)
    return declared_core(tmp_path, plugin, core)


@pytest.mark.parametrize("pkg_info", ["Requires-Dist: vllm==../../x\n", "Requires-Dist: vllm @ file:///x\n",
                                      "\x00" * 10, "Name: x\nRequires-Dist: vllm>=9.0\n", "Requires-Dist: [\n",
                                      # the long description (after the headers) is prose, not metadata
                                      "Name: x\n\nRequires-Dist: vllm==0.9.0\n"])
def test_a_broken_or_hostile_pkg_info_is_no_declaration(tmp_path, pkg_info):
    assert _declared_core(tmp_path, ("0.9.0", "0.10.0"), {"PKG-INFO": pkg_info}) == "0.10.0"


@pytest.mark.parametrize("pyproject", ['[project]\ndependencies = ["vllm>=0.9.0,<0.10.1"]\n',
                                       '[project]\ndependencies = ["vllm[audio] >=0.9.0, <=0.10.0 ; python_version>\'3\'"]\n'])
def test_the_checker_starts_from_the_newest_release_the_plugins_requirement_admits(tmp_path, pyproject):
    releases = ("0.9.0", "0.10.0", "0.10.1rc1", "0.11.0")
    assert _declared_core(tmp_path, releases, {"pyproject.toml": pyproject}) == "0.10.0"
    # a declared tag still wins
    assert _declared_core(tmp_path, (), {"Dockerfile": "ARG VLLM_TAG=v0.9.0\n"}) == "0.9.0"


@pytest.mark.parametrize("pyproject", ["[project\n", '[project]\ndependencies = "vllm<0.10"\n',
                                       '[project]\ndependencies = ["vllm @ ../../x", "vllm>=9.0"]\n',
                                       '[project]\ndependencies = ["vllm==../../x"]\n', "\x00" * 10])
def test_a_broken_or_hostile_requirement_is_no_declaration(tmp_path, pyproject):
    """The pyproject is upstream data: one that does not parse, or a requirement no mirror
    release satisfies, falls back to the release before the pairing's, never to a path."""
    assert _declared_core(tmp_path, ("0.9.0", "0.10.0"), {"pyproject.toml": pyproject}) == "0.10.0"


def test_a_plugin_release_the_mirror_lacks_is_one_line_and_nothing_is_fetched(tmp_path, capsys, monkeypatch):
    from overlay.cli import main
    from overlay.trees import sources

    monkeypatch.setattr(sources, "download_archive", lambda *a, **k: pytest.fail("gate-eval downloaded"))
    mirror = tmp_path / "mirror"
    (mirror / "pypi").mkdir(parents=True)
    _sdist(mirror / "pypi", "0.26.0", {})
    body = 'pairings:\n  - name: r\n    plugin: "vllm-ascend==0.9.0rc1"\n    core: "0.26.0"\n'
    rc = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror),
               "--classification", str(write(tmp_path, body))])
    out, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") <= 2 and "Traceback" not in err, err
    assert "no vllm-ascend 0.9.0rc1 source archive" in err and "vllm_ascend-0.9.0rc1.tar.gz" in err


@pytest.mark.parametrize("plugin", ["vllm-ascend==../../x", "vllm-ascend==0.9.0/../../x", "vllm-ascend==--output=x",
                                    "../x==0.9.0", "Vllm-ascend==0.9.0", "vllm-ascend==0.9.0 extra", "vllm-ascend>=0.9.0"])
def test_a_plugin_release_that_is_not_a_version_is_refused_at_load(tmp_path, plugin):
    with pytest.raises(OverlayError) as exc:
        load(write(tmp_path, f'pairings:\n  - name: r\n    plugin: "{plugin}"\n    core: "0.26.0"\n'))
    assert "is not a commit id nor a plugin release (DISTRIBUTION==VERSION" in str(exc.value)


@pytest.mark.parametrize("plugin,dist,version", [("vllm-ascend==0.9.0rc1", "vllm-ascend", "0.9.0rc1"),
                                                 ("vllm-spyre==2.0.0rc3", "vllm-spyre", "2.0.0rc3"),
                                                 ("vllm_spyre==1.9.1", "vllm-spyre", "1.9.1"),
                                                 # core declares this one (vLLM's requirements/tpu.txt)
                                                 ("tpu-inference==0.28.0", "tpu-inference", "0.28.0")])
def test_a_vllm_plugin_release_is_loaded_with_its_distribution(tmp_path, plugin, dist, version):
    (pairing,) = load(write(tmp_path, f'pairings:\n  - name: r\n    plugin: "{plugin}"\n    core: "0.26.0"\n'))
    assert (pairing.plugin_dist, pairing.plugin_release) == (dist, version)


@pytest.mark.parametrize("dist,version", [("vllm-ascend", "0.9.0rc1"), ("vllm-spyre", "2.0.0rc3"),
                                          ("vllm-rbln", "0.11.2a6"), ("tpu-inference", "0.28.0")])
@pytest.mark.parametrize("member", ["{top}/../../escaped.py", "/tmp/absolute-escape.py"])
def test_a_hostile_plugin_archive_is_one_line_and_writes_nothing_outside(tmp_path, capsys, member, dist, version):
    """The plugin release archive is upstream data, whichever plugin it is: a member that
    climbs out of the tree (or is absolute) stops gate-eval with one line naming the archive,
    and nothing lands outside."""
    import io
    import tarfile

    from overlay.cli import main

    mirror = tmp_path / "mirror"
    (mirror / "pypi").mkdir(parents=True)
    _sdist(mirror / "pypi", "0.26.0", {})
    top = f"{dist.replace('-', '_')}-{version}"
    with tarfile.open(mirror / "pypi" / f"{top}.tar.gz", "w:gz") as tar:
        for name in (f"{top}/{dist.replace('-', '_')}/__init__.py", member.format(top=top)):
            info = tarfile.TarInfo(name)
            info.size = 2
            tar.addfile(info, io.BytesIO(b"x\n"))
    before = set(tmp_path.parent.iterdir())
    body = f'pairings:\n  - name: r\n    plugin: "{dist}=={version}"\n    core: "0.26.0"\n'
    rc = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror),
               "--classification", str(write(tmp_path, body))])
    out, err = capsys.readouterr()
    assert rc == 2 and "Traceback" not in err and err.count("\n") <= 2, err
    assert f"{top}.tar.gz" in err and "nothing was imported" in err, err
    assert set(tmp_path.parent.iterdir()) == before and not Path("/tmp/absolute-escape.py").exists()


def test_the_sixteenth_set_is_classified_with_its_core_declared_by_core():
    """tpu-inference (held out 2026-12-05, then tuned on): every pairing names a release
    archive of that distribution, every error key of the frozen run has a verdict, and every
    truth item in reach has keys."""
    from overlay.commands.gate_eval import CLASSIFICATION

    root = Path(__file__).resolve().parents[2]
    tpu = [p for p in load(root / CLASSIFICATION) if p.name.startswith("tpu-")]
    assert len(tpu) == 8 and {p.plugin_dist for p in tpu} == {"tpu-inference"}
    assert all(p.plugin_release and p.truth and p.source and p.verdicts for p in tpu)
    assert all(t.keys for p in tpu for t in p.truth if t.reach)


def test_the_classification_may_outgrow_the_project_yaml_cap_but_not_its_own(tmp_path):
    """The committed classification passed 1 MiB (2026-12-03, the ninth held-out set); its
    own cap is 8 MiB, and a file past that is still one line naming it."""
    from overlay.gate.evaluation import EVALUATION_MAX_BYTES
    from overlay.series.yamldoc import MAX_BYTES

    pad = "# " + "x" * 1000 + "\n"
    body = "pairings:\n  - name: x\n    plugin: abcd\n    core: \"0.1\"\n"
    big = tmp_path / "big" / "eval.yaml"
    big.parent.mkdir()
    big.write_text(pad * (MAX_BYTES // len(pad) + 10) + body)
    assert [p.name for p in load(big)] == ["x"]
    huge = tmp_path / "eval.yaml"
    huge.write_text(pad * (EVALUATION_MAX_BYTES // len(pad) + 10) + body)
    with pytest.raises(OverlayError) as exc:
        load(huge)
    assert "larger than" in str(exc.value) and exc.value.path.endswith("eval.yaml")


# ------------------------------------------- truth keys in the gate's own forms (eleventh held-out set)
# A truth key the gate can never emit is never caught: the eleventh set's blind truth wrote the
# InputBatch constructor as `constructor:<class> @ <path>`; the gate names the calling module too.

KEYED = """
pairings:
  - name: k-vs-1
    plugin: "abc123"
    core: "0.28.0"
    truth:
      - item: "InputBatch lost a parameter"
        keys: ["constructor:vllm.v1.worker.gpu_input_batch.InputBatch @ vllm_ascend/worker/model_runner_v1.py"]
        reach: true
        reason: "r"
"""


def test_a_constructor_key_without_the_calling_module_is_the_module_of_its_path(tmp_path):
    from overlay.gate.evaluation import canonical_key
    [p] = load(write(tmp_path, KEYED))
    assert p.truth[0].keys == ("constructor:vllm_ascend.worker.model_runner_v1:vllm.v1.worker.gpu_input_batch.InputBatch"
                               " @ vllm_ascend/worker/model_runner_v1.py",)
    s = score(p, (finding("constructor:vllm_ascend.worker.model_runner_v1:vllm.v1.worker.gpu_input_batch.InputBatch",
                          "vllm_ascend/worker/model_runner_v1.py"),))
    assert s.truth_caught == 1
    assert canonical_key("constructor:a.B @ pkg/__init__.py") == "constructor:pkg:a.B @ pkg/__init__.py"
    assert canonical_key("call:a.b @ p.py") == "call:a.b @ p.py"


@pytest.mark.parametrize("key, message", [
    ("calls:vllm.x.f @ p.py", "no finding kind 'calls'"),
    ("call:vllm.x.f", "not '<symbol> @ <plugin path>.py'"),
    ("attribute:KVCacheBlocks? has no attribute @ p.py", "not the gate's form for attribute"),
    ("import:vllm.x:y:z @ p.py", "not the gate's form for import"),
])
def test_a_truth_key_in_no_form_the_gate_emits_is_one_error(tmp_path, key, message):
    body = KEYED.replace("constructor:vllm.v1.worker.gpu_input_batch.InputBatch @ vllm_ascend/worker/model_runner_v1.py",
                         key)
    with pytest.raises(OverlayError) as exc:
        load(write(tmp_path, body))
    assert message in str(exc.value) and exc.value.path.endswith("eval.yaml")


def test_gate_eval_refuses_a_truth_key_in_no_form_the_gate_emits_from_the_cli(tmp_path, capsys):
    from overlay.cli import main

    mirror, _ = _eval_mirror(tmp_path)
    body = KEYED.replace("constructor:vllm.v1.worker.gpu_input_batch.InputBatch @", "calls:vllm.x.f @")
    rc = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror),
               "--classification", str(write(tmp_path, body))])
    _, err = capsys.readouterr()
    assert rc == 2 and err.count("\n") <= 2 and "Traceback" not in err, err
    assert "eval.yaml" in err and "no finding kind 'calls'" in err


def _two_file_project(tmp_path) -> Path:
    """A project root whose classification is benchmarks/gate_eval.yaml (one tuned pairing)
    and whose held-out truth is in benchmarks/gate_eval_held_out.yaml (one pairing), and a
    mirror with the plugin release and core both gate."""
    mirror = tmp_path / "mirror"
    (mirror / "pypi").mkdir(parents=True)
    _plugin_sdist(mirror / "pypi", "0.9.0rc1", {"vllm_ascend/__init__.py": "",
                                                "vllm_ascend/worker.py": "from vllm.pool import free\n"})
    _sdist(mirror / "pypi", "0.26.0", {"vllm/pool.py": "def other():\n    pass\n"})
    bench = tmp_path / "benchmarks"
    bench.mkdir()
    (bench / "gate_eval.yaml").write_text(
        'pairings:\n  - name: tuned\n    plugin: "vllm-ascend==0.9.0rc1"\n    core: "0.26.0"\n'
        '    findings:\n      - key: "import:vllm.pool:free @ vllm_ascend/worker.py"\n'
        '        verdict: true\n        reason: "gone"\n')
    (bench / "gate_eval_held_out.yaml").write_text(
        'pairings: []\nheld_out:\n  chosen: "2026-12-04"\n  rule: "r"\n  pairings:\n'
        '    - name: held\n      plugin: "vllm-ascend==0.9.0rc1"\n      core: "0.26.0"\n'
        '      truth:\n        - item: "free gone"\n          keys: ["import:vllm.pool:free @ vllm_ascend/worker.py"]\n'
        '          reach: true\n          reason: "r"\n')
    return mirror


def test_gate_eval_reads_the_held_out_truth_from_a_file_of_its_own(tmp_path, capsys):
    """Held-out truth kept apart from the classification (which classifiers read for the style
    of reasons) in benchmarks/gate_eval_held_out.yaml: gate-eval reads both by default and
    scores the held-out pairing apart; `--classification` may be given more than once."""
    import json

    from overlay.cli import main

    mirror = _two_file_project(tmp_path)
    rc = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert {(s["pairing"], bool(s["held_out"])) for s in doc} == {("tuned", False), ("held", True)}
    held = next(s for s in doc if s["pairing"] == "held")
    assert held["truth_items"] == 1 and held["truth_caught"] == 1
    assert rc == 1  # the held-out pairing's error is not classified yet
    only = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror), "--json",
                 "--classification", str(tmp_path / "benchmarks" / "gate_eval.yaml")])
    assert [s["pairing"] for s in json.loads(capsys.readouterr().out)] == ["tuned"] and only == 0
    both = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror), "--json",
                 "--classification", str(tmp_path / "benchmarks" / "gate_eval.yaml"),
                 "--classification", str(tmp_path / "benchmarks" / "gate_eval_held_out.yaml")])
    assert len(json.loads(capsys.readouterr().out)) == 2 and both == 1


def test_a_pairing_named_in_two_classification_files_is_one_line_naming_both(tmp_path, capsys):
    from overlay.cli import main

    mirror = _two_file_project(tmp_path)
    held = tmp_path / "benchmarks" / "gate_eval_held_out.yaml"
    held.write_text(held.read_text().replace("- name: held", "- name: tuned"))
    rc = main(["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") <= 2 and "Traceback" not in err, err
    assert "'tuned'" in err and "gate_eval.yaml" in err and "gate_eval_held_out.yaml" in err, err


def test_a_pairing_may_name_the_core_its_plugin_release_declares_in_prose(tmp_path):
    """vllm-metax declares its core only in its README ("aligned with vLLM v0.17.0") and
    tpu-inference only through core's requirements/tpu.txt: the pairing says it (`declared:`),
    and the checker's differential starts there rather than at the mirror's release before C."""
    from overlay.commands.gate_eval import declared_core

    (pairing,) = load(write(tmp_path, 'pairings:\n  - name: r\n    plugin: "vllm-metax==0.17.0"\n'
                                      '    core: "0.18.0"\n    declared: "0.17.0"\n'))
    assert pairing.declared == "0.17.0"
    mirror = tmp_path / "mirror"
    (mirror / "pypi").mkdir(parents=True)
    for v in ("0.17.0", "0.17.1", "0.18.0"):
        (mirror / "pypi" / f"vllm-{v}.tar.gz").write_bytes(b"")
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    assert declared_core(mirror, plugin, "0.18.0") == "0.17.1"  # what the tree alone gives
    assert declared_core(mirror, plugin, "0.18.0", pairing.declared) == "0.17.0"


@pytest.mark.parametrize("declared", ["../0.17.0", "0.18.0", "0.19.0", "main", "--x"])
def test_a_declared_core_that_is_not_an_older_release_is_refused_at_load(tmp_path, declared):
    with pytest.raises(OverlayError) as exc:
        load(write(tmp_path, 'pairings:\n  - name: r\n    plugin: "vllm-metax==0.17.0"\n'
                             f'    core: "0.18.0"\n    declared: "{declared}"\n'))
    assert "declared core" in str(exc.value) and "is not a release older than 0.18.0" in str(exc.value)


# ----------------------------------------------------------------------------- memory over many pairings

def test_gate_eval_runs_pairings_in_core_order_keeps_the_listed_order_and_holds_one_cores_trees(
        tmp_path, capsys, monkeypatch):
    """gate-eval over pairings listed out of core order: they run by core release (the
    progress lines), report in the classification's order with what each pairing gives
    alone, and the shared cache holds no module of a core the last run did not read
    (one process over 73 real pairings reached 18.9 GB when it kept every core)."""
    import json as _json

    from tests.fixtures import commit_all, init_repo, write as write_files
    from overlay.cli import main
    from overlay.commands import gate_eval
    from overlay.gate.engine import Cache

    mirror = tmp_path / "mirror"
    repo = init_repo(mirror / "vllm-project+vllm-ascend")
    write_files(repo, {"vllm_ascend/__init__.py": "",
                       "vllm_ascend/worker.py": "from vllm.pool import free\n\n\ndef run() -> None:\n    free(1, 2)\n"})
    commit = commit_all(repo, "plugin")
    (mirror / "pypi").mkdir()
    pools = {"0.25.0": "def free(a, b):\n    pass\n", "0.26.0": "def free(a):\n    pass\n",
             "0.27.0": "def free(a):\n    return None\n"}
    for version, pool in pools.items():
        _sdist(mirror / "pypi", version, {"vllm/pool.py": pool})
    listed = ["0.27.0", "0.25.0", "0.26.0"]
    body = "pairings:\n" + "".join(
        f'  - name: x-vs-{v}\n    plugin: "{commit}"\n    core: "{v}"\n    truth:\n'
        '      - item: "free lost b"\n        keys: ["call:vllm.pool.free @ vllm_ascend/worker.py"]\n'
        '        reach: true\n        reason: "r"\n' for v in listed)
    classification = str(write(tmp_path, body))
    made: list[Cache] = []
    real = Cache.bounded

    def bounded() -> Cache:
        made.append(real())
        return made[-1]

    monkeypatch.setattr(gate_eval.Cache, "bounded", staticmethod(bounded))
    args = ["--root", str(tmp_path), "gate-eval", "--mirror", str(mirror), "--classification", classification]
    rc = main(args)
    out, err = capsys.readouterr()
    ran = re.findall(r"\] (x-vs-[0-9.]+)", err)
    assert ran == ["x-vs-0.25.0", "x-vs-0.26.0", "x-vs-0.27.0"], err
    pool_keys = [k for k in made[-1].core.keys() if k.endswith(":vllm/pool.py")]
    assert pool_keys == [f"blob:{_blob(pools['0.27.0'])}:vllm/pool.py"], pool_keys

    main(args + ["--json"])
    together = _json.loads(capsys.readouterr().out)
    assert [p["pairing"] for p in together] == [f"x-vs-{v}" for v in listed]
    for entry in together:
        main(args + ["--json", "--only", entry["pairing"]])
        (alone,) = _json.loads(capsys.readouterr().out)
        assert {**entry, "seconds": 0} == {**alone, "seconds": 0}
    assert [p["errors"] for p in together] == [1, 0, 1] and rc == 1


def _blob(text: str) -> str:
    import hashlib

    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def test_the_run_order_puts_a_core_packaging_cannot_read_last_instead_of_failing():
    from types import SimpleNamespace

    from overlay.commands.gate_eval import run_order

    listed = [SimpleNamespace(core=c) for c in ("0.26.0", "0.25.0_x", "0.9.2", "0.25.0")]
    assert run_order(listed) == [2, 3, 0, 1]
