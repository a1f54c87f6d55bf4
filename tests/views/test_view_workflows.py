"""The workflows run the views: pr.yml puts `overlay range-diff` in the job summary of a PR
that touches the series; drift.yml publishes `overlay site` as an artifact."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _steps(name: str) -> list[tuple[str, dict]]:
    doc = yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())
    return [(job_id, step) for job_id, job in doc["jobs"].items() for step in job.get("steps", [])]


def test_pr_summary_has_the_range_diff_when_the_series_changes():
    runs = [(job, s) for job, s in _steps("pr.yml") if "overlay range-diff" in str(s.get("run", ""))]
    assert len(runs) == 1
    job, step = runs[0]
    script = step["run"]
    assert 'git diff --quiet "$BASE_SHA" HEAD -- patches series.yaml pins' in script
    assert '.venv/bin/overlay range-diff "$BASE_SHA" HEAD' in script and "GITHUB_STEP_SUMMARY" in script
    assert step["env"]["BASE_SHA"] == "${{ github.event.pull_request.base.sha }}"
    checkout = next(s for j, s in _steps("pr.yml") if j == job and "checkout" in str(s.get("uses")))
    assert checkout["with"]["fetch-depth"] == 0  # the base revision is there to compose


def test_pr_range_diff_step_skips_an_unchanged_series(tmp_path):
    """The step's script as the runner runs it, on a repository whose PR changes no series file:
    it says so in the summary and never runs the tool."""
    script = next(s["run"] for _, s in _steps("pr.yml") if "overlay range-diff" in str(s.get("run", "")))
    env = {"PATH": "/usr/bin:/bin", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a",
           "GIT_COMMITTER_EMAIL": "a@b", "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    git = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, env=env, check=True,  # noqa: E731
                                    capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    (tmp_path / "series.yaml").write_text("series:\n")
    git("add", "-A")
    git("commit", "-qm", "base")
    env["BASE_SHA"] = git("rev-parse", "HEAD")
    (tmp_path / "README.md").write_text("docs\n")
    git("add", "-A")
    git("commit", "-qm", "docs only")
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "is unchanged" in (tmp_path / "summary.md").read_text()


def test_drift_workflow_publishes_the_site():
    steps = [s for _, s in _steps("drift.yml")]
    write = next(i for i, s in enumerate(steps) if "overlay site site/" in str(s.get("run", "")))
    upload = steps[write + 1]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["with"]["path"] == "site/"
    assert steps[write].get("if") == upload.get("if") == "always()"
