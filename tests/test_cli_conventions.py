"""CLI conventions (issue 20 item 4): exit 2 outside a project, hints that name commands that
work, report folders created, exit statuses in every --help, schema_version in every --json."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from overlay import cli
from fixtures import break_patch_two

ROOT = Path(__file__).resolve().parent.parent


def test_check_outside_a_project_is_bad_input(run, tmp_path):
    code, out, err = run("check", root=tmp_path)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "series.yaml: file not found" in err and "--root DIR" in err
    code, out, _ = run("check", "--json", root=tmp_path)
    doc = json.loads(out)
    assert code == 2 and doc["ok"] is False and doc["path"] == "series.yaml"


def test_check_of_a_broken_project_still_exits_1(run, world):
    (world.project / "patches" / "0003-plugin-switch.patch").unlink()
    code, out, _ = run("check", root=world.project)
    assert code == 1 and out.startswith("FAIL ")


def _parsers():
    return list(cli._walk_parsers(cli.build_parser()))


@pytest.mark.parametrize("name", [n for n, _ in _parsers()])
def test_every_help_states_its_exit_statuses(name, capsys):
    argv = name.split()[1:] + ["--help"]
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert re.search(r"exit status: [02] \S", text), text[-300:]
    assert "130 interrupted" in text
    if name != "overlay" and not name.endswith(("evidence", "bench")):
        assert "2 bad input" in text


def _hint(err: str) -> str:
    return err[err.index("(") + 1:]


def test_failed_apply_names_a_drift_command_that_works(world, run):
    break_patch_two(world)
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 1
    command = re.search(r"`(overlay drift [^`]+)`", err).group(1)
    assert f"--onto plugin={world.plugin_commits[1]}" in command and "--pin p1" in command
    code, out, err2 = run(*command.split()[1:], "--mirror", world.mirror, root=world.project)
    assert code in (0, 1), err2  # it runs and classifies (1: a patch conflicts), not a usage error
    assert "0003-plugin-switch.patch" in out
    assert "changed pin" in err and "series changed" not in err  # nothing composed before


def test_failed_apply_after_a_good_one_blames_the_series_not_the_pin(world, run):
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    break_patch_two(world)
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 1
    assert "has not moved since the last good apply" in err and "so the series changed" in err
    assert "overlay drift" not in err and "overlay refresh --pin p1" in err


def test_failed_apply_after_the_pin_moved_says_so(world, tmp_path):
    from overlay.trees import compose, composed
    from overlay.series.model import GitSource, PinnedTarget

    target = PinnedTarget("plugin", GitSource("file:///x/example/plugin", "b" * 40), "pins/p1.yaml", 3)
    work = tmp_path / "tree"
    (work / ".git").mkdir(parents=True)
    composed.write_state(work, composed.ComposedState(
        pin="p1", target="plugin", base="a" * 40, head="c" * 40, tree="d" * 40, branch="overlay/p1",
        patches=("0003-plugin-switch.patch",)))
    step = compose.failed_apply_step("p1", target, "b" * 40, "0003-plugin-switch.patch", work)
    assert step.startswith(f"the pinned plugin moved from {'a' * 12} (last good apply) to {'b' * 12}")
    assert f"`overlay drift --pin p1 --onto plugin={'b' * 40}`" in step


def test_report_options_create_their_folders(world, run, tmp_path):
    """--junit, --markdown and --out create missing parent folders, as test tools do."""
    junit, markdown = tmp_path / "reports" / "a" / "drift.xml", tmp_path / "md" / "drift.md"
    code, _, err = run("drift", "--mirror", world.mirror, "--onto", f"plugin={world.plugin_commits[-1]}",
                       "--junit", junit, "--markdown", markdown, root=world.project)
    assert code in (0, 1), err
    assert junit.read_text().startswith("<?xml") and markdown.stat().st_size > 0
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    gate_junit = tmp_path / "gate" / "deep" / "gate.xml"
    code, _, err = run("gate", "--junit", gate_junit, root=world.project)
    assert code == 0, err
    assert gate_junit.read_text().startswith("<?xml")
    out = tmp_path / "analysis" / "deep"
    code, _, err = run("evidence", "analyze", ROOT / "evidence" / "mrv2-metadata-barrier", "--no-plots",
                       "--out", out, root=ROOT)
    assert code == 0, err
    assert (out / "analysis.json").is_file()


# ---- --json: one envelope, documented fields ------------------------------------------------

def _documented() -> dict[str, list[str]]:
    """docs/json.md: section title -> the fields its `fields:` paragraph names."""
    out, title, inside = {}, None, False
    for line in (ROOT / "docs" / "json.md").read_text().splitlines():
        if line.startswith("## "):
            title, inside = line[3:].strip(), False
        elif line.startswith("fields:"):
            inside, out[title] = True, []
        elif not line.strip():
            inside = False
        if inside:
            out[title] += re.findall(r"`([a-z_]+)`", line)
    return out


def test_every_json_document_has_a_schema_version_and_documented_fields(world, run, tmp_path):
    docs = _documented()
    newest = f"plugin={world.plugin_commits[-1]}"
    cases = {
        "`overlay check --json`": ("check", "--json"),
        "`overlay apply --json`": ("apply", "--mirror", world.mirror, "--json"),
        "`overlay lock --json`": ("lock", "--json"),
        "`overlay refresh --json`": ("refresh", "--json"),
        "`overlay drift --json`": ("drift", "--mirror", world.mirror, "--onto", newest, "--json"),
        "`overlay gate --json`": ("gate", "--json"),
        "Errors (every command)": ("lock", "--pin", "no-such-pin", "--json"),
    }
    for title, argv in cases.items():
        code, out, err = run(*argv, root=world.project)
        doc = json.loads(out)  # exactly one document, nothing else on stdout
        assert list(doc)[0] == "schema_version" and doc["schema_version"] == cli.SCHEMA_VERSION, title
        assert set(doc) == set(docs[title]), (title, sorted(doc), docs[title])


def test_the_envelope_keeps_every_document_and_passes_other_text_through():
    two = '{"a": 1}\n{\n  "b": [1, 2]\n}\n'
    out = cli.add_schema_version(two)
    first, second = out.split("\n", 1)
    assert json.loads(first) == {"schema_version": 1, "a": 1}
    assert json.loads(second) == {"schema_version": 1, "b": [1, 2]} and "\n  " in second
    assert cli.add_schema_version("not json {") == "not json {"
    assert cli.add_schema_version('[1, 2]\n') == '[1, 2]\n'  # only objects get the field
    assert cli.add_schema_version('{"schema_version": 7}') == '{"schema_version": 7}'


def test_no_message_names_a_bare_drift_command():
    """`overlay drift` alone is a usage error (it needs --onto or --scan): no message may
    suggest it. Docstrings are documentation, not messages, and are left out."""
    import ast

    bad = []
    for path in (ROOT / "tools" / "overlay").rglob("*.py"):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr)
                      and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                text = node.value
            else:
                continue
            for command in re.findall(r"`(overlay drift[^`]*)`", text):
                if "--onto" not in command and "--scan" not in command:
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}: {command}")
    assert bad == []
