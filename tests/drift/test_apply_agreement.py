"""drift and apply judge a patch by one rule: what `overlay apply` (git am: exact context,
at any offset) cannot apply, drift does not pass; fuzz is opt-in (`drift --fuzz N`)."""

from __future__ import annotations

import json

from overlay.cli import main


def _pin_at(project, history, label: str) -> None:
    text = (project / "pins" / "test.yaml").read_text()
    text = text.replace(history.commits["c0"], history.commits[label]).replace("default: true\n", "")
    (project / "pins" / f"at-{label}.yaml").write_text(text)


def test_a_patch_apply_rejects_is_not_passed_by_drift(capsys, history, project, tmp_path):
    """0001 applies at c4 only with its context reduced: drift said `fuzz ... OK: warnings`
    (exit 0) while apply reported FAILED."""
    _pin_at(project, history, "c4")
    rc_apply = main(["--root", str(project), "apply", "--pin", "at-c4", "--targets", "plugin",
                     "--mirror", str(history.mirror), "--into", str(tmp_path / "build")])
    out, _ = capsys.readouterr()
    assert rc_apply == 1 and "FAILED" in out and "0001" in out

    rc = main(["--root", str(project), "drift", "--mirror", str(history.mirror),
               "--onto", "plugin=c4", "--json"])
    verdicts = {v["patch"][:4]: v for v in json.loads(capsys.readouterr().out)["runs"][0]["verdicts"]}
    assert rc == 1
    assert verdicts["0001"]["class"] == "conflict"

    # asked for, fuzz is still reported as such (a warning, not a failure)
    rc = main(["--root", str(project), "drift", "--mirror", str(history.mirror),
               "--onto", "plugin=c4", "--fuzz", "2", "--json"])
    verdicts = {v["patch"][:4]: v for v in json.loads(capsys.readouterr().out)["runs"][0]["verdicts"]}
    assert rc == 0 and verdicts["0001"]["class"] == "fuzz"


def test_drift_refuses_a_fuzz_it_cannot_mean(capsys, history, project):
    for bad in ("-1", "4", "x"):
        try:
            main(["--root", str(project), "drift", "--onto", "plugin=c4", "--fuzz", bad])
        except SystemExit as exc:
            assert exc.code == 2
        else:
            raise AssertionError(bad)
    assert "--fuzz" in capsys.readouterr().err
