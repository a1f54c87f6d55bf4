"""The forward view: one plugin tree gated against the next core releases, one line each.

`overlay gate --pin v0.27.1 --against vllm==0.28.0,vllm==0.29.0` tells a team which
release breaks start-up before it bumps. Each release's source archive comes from the
mirror (`<mirror>/pypi/`), the tool's archive cache, or pip's own index configuration,
and is extracted once under `<cache>/gate/cores/`. All runs share one in-process Cache:
the plugin's files are parsed once, and a core file that several releases hold
unchanged is parsed once (shared by content).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from overlay.errors import OverlayError
from overlay.reporting import table

SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\d+(?:\.\d+)*(?:(?:a|b|rc)\d+)?(?:\.post\d+)?)$")


def parse_against(text: str) -> list[tuple[str, str]]:
    """`vllm==0.28.0,vllm==0.29.0` -> [("vllm", "0.28.0"), ...]."""
    out = []
    for item in [x.strip() for x in text.split(",") if x.strip()]:
        m = SPEC.match(item)
        if not m:
            raise OverlayError(f"bad --against entry '{item}'",
                               hint="give releases as name==version, comma-separated: vllm==0.28.0,vllm==0.29.0")
        out.append((m.group(1), m.group(2)))
    if not out:
        raise OverlayError("--against names no release", hint="for example --against vllm==0.28.0")
    return out


def release_tree(root: Path, mirror: Path | None, name: str, version: str, progress=None) -> Path:
    """The source tree of one release (see overlay.trees.sources.release_tree)."""
    from overlay.trees import sources

    return sources.release_tree(root, mirror, name, version, progress)


@dataclass(frozen=True)
class Row:
    release: str
    errors: int
    warnings: int
    top: tuple[str, ...]  # the first error summaries (then warnings), one line each
    seconds: float
    base: bool = False

    def to_dict(self) -> dict:
        return {"release": self.release, "errors": self.errors, "warnings": self.warnings,
                "top": list(self.top), "seconds": round(self.seconds, 3), "base": self.base}


def row(release: str, report, base: bool = False, top: int = 3) -> Row:
    errors = [f for f in report.findings if f.severity == "error"]
    warnings = [f for f in report.findings if f.severity == "warning"]
    shown = [f"{f.kind} {f.plugin_path.rsplit('/', 1)[-1]}:{f.plugin_line}: {f.summary or f.message}"
             for f in (errors or warnings)[:top]]
    return Row(release, len(errors), len(warnings), tuple(s[:140] for s in shown),
               float(report.stats.get("seconds", 0.0)), base)


def render(plugin_label: str, rows: list[Row], width: int | None = None) -> str:
    """One row per release; its further top findings on the lines below it."""
    cells = []
    for r in rows:
        name = r.release + (" (base)" if r.base else "")
        cells.append((name, r.errors, r.warnings, f"{r.seconds:.1f}", r.top[0] if r.top else "-"))
        cells += [("", "", "", "", more) for more in r.top[1:]]
    return "\n".join([f"gate forward view: plugin {plugin_label}",
                      *table.render(cells, header=("release", "errors", "warnings", "seconds", "top findings"),
                                    align="lrrr", width=width)]) + "\n"
