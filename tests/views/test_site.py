"""`overlay site DIR`: the static dashboard, its escaping and its folder rules; and the same
site in a real headless Chromium (skips, saying why, where none is installed)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>"
BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome",
                                           "google-chrome-stable") if shutil.which(n)), None)


def tiny_png() -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 2, 2, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" + b"\xff\x00\x00" * 2 + b"\x00" + b"\x00\x00\xff" * 2))
            + chunk(b"IEND", b""))


def dress(world) -> None:
    """A forward matrix, an evidence analysis with a plot, and hostile text in each."""
    series = world.project / "series.yaml"
    series.write_text(series.read_text().replace(
        "    forwarded: example/core#1\n", f"    forwarded: example/core#1\n    subject: '{HOSTILE}'\n"))
    forward = world.project / "docs" / "forward"
    forward.mkdir(parents=True)
    (forward / "forward.json").write_text(json.dumps({"pin": "p1", "declared": {}, "releases": [
        {"release": "0.2.0", "plugin_release": "0.2.0rc1", "errors": 1, "upstream_errors": 0,
         "graded": {"confirmed": 1}, "findings": [{"grade": "confirmed", "kind": "call",
                                                   "site": "factory", "where": "vllm_ascend/worker.py:4",
                                                   "summary": HOSTILE}]}]}))
    analysis = world.project / "evidence" / "fast-path" / "analysis"
    analysis.mkdir(parents=True)
    (analysis / "plot-c8.png").write_bytes(tiny_png())
    (analysis / "analysis.json").write_text(json.dumps({
        "claim": "fast-path", "preregistered": "2026-11-30", "baseline": "baseline",
        "claims": [{"name": "faster", "hypothesis": HOSTILE, "decision": "INCONCLUSIVE", "note": "",
                    "checks": [{"metric": "throughput", "scenario": "c8", "decision": "INCONCLUSIVE"}]}],
        "plots": ["plot-c8.png", "../../../series.yaml", "missing.png"]}))


def test_site_has_the_matrix_the_patch_pages_forward_and_evidence(world, run, tmp_path):
    dress(world)
    out = tmp_path / "site"
    code, stdout, err = run("site", out, "--json", root=world.project)
    assert code == 0, err
    pages = json.loads(stdout)["pages"]
    assert pages == ["index.html", "patches/0001-plugin-lora-args.patch.html",
                     "patches/0002-core-rename-helper.patch.html", "patches/0003-plugin-switch.patch.html",
                     "forward.html", "evidence.html"]
    index = (out / "index.html").read_text()
    assert '<a href="patches/0001-plugin-lora-args.patch.html">' in index
    assert '<td class="carried"' in index and "not composed" in index
    patch = (out / "patches" / "0001-plugin-lora-args.patch.html").read_text()
    assert 'href="https://github.com/example/plugin/pull/10935"' in patch
    assert "diff --git a/vllm_ascend/worker.py" in patch and "not measured" in patch
    assert "gate findings at 0.2.0" in (out / "forward.html").read_text()
    evidence = (out / "evidence.html").read_text()
    assert '<img src="evidence/fast-path/plot-c8.png"' in evidence and "INCONCLUSIVE" in evidence
    assert (out / "evidence" / "fast-path" / "plot-c8.png").read_bytes() == tiny_png()
    assert not (out / "series.yaml").exists() and "missing.png" not in evidence
    for page in pages:  # data is text: no tag it carried survives unescaped
        html = (out / page).read_text()
        assert "<script" not in html and "<img src=x" not in html, page
    assert "&lt;script&gt;" in index
    code, _, err = run("site", out, root=world.project)  # its own folder: written again
    assert code == 0, err


def test_site_refuses_a_folder_that_is_not_its_own(world, run, tmp_path):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "keep.txt").write_text("mine\n")
    code, out, err = run("site", mine, root=world.project)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "not empty" in err
    assert sorted(p.name for p in mine.iterdir()) == ["keep.txt"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, out, err = run("site", afile, root=world.project)
    assert code == 2 and "not a directory" in err and afile.read_text() == "x"
    dress(world)
    (world.project / "docs" / "forward" / "forward.json").write_text("{broken")
    code, out, err = run("site", tmp_path / "new", root=world.project)
    assert code == 2 and "forward.json" in err and len(err.strip().splitlines()) == 1


class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.refs: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.tags.add(tag)
        self.refs += [v for k, v in attrs if k in ("href", "src") and v]


def _chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={cwd / 'profile'}", *args], cwd=cwd, capture_output=True,
                          timeout=120)


@pytest.mark.skipif(BROWSER is None, reason="no headless Chromium on PATH (Debian: apt-get install chromium)")
def test_site_in_a_real_headless_chromium(world, run, tmp_path):
    dress(world)
    out = tmp_path / "site"
    code, stdout, err = run("site", out, "--json", root=world.project)
    assert code == 0, err
    for page in json.loads(stdout)["pages"]:
        path = out / page
        proc = _chromium("--dump-dom", path.as_uri(), cwd=tmp_path)
        dom = proc.stdout.decode()
        assert proc.returncode == 0 and "<table" in dom, (page, proc.stderr[-500:])
        refs = _Refs()
        refs.feed(dom)
        assert "script" not in refs.tags, page
        internal = [r for r in refs.refs if not urlparse(r).scheme]
        assert internal, page
        for ref in internal:  # every internal link resolves to a file of the site
            target = (path.parent / unquote(urlparse(ref).path)).resolve()
            assert target.is_file() and out.resolve() in target.parents, (page, ref)
    shot = tmp_path / "index.png"
    proc = _chromium(f"--screenshot={shot}", "--window-size=1200,900", (out / "index.html").as_uri(),
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-500:]
    data = shot.read_bytes()
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
