"""One reporting layer: terminal detection lives only in overlay.reporting, and that
package imports only the standard library, overlay.errors and itself."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "tools" / "overlay"
REPORTING = PACKAGE / "reporting"


def test_only_the_reporting_layer_asks_whether_a_stream_is_a_terminal():
    found = [f"{path.relative_to(PACKAGE)}:{node.lineno}"
             for path in sorted(PACKAGE.rglob("*.py")) if REPORTING not in path.parents
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.Attribute) and node.attr == "isatty"]
    assert found == [], "use overlay.reporting (progress / is_terminal) instead"


def test_the_reporting_layer_imports_nothing_above_it():
    allowed = set(sys.stdlib_module_names) | {"overlay.errors", "overlay.reporting"}
    imports = []
    for path in sorted(REPORTING.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imports += [(path.name, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imports.append((path.name, node.module))
    assert imports, "nothing read"
    bad = [(f, m) for f, m in imports
           if m.split(".")[0] not in allowed and not any(m == a or m.startswith(a + ".") for a in allowed)]
    assert bad == []
