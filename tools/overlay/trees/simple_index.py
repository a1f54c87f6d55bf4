"""A small client of the simple repository API: find and fetch one pinned sdist.

PEP 691 (JSON) is asked for first and PEP 503 (HTML) accepted as the fallback, by content
negotiation on one request. Everything read is bounded (page and archive sizes, socket
timeouts, an overall deadline); a redirect to another host or from https to http is refused;
the deadline holds for the whole download, connect, headers and body: http.client reads
headers a line at a time, each read with its own timeout, so a watchdog shuts the request's
sockets when the deadline passes; a `file://` page, find-links file or archive is read
through the one bounded reader (paths.iter_capped: a regular file, no blocking open, capped);
a page's links are data: only http(s) links are followed from an http(s) index, and file
links only from a local (file://) index or find-links folder. The archive is hashed while it
streams and kept only when its sha256 is the pinned one (and the index's, when it gives one).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import http.client
import json
import os
import re
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Callable

from overlay import paths
from overlay.errors import OverlayError, redact
from overlay.trees.index_config import IndexConfig
from overlay.trees.archive import wheel_release

Progress = Callable[[str], None]

ACCEPT = ("application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, "
          "text/html;q=0.01")
SDIST_EXTS = (".tar.gz", ".zip")


def _limit(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def page_limit() -> int:  # a project page (vLLM's JSON page is a few MB)
    return _limit("OVERLAY_INDEX_PAGE_MAX_BYTES", 64 << 20)


def archive_limit() -> int:  # one sdist (vLLM's are tens of MB)
    return _limit("OVERLAY_ARCHIVE_MAX_BYTES", 2 << 30)


def read_timeout() -> float:  # per socket operation
    return float(_limit("OVERLAY_INDEX_TIMEOUT", 60))


class IndexRefused(OverlayError):
    """The index answered something we do not accept (one line says what)."""


class DeadlinePassed(IndexRefused):
    """The whole download's deadline passed: nothing more is asked of any index."""


@dataclass(frozen=True)
class Candidate:
    filename: str
    url: str
    sha256: str | None  # what the index says, if it says
    where: str  # the index or find-links entry it came from (redacted on display)


def normalize(name: str) -> str:
    """PEP 503 name normalisation."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _is_sdist_of(filename: str, name: str, version: str) -> bool:
    """The file is a release archive of name==version: its sdist, or a wheel (`{name}-{version}
    (-{build})?-{py}-{abi}-{platform}.whl`; some plugins publish wheels only)."""
    wheel = wheel_release(filename)
    if wheel is not None:
        return normalize(wheel[0]) == normalize(name) and wheel[1] == version
    for ext in SDIST_EXTS:
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            dist, sep, ver = stem.rpartition("-")
            return bool(sep) and normalize(dist) == normalize(name) and ver == version
    return False


# ------------------------------------------------------------------------------ transport

class _SameHostRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(newurl)
        if (new.scheme, new.hostname, new.port) != (old.scheme, old.hostname, old.port):
            raise IndexRefused(f"{_show(req.full_url)} redirects to another host or scheme "
                               f"({_show(newurl)}); refused",
                               hint="point the index setting at the final location")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _show(url: str) -> str:
    return redact(url)


def _split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without user info, and a Basic authorization value for it (if any)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    token = base64.b64encode(f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password)}"
                             .encode()).decode()
    return urllib.parse.urlunsplit(parts._replace(netloc=hostport)), f"Basic {token}"


class _Watchdog:
    """Shuts every socket of the requests it watches when the deadline passes, so a read
    blocked on a server that sends a byte (or a header line) at a time returns at once."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self._socks: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        with self._lock:
            self._socks.append(sock)
            if self.fired:
                _shut(sock)

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._socks:
                _shut(sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


def _watched(base: type, box: list) -> type:
    """`base` (HTTPConnection or HTTPSConnection) whose sockets the current watchdog in
    `box` watches from the moment they exist (before any TLS handshake or header)."""

    class Watched(base):  # type: ignore[misc, valid-type]
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            create = self._create_connection

            def _create(*a, **k):
                sock = create(*a, **k)
                if box:
                    box[0].watch(sock)
                return sock
            self._create_connection = _create

    return Watched


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, box: list) -> None:
        super().__init__()
        self._conn = _watched(http.client.HTTPConnection, box)

    def http_open(self, req):
        return self.do_open(self._conn, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, box: list, context: ssl.SSLContext | None) -> None:
        super().__init__(context=context)
        self._conn = _watched(http.client.HTTPSConnection, box)
        self._ctx = context

    def https_open(self, req):
        return self.do_open(functools.partial(self._conn, context=self._ctx), req)


class Transport:
    """Bounded GETs with the user's CA bundle and the index's credentials (same host only),
    all within one deadline."""

    def __init__(self, config: IndexConfig, deadline: float, budget: float | None = None) -> None:
        self.deadline = deadline
        self.budget = budget if budget is not None else max(0.0, deadline - time.monotonic())
        context = ssl.create_default_context(cafile=config.cert) if config.cert else None
        self._box: list[_Watchdog] = []  # the watchdog of the request under way
        self.opener = urllib.request.build_opener(
            _SameHostRedirects(), _HTTPHandler(self._box), _HTTPSHandler(self._box, context))
        self.auth: dict[tuple[str | None, int | None], str] = {}
        for url in config.index_urls + config.find_links:
            bare, auth = _split_credentials(url)
            if auth:
                p = urllib.parse.urlsplit(bare)
                self.auth[(p.hostname, p.port)] = auth

    def late(self) -> DeadlinePassed:
        return DeadlinePassed(f"the package index did not answer within its {self.budget:g} s deadline "
                              "for the whole download",
                              hint="retry, raise OVERLAY_FETCH_TIMEOUT, or put the archive in <mirror>/pypi/")

    def _timeout(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.late()
        return min(read_timeout(), left)

    def get(self, url: str, limit: int, accept: str | None = None,
            sink: Callable[[bytes], None] | None = None) -> tuple[str, str, bytes]:
        """(final URL, content type, body); with `sink`, the body streams to it instead."""
        bare, _ = _split_credentials(url)
        if urllib.parse.urlsplit(bare).scheme == "file":
            return self._get_file(bare, limit, sink)
        req = urllib.request.Request(bare, headers={"Accept": accept} if accept else {})
        p = urllib.parse.urlsplit(bare)
        if (p.hostname, p.port) in self.auth:
            req.add_unredirected_header("Authorization", self.auth[(p.hostname, p.port)])
        watchdog = _Watchdog(self.deadline)
        self._box[:] = [watchdog]
        try:
            with self.opener.open(req, timeout=self._timeout()) as resp:
                ctype = resp.headers.get("Content-Type", "")
                declared = resp.headers.get("Content-Length")
                if declared and declared.isdigit() and int(declared) > limit:
                    raise IndexRefused(f"{_show(bare)} is {int(declared)} bytes, more than the "
                                       f"{limit} accepted", hint="check the index setting")
                body = _read_bounded(lambda: resp.read(1 << 16), limit, bare, sink, self._timeout)
                if watchdog.fired:  # the end of the body was the watchdog's, not the server's
                    raise self.late()
                return resp.geturl(), ctype, body
        except IndexRefused:
            raise
        except urllib.error.HTTPError as exc:
            if watchdog.fired:
                raise self.late() from None
            raise IndexRefused(f"{_show(bare)} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError, socket.timeout, ValueError, http.client.HTTPException) as exc:
            if watchdog.fired:
                raise self.late() from None
            reason = getattr(exc, "reason", exc)
            raise IndexRefused(f"cannot reach {_show(bare)}: {reason}") from None
        finally:
            watchdog.cancel()
            self._box.clear()

    def _get_file(self, url: str, limit: int, sink) -> tuple[str, str, bytes]:
        path = Path(urllib.request.url2pathname(urllib.parse.urlsplit(url).path))
        if path.is_dir():  # as pip reads a file:// index: the folder's index.html
            path = path / "index.html"
            url = path.as_uri()
        try:
            with contextlib.closing(paths.iter_capped(path, limit, chunk=1 << 16)) as chunks:
                body = _read_bounded(lambda: next(chunks, b""), limit, url, sink, None)
        except paths.NotARegularFile as exc:
            raise IndexRefused(f"{path} is {exc.kind}, not a regular file; not read",
                               hint="a file:// index or find-links entry names regular files") from None
        except OSError as exc:
            raise IndexRefused(f"cannot read {path}: {exc.strerror or exc}") from None
        return url, "text/html" if path.suffix in (".html", ".htm") else "", body


def _read_bounded(read: Callable[[], bytes], limit: int, url: str, sink, timeout) -> bytes:
    """The body `read()` returns piece by piece (b"" at its end), at most `limit` bytes."""
    chunks, total = [], 0
    while True:
        if timeout is not None:
            timeout()  # raises once the overall deadline has passed
        chunk = read()
        if not chunk:
            break
        total += len(chunk)
        if total > limit:
            raise IndexRefused(f"{_show(url)} sent more than the {limit} bytes accepted",
                               hint="check the index setting")
        if sink is not None:
            sink(chunk)
        else:
            chunks.append(chunk)
    return b"".join(chunks)


# ------------------------------------------------------------------------------ pages

class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: str | None = None
        self.links: list[tuple[str, str]] = []  # (href, text)
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "base" and a.get("href") and self.base is None:
            self.base = a["href"]
        elif tag == "a":
            self._href, self._text = a.get("href"), []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def _file_entry(page_url: str, href: str, name: str | None, sha256: str | None,
                local_ok: bool, name_is_field: bool = False) -> tuple[str, str, str | None] | None:
    """(filename, absolute URL, sha256) for one link, or None when the link is not one we follow.

    HTML (PEP 503): the anchor text, when there is one, must be the URL's last path part.
    JSON (PEP 691): `filename` is a field of its own and the URL may be named otherwise."""
    url = urllib.parse.urljoin(page_url, href.strip())
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") and not (parts.scheme == "file" and local_ok):
        return None  # javascript:, data:, mailto:, or a local path named by a remote page
    in_url = urllib.parse.unquote(parts.path.rsplit("/", 1)[-1])
    if name_is_field:
        filename = name or ""
    elif name and name != in_url:
        return None
    else:
        filename = in_url
    if not filename or filename.startswith(".") or "/" in filename or "\\" in filename:
        return None  # only a plain file name can name what we store
    if sha256 is None and parts.fragment.startswith("sha256="):
        sha256 = parts.fragment[len("sha256="):]
    if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        return None  # a malformed hash cannot vouch for anything
    return filename, urllib.parse.urlunsplit(parts._replace(fragment="")), \
        sha256.lower() if sha256 else None


def parse_project_page(page_url: str, ctype: str, body: bytes, local_ok: bool) -> list[tuple[str, str, str | None]]:
    """The files a project page lists, from PEP 691 JSON or PEP 503 HTML."""
    kind = ctype.split(";")[0].strip().lower()
    if kind == "application/vnd.pypi.simple.v1+json" or kind == "application/json":
        try:
            doc = json.loads(body)
            major = str(doc.get("meta", {}).get("api-version", "1.0")).split(".")[0]
            files = doc["files"]
            if major != "1" or not isinstance(files, list):
                raise ValueError
        except (ValueError, TypeError, KeyError, AttributeError):
            raise IndexRefused(f"{_show(page_url)} is not a simple-API v1 JSON page") from None
        out = []
        for f in files:
            if not isinstance(f, dict) or not isinstance(f.get("url"), str):
                continue
            hashes = f.get("hashes") if isinstance(f.get("hashes"), dict) else {}
            sha = hashes.get("sha256") if isinstance(hashes.get("sha256"), str) else None
            name = f.get("filename") if isinstance(f.get("filename"), str) else None
            entry = _file_entry(page_url, f["url"], name, sha, local_ok, name_is_field=True)
            if entry:
                out.append(entry)
        return out
    if kind in ("application/vnd.pypi.simple.v1+html", "text/html", ""):
        parser = _Anchors()
        try:
            parser.feed(body.decode("utf-8", errors="replace"))
            parser.close()
        except Exception:  # noqa: BLE001 - html.parser on hostile input: refuse, one line
            raise IndexRefused(f"{_show(page_url)} is not a readable HTML page") from None
        base = urllib.parse.urljoin(page_url, parser.base) if parser.base else page_url
        if parser.base and urllib.parse.urlsplit(base).scheme not in ("http", "https", "file"):
            base = page_url
        return [e for href, text in parser.links if href
                for e in [_file_entry(base, href, text, None, local_ok)] if e]
    raise IndexRefused(f"{_show(page_url)} answered content type {kind!r}, "
                       f"neither simple-API JSON nor HTML")


# ------------------------------------------------------------------------------ search

def _project_of(filename: str) -> str | None:
    """The normalised project a release file's name says it belongs to (None: no release file)."""
    wheel = wheel_release(filename)
    if wheel is not None:
        return normalize(wheel[0])
    for ext in SDIST_EXTS:
        if filename.endswith(ext):
            dist, sep, _ = filename[: -len(ext)].rpartition("-")
            return normalize(dist) if sep else None
    return None


def project_files(transport: Transport, config: IndexConfig, name: str,
                  notes: list[str]) -> list[Candidate]:
    """Every file the configured indexes (project page of `name`) and find-links entries
    (files named as `name`'s) list, any version; what could not be read is said in `notes`."""
    found: list[Candidate] = []
    for index in config.index_urls:
        bare, _ = _split_credentials(index)
        page = bare.rstrip("/") + f"/{normalize(name)}/"
        local = urllib.parse.urlsplit(bare).scheme == "file"
        try:
            final, ctype, body = transport.get(page, page_limit(), ACCEPT)
        except DeadlinePassed:
            raise
        except IndexRefused as exc:
            notes.append(exc.message)
            continue
        found += [Candidate(filename, url, sha, _show(bare))
                  for filename, url, sha in parse_project_page(final, ctype, body, local_ok=local)]
    for link in config.find_links:
        found += _find_links(transport, link, name, notes)
    return found


def _candidates(transport: Transport, config: IndexConfig, name: str, version: str,
                notes: list[str]) -> list[Candidate]:
    return [c for c in project_files(transport, config, name, notes)
            if _is_sdist_of(c.filename, name, version)]


def _find_links(transport: Transport, link: str, name: str, notes: list[str]) -> list[Candidate]:
    bare, _ = _split_credentials(link)
    scheme = urllib.parse.urlsplit(bare).scheme
    ours = normalize(name)
    if scheme in ("", "file"):
        folder = Path(urllib.request.url2pathname(urllib.parse.urlsplit(bare).path)
                      if scheme else os.path.expanduser(bare))
        if folder.is_dir():
            return [Candidate(p.name, p.resolve().as_uri(), None, str(folder))
                    for p in sorted(folder.iterdir())
                    if p.is_file() and _project_of(p.name) == ours]
        if not folder.exists():
            notes.append(f"find-links {folder} does not exist")
            return []
        bare = folder.resolve().as_uri()  # not a folder: a page, read by the bounded reader
    try:
        final, ctype, body = transport.get(bare, page_limit(), "text/html")
    except DeadlinePassed:
        raise
    except IndexRefused as exc:
        notes.append(exc.message)
        return []
    local = urllib.parse.urlsplit(bare).scheme == "file"
    return [Candidate(f, u, s, _show(bare))
            for f, u, s in parse_project_page(final, ctype or "text/html", body, local_ok=local)
            if _project_of(f) == ours]


def download(transport: Transport, chosen: Candidate, sha256: str, dest: Path,
             expected_by: str = "the pin") -> None:
    """Stream `chosen` into `dest`, hashing as it goes; IndexRefused (one line) when the bytes
    do not hash to `sha256` (what `expected_by` says). The caller removes `dest` then."""
    digest = hashlib.sha256()
    with dest.open("wb") as out:
        def sink(chunk: bytes) -> None:
            digest.update(chunk)
            out.write(chunk)
        transport.get(chosen.url, archive_limit(), None, sink)
    got = digest.hexdigest()
    if got != sha256:
        raise IndexRefused(f"{_show(chosen.url)} has sha256 {got}, {expected_by} says {sha256}; discarded",
                           hint=f"the index serves a different file: check the index or {expected_by}")


def fetch_sdist(config: IndexConfig, name: str, version: str, sha256: str, dest: Path,
                timeout: float, progress: Progress | None = None) -> str:
    """Write the pinned sdist to `dest` (verified); return its file name.

    Raises IndexRefused (one line) when no index offers it, when the index's hash differs
    from the pin, or when the downloaded bytes do not hash to the pin."""
    if not config.index_urls and not config.find_links:
        raise IndexRefused(f"no package index is configured, so {name}=={version} cannot be downloaded",
                           hint="set PIP_INDEX_URL or UV_INDEX_URL (or index-url in pip.conf), or put "
                                "the archive in <mirror>/pypi/")
    transport = Transport(config, time.monotonic() + timeout, timeout)
    notes: list[str] = []
    found = _candidates(transport, config, name, version, notes)
    if not found:
        where = "; ".join(notes) if notes else f"searched {config.describe()}"
        raise IndexRefused(f"no source archive for {name}=={version} on the configured index ({where})")
    matching = [c for c in found if c.sha256 in (None, sha256)]
    if not matching:
        c = found[0]
        raise IndexRefused(f"{c.where} lists {c.filename} with sha256 {c.sha256}, the pin says "
                           f"{sha256}; not downloaded",
                           hint="the index serves a different file under that name: check the "
                                "index setting or the pin")
    # Prefer a file whose hash the index vouches for, then an sdist over a wheel; the pin is
    # checked after download anyway.
    chosen = sorted(matching, key=lambda c: (c.sha256 is None, wheel_release(c.filename) is not None))[0]
    if progress:
        progress(f"downloading {chosen.filename} from {chosen.where}")
    download(transport, chosen, sha256, dest)
    return chosen.filename
