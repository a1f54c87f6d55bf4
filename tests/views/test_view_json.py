"""The views' --json documents carry schema_version and exactly the fields docs/json.md lists."""

from __future__ import annotations

import json

from test_cli_conventions import _documented

from overlay import cli


def test_view_documents_have_their_documented_fields(world, run, tmp_path):
    docs = _documented()
    cases = {
        "`overlay status --json`": ("status", "--json"),
        "`overlay show --json`": ("show", "0001", "--json"),
        "`overlay range-diff --json`": ("range-diff", "p1", "p1", "--json"),
        "`overlay site --json`": ("site", tmp_path / "site", "--json"),
    }
    for title, argv in cases.items():
        code, out, err = run(*argv, root=world.project)
        assert code == 0, (title, err)
        doc = json.loads(out)
        assert list(doc)[0] == "schema_version" and doc["schema_version"] == cli.SCHEMA_VERSION, title
        assert set(doc) == set(docs[title]), (title, sorted(doc), docs[title])
