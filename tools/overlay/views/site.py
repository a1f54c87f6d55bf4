"""`overlay site DIR`: the series as a static HTML site (standard library only, no script):

- index.html: the pin-set x patch matrix (each cell as `overlay status` says it);
- patches/<patch>.html: one page per patch (as `overlay show`);
- forward.html: the forward matrix (docs/forward/*.json) with the gate findings per release;
- evidence.html: the evidence decisions (evidence/<claim>/analysis/analysis.json) with
  their plots, copied beside the page.

Everything taken from files is escaped. DIR is the command's own: a folder that exists, is
not empty and does not carry the site's marker is refused, and nothing is ever deleted.
"""

from __future__ import annotations

import json
import re
from html import escape
from pathlib import Path

from overlay import paths
from overlay.errors import OverlayError
from overlay.series.model import PinSet, Project, load_all_pins
from overlay.views import show, status

MARKER = ".overlay-site"
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}$")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_JSON = 32 << 20
MAX_PNG = 16 << 20

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222}
table{border-collapse:collapse;margin:.5rem 0}
th,td{border:1px solid #bbb;padding:.25rem .5rem;text-align:left;vertical-align:top;font-size:.9rem}
th{background:#eee}
td.carried{background:#e6f4e6}td.merged{background:#e8eefc}td.ported{background:#fff4d6}
td.superseded{background:#fde2e2}td.none{color:#999}
pre{background:#f7f7f7;padding:.5rem;overflow-x:auto;font-size:.8rem}
.add{color:#0a6b0a}.del{color:#a31515}.hunk{color:#555}
nav a{margin-right:1rem}
img{max-width:100%;border:1px solid #ccc;margin:.5rem 0}
"""


def e(value: object) -> str:
    return escape("" if value is None else str(value), quote=True)


def page(title: str, body: str, up: str = "") -> str:
    nav = (f'<nav><a href="{up}index.html">pin sets x patches</a><a href="{up}forward.html">forward '
           f'matrix</a><a href="{up}evidence.html">evidence</a></nav>')
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>'
            f'<style>{STYLE}</style></head><body>{nav}<h1>{e(title)}</h1>\n{body}\n</body></html>\n')


def table(head: list[str], rows: list[list[str]]) -> str:
    """`rows` are already HTML (each cell escaped by its caller)."""
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    trs = "".join("<tr>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in row) + "</tr>"
                  for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{trs}</tbody></table>"


def link(url: str | None, text: str) -> str:
    return f'<a href="{e(url)}">{e(text)}</a>' if url else e(text)


# ----------------------------------------------------------------------------- index


def index_page(project: Project, statuses: list[status.PinStatus]) -> str:
    head = ["patch", "target", "origin"] + [s.pin for s in statuses]
    cells = {(s.pin, r.patch): r for s in statuses for r in s.patches}
    rows = []
    for entry in project.series.entries:
        row = [f'<a href="patches/{e(entry.patch)}.html">{e(entry.patch)}</a><br>{e(entry.subject or "")}',
               e(entry.target), e(entry.origin)]
        for s in statuses:
            r = cells.get((s.pin, entry.patch))
            if r is None:
                row.append('<td class="none">not listed</td>')
            else:
                lock = f"<br><small>{e(r.lock)}</small>" if r.carried else ""
                row.append(f'<td class="{e(r.state)}" title="{e(r.detail)}">{e(r.state)}{lock}</td>')
        rows.append(row)
    locks = table(["pin set", "description", "target", "lock", "locked tree", "composed tree"],
                  [[e(s.pin), e(s.description), e(t.target), e(t.state), e(t.locked_tree or ""),
                    e(t.composed_tree or "")] for s in statuses for t in s.targets])
    return page("overlay series: pin sets x patches",
                "<p>Each cell: the patch's upstream state at that pin set (carried, merged upstream, "
                "ported, superseded; hover for the rule) and the lock state of its target.</p>"
                + table(head, rows) + "<h2>Locks</h2>" + locks)


# ----------------------------------------------------------------------------- patch pages


def _diff_html(diff: str) -> str:
    out = []
    for line in diff.splitlines():
        cls = ("add" if line.startswith("+") and not line.startswith("+++") else
               "del" if line.startswith("-") and not line.startswith("---") else
               "hunk" if line.startswith("@@") else "")
        out.append(f'<span class="{cls}">{e(line)}</span>' if cls else e(line))
    return "<pre>" + "\n".join(out) + "</pre>"


def patch_page(view: show.PatchView) -> str:
    header = table(["field", "value"], [[e(k), f"<pre>{e(v)}</pre>" if "\n" in v else e(v)]
                                        for k, v in view.header])
    links = (table(["kind", "reference"], [[e(lk.kind), link(lk.url, lk.text)] for lk in view.links])
             if view.links else "<p>none recorded</p>")
    pins = (table(["pin set", "state", "detail", "lock"],
                  [[e(pin), f'<td class="{e(r.state)}">{e(r.state)}</td>', e(r.detail), e(r.lock)]
                   for pin, r in view.rows()]) if view.rows() else "<p>no pin set lists it</p>")
    if view.drift_measured:
        drift = table(["pin set", "upstream ref", "head", "class", "rule", "detail"],
                      [[e(d.pin), e(d.ref), e(d.head[:12]), e(d.cls), e(d.rule), e(d.detail)]
                       for d in view.drift])
    else:
        drift = "<p>not measured</p>"
    tests = ("<ul>" + "".join(f"<li>{e(t.path)} ({'new' if t.added else 'changed'})</li>" for t in view.tests)
             + "</ul>") if view.tests else "<p>no test file in the diff</p>"
    mutation = e(view.mutation.line()) if view.mutation else "not recorded"
    body = (f"<h2>Header</h2>{header}<h2>Provenance</h2>{links}<h2>Pin sets</h2>{pins}"
            f"<h2>Drift at the newest upstream measured</h2>{drift}<h2>Tests it adds</h2>{tests}"
            f"<h2>Mutation check</h2><p>{mutation}</p><h2>Diff</h2>{_diff_html(view.diff)}")
    return page(f"{view.entry.patch} ({view.entry.target})", body, up="../")


# ----------------------------------------------------------------------------- forward, evidence


def _json_file(path: Path, within: Path) -> dict | list | None:
    try:
        raw = paths.read_capped(path, MAX_JSON, within=within)
        if len(raw) > MAX_JSON:
            raise ValueError("too large")
        return json.loads(raw.decode("utf-8"))
    except (paths.NotARegularFile, paths.OutsideTree, ValueError, UnicodeDecodeError, OSError) as exc:
        raise OverlayError(f"not a readable JSON document ({type(exc).__name__})", path=str(path),
                           hint="fix or remove the file") from None


def _dict(value) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value) -> list:
    return value if isinstance(value, list) else []


def forward_page(root: Path) -> str:
    folder = root / "docs" / "forward"
    docs = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not docs:
        return page("forward matrix", "<p>no forward matrix (docs/forward/*.json) in this repository</p>")
    body = []
    for path in docs:
        doc = _dict(_json_file(path, root))
        body.append(f"<h2>{e(path.name)}: from pin set {e(doc.get('pin'))}</h2>")
        releases = [_dict(r) for r in _list(doc.get("releases"))]
        body.append(table(["release", "plugin release", "errors", "upstream errors", "graded"],
                          [[e(r.get("release")), e(r.get("plugin_release")), e(r.get("errors")),
                            e(r.get("upstream_errors")),
                            e(", ".join(f"{k}: {v}" for k, v in _dict(r.get("graded")).items()))]
                           for r in releases]))
        for r in releases:
            body.append(f"<h3>gate findings at {e(r.get('release'))}</h3>")
            findings = [_dict(f) for f in _list(r.get("findings"))]
            body.append(table(["grade", "kind", "site", "where", "summary", "backcast", "execution"],
                              [[e(f.get("grade")), e(f.get("kind")), e(f.get("site")), e(f.get("where")),
                                e(f.get("summary")), e(f.get("backcast")), e(f.get("execution"))]
                               for f in findings]) if findings else "<p>no findings</p>")
    return page("forward matrix", "".join(body))


def _analyses(root: Path) -> list[tuple[str, Path]]:
    ev = root / "evidence"
    if not ev.is_dir():
        return []
    out = []
    for claim in sorted(ev.iterdir()):
        if not SAFE_NAME.match(claim.name) or not claim.is_dir() or claim.is_symlink():
            continue
        for candidate in (claim / "analysis" / "analysis.json", claim / "analysis.json"):
            if candidate.is_file():
                out.append((claim.name, candidate))
                break
    return out


def evidence_page(root: Path, out: Path) -> str:
    found = _analyses(root)
    if not found:
        return page("evidence", "<p>no evidence analysis (evidence/*/analysis/analysis.json) yet</p>")
    body = []
    for claim, path in found:
        doc = _dict(_json_file(path, root))
        body.append(f"<h2>{e(claim)}</h2><p>preregistered {e(doc.get('preregistered'))}, baseline "
                    f"{e(doc.get('baseline'))}</p>")
        rows = []
        for c in (_dict(c) for c in _list(doc.get("claims"))):
            checks = "; ".join(f"{k.get('metric')} {k.get('scenario')}: {k.get('decision')}"
                               for k in map(_dict, _list(c.get("checks"))))
            rows.append([e(c.get("name")), e(c.get("hypothesis")), f"<strong>{e(c.get('decision'))}</strong>",
                         e(checks), e(c.get("note"))])
        body.append(table(["claim", "hypothesis", "decision", "checks", "note"], rows))
        for name in (p for p in _list(doc.get("plots")) if isinstance(p, str)):
            src = path.parent / name
            if not SAFE_NAME.match(name) or not name.endswith(".png") or not src.is_file():
                continue
            try:
                data = paths.read_capped(src, MAX_PNG, within=root)
            except (paths.NotARegularFile, paths.OutsideTree, OSError):
                continue
            if len(data) > MAX_PNG or not data.startswith(PNG_MAGIC):
                continue
            dest = out / "evidence" / claim / name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(data)
            body.append(f'<figure><img src="evidence/{e(claim)}/{e(name)}" alt="{e(name)}">'
                        f"<figcaption>{e(name)}</figcaption></figure>")
    return page("evidence", "".join(body))


# ----------------------------------------------------------------------------- the site


def prepare(out: Path) -> None:
    """`out` as the site's own folder: new, empty, or marked by an earlier run."""
    if out.exists() and not out.is_dir():
        raise OverlayError("not a directory", path=str(out), hint="give a folder for the site")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        raise OverlayError("the folder is not empty and is not a site overlay wrote", path=str(out),
                           hint="give a new or empty folder (nothing in it is overwritten or deleted)")
    (out / "patches").mkdir(parents=True, exist_ok=True)
    (out / MARKER).write_text("written by overlay site\n")


def write_site(project: Project, out: Path, *, pins: list[PinSet] | None = None,
               into: Path | None = None, reports: Path | None = None) -> list[str]:
    """Write the site into `out` (the matrix of `pins`, default every pin set); the pages
    written, relative to it."""
    statuses = status.status(project, load_all_pins(project.root) if pins is None else pins, into)
    prepare(out)
    pages = {"index.html": index_page(project, statuses)}
    for entry in project.series.entries:
        view = show.patch_view(project, entry.patch, into=into, reports=reports)
        pages[f"patches/{entry.patch}.html"] = patch_page(view)
    pages["forward.html"] = forward_page(project.root)
    pages["evidence.html"] = evidence_page(project.root, out)
    for rel, html in pages.items():
        (out / rel).write_text(html, encoding="utf-8")
    return list(pages)


__all__ = ["write_site"]
