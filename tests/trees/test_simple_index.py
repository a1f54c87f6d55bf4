"""PyPI archives through the simple repository API, never through pip (issue 20 item 2).

The local index is a folder served over loopback. Its answers are cut from the specs, not
from memory of a server: PEP 691 JSON (`meta.api-version` "1.x", `files[]` with `filename`,
`url`, `hashes.sha256`, content type application/vnd.pypi.simple.v1+json, chosen by the
request's Accept header) and PEP 503 HTML (one anchor per file, the anchor text being the
file name and the URL carrying a `#sha256=` fragment).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from test_compose import _pin_core_to_an_archive

from overlay.trees import index_config, simple_index
from overlay.errors import OverlayError
from overlay.trees.index_config import IndexConfig, read_index_config

ROOT = Path(__file__).resolve().parents[2]
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


class Index:
    """A loopback simple index serving the files of one folder; `mode` picks its behaviour."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.mode, self.requests = folder, "json", []
        self.release = threading.Event()
        index = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):  # noqa: N802 - http.server's name
                index.requests.append((self.path, self.headers.get("Accept", "")))
                index.answer(self)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def files(self):
        return sorted(p for p in self.folder.iterdir() if p.is_file())

    def answer(self, h) -> None:
        mode = self.mode
        if h.path.startswith("/files/"):
            path = self.folder / h.path[len("/files/"):]
            if not path.is_file():
                return h.send_error(404)
            data = path.read_bytes()
            if mode == "swap-bytes":
                data = data[::-1]
            return self._send(h, "application/octet-stream", data)
        if h.path.startswith("/blob/"):  # files named by their hash, as some registries do
            match = [p for p in self.files() if hashlib.sha256(p.read_bytes()).hexdigest() == h.path[6:]]
            return self._send(h, "application/octet-stream", match[0].read_bytes()) if match \
                else h.send_error(404)
        if not h.path.startswith("/simple/"):
            return h.send_error(404)
        if mode == "redirect":
            h.send_response(302)
            h.send_header("Location", f"http://localhost:{self.server.server_address[1]}{h.path}")
            h.send_header("Content-Length", "0")
            return h.end_headers()
        if mode == "silent":  # accepts the connection, then never answers
            self.release.wait(30)
            return None
        if mode == "huge":
            h.send_response(200)
            h.send_header("Content-Type", "text/html")
            h.end_headers()
            try:
                for _ in range(64):
                    h.wfile.write(b"<!-- " + b"x" * (1 << 16) + b" -->\n")
            except OSError:  # the client stopped reading, as it should
                pass
            return None
        digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
        if mode == "wrong-hash":
            digest = lambda p: "0" * 64  # noqa: E731
        if mode == "odd-links":
            body = "".join(f'<a href="{href}">{text}</a>\n' for href, text in [
                ("javascript:alert(1)//core-1.0.tar.gz", "core-1.0.tar.gz"),
                ("data:application/gzip;base64,AAAA", "core-1.0.tar.gz"),
                ("file:///etc/core-1.0.tar.gz", "core-1.0.tar.gz"),
                ("/files/core-1.0.tar.gz", "other-name.tar.gz"),
                ("/files/..%2Fcore-1.0.tar.gz", "../core-1.0.tar.gz"),
                ("", "core-1.0.tar.gz"),
                (f"/files/core-1.0.tar.gz#sha256={'z' * 64}", "core-1.0.tar.gz"),
            ]) + "<a>no href</a><a href=x"
            return self._send(h, "text/html", body.encode())
        wants_json = JSON_TYPE in h.headers.get("Accept", "") and mode in ("json", "json-blob-urls",
                                                                            "json-odd-names")
        if wants_json:
            url = (lambda p: f"/blob/{digest(p)}") if mode == "json-blob-urls" else \
                (lambda p: f"../../files/{p.name}")  # noqa: E731
            name = (lambda p: f"../{p.name}") if mode == "json-odd-names" else (lambda p: p.name)  # noqa: E731
            doc = {"meta": {"api-version": "1.1"}, "name": "core",
                   "files": [{"filename": name(p), "url": url(p),
                              "hashes": {"sha256": digest(p)}} for p in self.files()]}
            return self._send(h, JSON_TYPE, json.dumps(doc).encode())
        body = "<!DOCTYPE html><html><body>\n" + "".join(
            f'<a href="/files/{p.name}#sha256={digest(p)}">{p.name}</a><br/>\n'
            for p in self.files()) + "</body></html>\n"
        return self._send(h, "text/html", body.encode())

    @staticmethod
    def _send(h, ctype: str, data: bytes) -> None:
        h.send_response(200)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


@pytest.fixture
def served(world, tmp_path, monkeypatch):
    """p1's core pinned to core==1.0, its archive only on a loopback index (not in the mirror)."""
    _, archive = _pin_core_to_an_archive(world, tmp_path)
    folder = tmp_path / "index-files"
    folder.mkdir()
    archive.rename(folder / archive.name)
    index = Index(folder)
    for var in list(os.environ):
        if var.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(var)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", index.url + "/simple")
    yield index
    index.release.set()
    index.server.shutdown()
    index.server.server_close()


def _downloaded(world) -> list[str]:
    folder = world.project / ".overlay" / "cache" / "archives"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("mode", ["json", "html", "json-blob-urls"])
def test_sdist_from_a_local_index_in_json_and_html(world, run, served, mode):
    served.mode = mode
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    assert (world.project / "build" / "p1" / "core" / "vllm" / "graph.py").read_text() == "X = 1\n"
    page = [r for r in served.requests if r[0].startswith("/simple/")]
    assert page[0][0] == "/simple/core/" and page[0][1].startswith(JSON_TYPE)  # JSON asked first
    assert _downloaded(world) == ["core-1.0.tar.gz"]


@pytest.mark.parametrize("mode,expected", [
    ("wrong-hash", "with sha256 0000000000000000000000000000000000000000000000000000000000000000, "
                   "the pin says"),
    ("swap-bytes", "has sha256"),
    ("huge", "sent more than the 1048576 bytes accepted"),
    ("redirect", "redirects to another host or scheme"),
    ("silent", "timed out"),
    ("odd-links", "no source archive for core==1.0 on the configured index"),
    ("json-odd-names", "no source archive for core==1.0 on the configured index"),
])
def test_hostile_index_answers_are_one_line_and_leave_nothing(world, run, served, monkeypatch,
                                                              mode, expected):
    monkeypatch.setenv("OVERLAY_INDEX_PAGE_MAX_BYTES", str(1 << 20))
    monkeypatch.setenv("OVERLAY_INDEX_TIMEOUT", "1")
    served.mode = mode
    code, out, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "target 'core' is unreachable: cannot download core==1.0:" in err and expected in err
    assert "Traceback" not in err and out.count("\n") <= 1
    assert _downloaded(world) == []  # nothing kept, not even a partial download
    assert not (world.project / "build" / "p1" / "core").exists()
    if mode == "odd-links":  # none of the odd links was followed
        assert [r[0] for r in served.requests] == ["/simple/core/"]


def test_file_index_and_find_links_folder(world, run, served, monkeypatch, tmp_path):
    """A file:// index (a folder per project with index.html) and a plain find-links folder."""
    archive = served.files()[0]
    simple = tmp_path / "file-index" / "core"
    simple.mkdir(parents=True)
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    (simple / "index.html").write_text(f'<a href="{archive.as_uri()}#sha256={digest}">{archive.name}</a>\n')
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "file-index").as_uri())
    assert run("apply", "--mirror", world.mirror, root=world.project)[0] == 0
    assert served.requests == []
    (world.project / ".overlay").rename(tmp_path / "old-cache")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(archive.parent))
    code, _, err = run("apply", "--mirror", world.mirror, "--force", root=world.project)
    assert code == 0, err and _downloaded(world) == ["core-1.0.tar.gz"]


def test_a_venv_without_pip_downloads_from_the_local_index(world, served, tmp_path):
    """What failed in a `uv venv`: no pip module at all. The tool runs from PYTHONPATH with
    only its own dependencies beside it."""
    venv = tmp_path / "nopip"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    deps = tmp_path / "deps"
    deps.mkdir()
    import unidiff
    import yaml
    for mod in (yaml, unidiff):
        (deps / Path(mod.__file__).parent.name).symlink_to(Path(mod.__file__).parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tools"), str(deps)])
    py = venv / "bin" / "python"
    assert subprocess.run([str(py), "-c", "import pip"], env=env, capture_output=True).returncode != 0
    proc = subprocess.run([str(py), "-m", "overlay", "--root", str(world.project), "apply",
                           "--mirror", str(world.mirror)], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert _downloaded(world) == ["core-1.0.tar.gz"]
    assert any(path == "/files/core-1.0.tar.gz" for path, _ in served.requests)


# ------------------------------------------------------------------------------ configuration

def test_index_configuration_is_read_like_pip_and_uv(tmp_path):
    home, prefix = tmp_path / "home", tmp_path / "venv"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text(
        "[global]\nindex-url = https://user.example/simple\nextra-index-url =\n"
        "    https://extra.example/simple\n    https://extra2.example/simple\n")
    prefix.mkdir()
    (prefix / "pip.conf").write_text("[download]\nfind-links = /wheels\n")
    base = {"XDG_CONFIG_DIRS": str(tmp_path / "no-etc")}
    cfg = read_index_config(base, home, prefix)
    assert cfg.index_urls == ("https://user.example/simple", "https://extra.example/simple",
                              "https://extra2.example/simple")
    assert cfg.find_links == ("/wheels",)
    # environment wins over files; uv's variables count when pip's are unset
    assert read_index_config({**base, "UV_INDEX_URL": "https://uv.example/simple"}, home,
                             prefix).index_urls[0] == "https://uv.example/simple"
    env = {**base, "PIP_INDEX_URL": "https://env.example/simple", "UV_INDEX_URL": "https://uv.example/x"}
    assert read_index_config(env, home, prefix).index_urls[0] == "https://env.example/simple"
    # os.devnull loads no file at all: then, without an installed pip to name its default,
    # no index is configured, and none is made up
    none = read_index_config({**base, "PIP_CONFIG_FILE": os.devnull}, home, prefix, lambda: None)
    assert none.index_urls == () and none.find_links == ()
    with pytest.raises(simple_index.IndexRefused) as refused:
        simple_index.fetch_sdist(none, "vllm", "0.25.0", "0" * 64, tmp_path / "out.tar.gz", timeout=5)
    assert "no package index is configured" in refused.value.one_line()
    assert "PIP_INDEX_URL" in refused.value.one_line() and not (tmp_path / "out.tar.gz").exists()
    assert read_index_config({**base, "PIP_NO_INDEX": "1"}, home, prefix).index_urls == ()


def test_without_an_index_url_pip_s_own_default_comes_first_as_pip_would_search_it(tmp_path):
    """pip.conf with only extra-index-url (this machine's setup): pip itself searches its
    built-in default index as well, so `make apply` with no mirror must too. The default is
    read from the installed pip's source as data; the tool names no host of its own."""
    pip_dir = tmp_path / "pip"
    (pip_dir / "_internal" / "models").mkdir(parents=True)
    (pip_dir / "_internal" / "models" / "index.py").write_text(
        'class PackageIndex:\n    pass\n\n\nPyPI = PackageIndex("https://pip-default.example/", file_storage_domain="x")\n')
    assert index_config.pip_default_index(pip_dir) == "https://pip-default.example/simple"
    home, prefix = tmp_path / "home", tmp_path / "venv"
    (home / ".config" / "pip").mkdir(parents=True)
    (home / ".config" / "pip" / "pip.conf").write_text("[global]\nextra-index-url = https://extra.example/simple\n")
    prefix.mkdir()
    base = {"XDG_CONFIG_DIRS": str(tmp_path / "no-etc")}
    cfg = read_index_config(base, home, prefix, lambda: index_config.pip_default_index(pip_dir))
    assert cfg.index_urls == ("https://pip-default.example/simple", "https://extra.example/simple")
    assert cfg.origin["index-url"] == "pip's built-in default"
    # an index-url, or no-index, leaves pip's default out, as in pip
    env = {**base, "PIP_INDEX_URL": "https://mine.example/simple"}
    assert "https://pip-default.example/simple" not in read_index_config(
        env, home, prefix, lambda: index_config.pip_default_index(pip_dir)).index_urls
    assert read_index_config({**base, "PIP_NO_INDEX": "1"}, home, prefix,
                             lambda: index_config.pip_default_index(pip_dir)).index_urls == ()
    # a pip whose source does not say (or no pip) gives nothing, never a guess
    (pip_dir / "_internal" / "models" / "index.py").write_text("PyPI = make()\n")
    assert index_config.pip_default_index(pip_dir) is None
    assert index_config.pip_default_index(tmp_path / "nowhere") is None


def test_pip_is_never_imported():
    import ast
    for module in ("sources", "simple_index", "index_config"):
        tree = ast.parse((ROOT / "tools" / "overlay" / "trees" / f"{module}.py").read_text())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        assert not [n for n in names if n.split(".")[0] == "pip"], module
        strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
        assert not [s for s in strings if "pip._internal" in s or "import pip" in s], module


def test_index_credentials_stay_on_the_index_host():
    t = simple_index.Transport(IndexConfig(("https://u:s3cret@idx.example/simple",)), deadline=1e18)
    assert list(t.auth) == [("idx.example", None)]
    with pytest.raises(OverlayError) as err:
        simple_index.parse_project_page("https://u:s3cret@idx.example/simple/core/", "text/plain", b"", False)
    assert "s3cret" not in err.value.one_line()


@pytest.mark.parametrize("mode", ["json", "html"])
def test_a_wheel_from_a_local_index_where_the_release_publishes_no_sdist(world, run, served, mode):
    """vllm-rbln and vllm-omni publish wheels only: the pin names the wheel's sha256 and the
    wheel (`{name}-{version}-{py}-{abi}-{platform}.whl`) is what is downloaded and imported."""
    import tarfile
    import zipfile

    served.mode = mode
    sdist = served.files()[0]
    wheel = served.folder / "core-1.0-py3-none-any.whl"
    with tarfile.open(sdist) as tf, zipfile.ZipFile(wheel, "w") as zf:
        for member in tf.getmembers():
            if member.isfile():
                zf.writestr(member.name.split("/", 1)[1], tf.extractfile(member).read())
        zf.writestr("core-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: core\nVersion: 1.0\n")
    old = hashlib.sha256(sdist.read_bytes()).hexdigest()
    sdist.unlink()
    pin = world.project / "pins" / "p1.yaml"
    pin.write_text(pin.read_text().replace(old, hashlib.sha256(wheel.read_bytes()).hexdigest()))
    code, _, err = run("apply", "--mirror", world.mirror, root=world.project)
    assert code == 0, err
    assert (world.project / "build" / "p1" / "core" / "vllm" / "graph.py").read_text() == "X = 1\n"
    assert _downloaded(world) == ["core-1.0-py3-none-any.whl"]
