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
import shutil
import tempfile
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
    """The source tree of one release, under `<cache>/gate/cores/<name>-<version>/tree`:
    the archive is imported into the object cache as compose imports it (vetted member
    table, nothing extracted), then checked out by git; a `.complete` marker naming the
    archive's sha256 proves the checkout finished."""
    from overlay import paths
    from overlay.trees import archive as archive_mod
    from overlay.trees import runlock, sources
    from overlay.series.model import ArchiveSource

    dest = paths.cache_dir(root) / "gate" / "cores" / f"{name}-{version}"
    if (dest / ".complete").is_file() and (dest / "tree").is_dir():
        return dest / "tree"
    src = ArchiveSource(name=name, version=version, sha256="")
    archives = paths.cache_dir(root) / "archives"
    archive = (sources.find_archive(mirror / "pypi", src) if mirror else None) or sources.find_archive(archives, src)
    if archive is None:
        archive = sources.download_archive(src, archives, progress)
    digest = sources.sha256_of(archive)
    with runlock.cache(paths.cache_dir(root), f"importing {archive.name}", progress):
        commit = sources.obtain_archive_commit(root, ArchiveSource(name=name, version=version, sha256=digest),
                                               archive, progress)
    if progress:
        progress(f"checking out {archive.name}")
    dest.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".checkout-", dir=dest))
    try:
        archive_mod.checkout_tree(sources.cache_repo(root, src.mirror_name), commit, scratch / "tree",
                                  {"GIT_INDEX_FILE": str(scratch / "index")})
        if (dest / "tree").exists():
            shutil.rmtree(dest / "tree")
        (scratch / "tree").rename(dest / "tree")
        (dest / ".complete").write_text(f"{archive.name} {digest}\n")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return dest / "tree"


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
