"""Issue 26, case 7: the index client keeps its whole-request deadline against a server that
answers slowly on purpose (one byte, or one header line, at a time: each read is quick, so
a per-read timeout never fires), and a local page is read like every untrusted file: a
FIFO named as a `file://` page or find-links file is refused at once, not waited on.

The loopback server is bounded (it stops itself after DRIBBLE_S seconds), so a client that
ignores its deadline ends the test with a wrong answer rather than hanging it; the FIFO
cases run in a child process with a timeout for the same reason. No wall-clock time is
asserted: each case must end with the deadline's own error line."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from overlay.trees import simple_index
from overlay.trees.index_config import IndexConfig

ROOT = Path(__file__).resolve().parents[2]
DRIBBLE_S = 20.0  # the server's own bound, far past the client's deadline
DEADLINE_S = 2.0
SHA = "0" * 64


class Dribble:
    """A loopback HTTP server that sends its answer a piece at a time, `every` seconds apart."""

    def __init__(self, mode: str, every: float = 0.25) -> None:
        self.mode, self.every = mode, every
        self.stop = threading.Event()
        self.hung_up = threading.Event()  # the client closed the connection while the answer dribbled
        self.outlasted = False  # the server reached its own bound with the client still reading
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.5)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _pieces(self):
        head = b"HTTP/1.1 200 OK\r\n"
        if self.mode == "status":  # the status line itself, byte by byte
            yield from (head[i:i + 1] for i in range(len(head)))
            return
        if self.mode == "headers":  # one header line at a time, never the blank line
            yield head
            for i in range(10_000):
                yield f"X-Slow-{i}: 1\r\n".encode()
        if self.mode == "long-header":  # more than http.client reads in one header line
            yield head + b"X-Long: " + b"a" * 70_000 + b"\r\n\r\n"
            return
        if self.mode == "body":  # headers at once, then the page one byte at a time
            yield head + b"Content-Type: text/html\r\nContent-Length: 100000\r\n\r\n"
            while True:
                yield b" "

    def _serve(self) -> None:
        started = time.monotonic()
        while not self.stop.is_set() and time.monotonic() - started < DRIBBLE_S:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    conn.recv(65536)  # the request
                    for piece in self._pieces():
                        if self.stop.is_set() or time.monotonic() - started > DRIBBLE_S:
                            self.outlasted = not self.stop.is_set()
                            break
                        conn.sendall(piece)
                        time.sleep(self.every)
                except OSError:  # the client closed: what it should do at its deadline
                    self.hung_up.set()
        self.listener.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(DRIBBLE_S + 5)


@pytest.mark.parametrize("mode", ["status", "headers", "body"])
def test_a_server_dribbling_its_answer_meets_the_whole_request_deadline(tmp_path, monkeypatch, mode):
    monkeypatch.setenv("OVERLAY_INDEX_TIMEOUT", "60")  # each read comes well within it
    server = Dribble(mode)
    try:
        config = IndexConfig(index_urls=(server.url + "/simple",))
        with pytest.raises(simple_index.IndexRefused) as refused:
            simple_index.fetch_sdist(config, "core", "1.0", SHA, tmp_path / "out.tar.gz", timeout=DEADLINE_S)
        line = refused.value.one_line()
        assert "\n" not in line and f"within its {DEADLINE_S:g} s deadline" in line, line
        assert server.hung_up.wait(DRIBBLE_S) and not server.outlasted  # the client hung up first
    finally:
        server.close()


def test_what_http_client_itself_refuses_is_one_line(tmp_path):
    server = Dribble("long-header")
    try:
        with pytest.raises(simple_index.IndexRefused) as refused:
            simple_index.fetch_sdist(IndexConfig(index_urls=(server.url + "/simple",)), "core", "1.0", SHA,
                                     tmp_path / "out.tar.gz", timeout=DEADLINE_S * 10)
        assert "cannot reach" in refused.value.one_line() and "header line" in refused.value.one_line()
    finally:
        server.close()


def test_a_tls_handshake_that_never_comes_meets_the_deadline(tmp_path, monkeypatch):
    """The watchdog holds from the socket's first moment: an https index that accepts the
    connection and then says nothing (no TLS handshake) ends at the deadline too."""
    monkeypatch.setenv("OVERLAY_INDEX_TIMEOUT", "60")
    listener = socket.create_server(("127.0.0.1", 0))
    hung_up = threading.Event()

    def serve() -> None:
        listener.settimeout(DRIBBLE_S)
        try:
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(DRIBBLE_S)
                while conn.recv(65536):  # the client's hello; b"" once it hangs up
                    pass
                hung_up.set()
        except OSError:
            pass
        finally:
            listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    config = IndexConfig(index_urls=(f"https://127.0.0.1:{listener.getsockname()[1]}/simple",))
    with pytest.raises(simple_index.IndexRefused) as refused:
        simple_index.fetch_sdist(config, "core", "1.0", SHA, tmp_path / "out.tar.gz", timeout=DEADLINE_S)
    assert f"within its {DEADLINE_S:g} s deadline" in refused.value.one_line()
    assert hung_up.wait(DRIBBLE_S)
    thread.join(DRIBBLE_S)


CHILD = """
import sys
from pathlib import Path
from overlay.trees import simple_index
from overlay.trees.index_config import IndexConfig
kind, where = sys.argv[1], sys.argv[2]
config = IndexConfig(index_urls=(where,)) if kind == "index" else IndexConfig(index_urls=(), find_links=(where,))
try:
    simple_index.fetch_sdist(config, "core", "1.0", "0" * 64, Path(sys.argv[3]), timeout=600)
except simple_index.IndexRefused as exc:
    print(exc.one_line())
"""


def _child(kind: str, where: str, out: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "tools")}
    try:
        proc = subprocess.run([sys.executable, "-c", CHILD, kind, where, str(out)], capture_output=True,
                              text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the index client waited on a FIFO ({kind} {where})")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    return proc.stdout.strip()


def test_a_fifo_as_a_file_index_page_is_refused_not_waited_on(tmp_path):
    page = tmp_path / "index" / "core"
    page.mkdir(parents=True)
    os.mkfifo(page / "index.html")
    line = _child("index", (tmp_path / "index").as_uri(), tmp_path / "out.tar.gz")
    assert "index.html" in line and "a FIFO" in line, line


def test_a_fifo_as_a_find_links_page_or_archive_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "links.html")
    line = _child("links", (tmp_path / "links.html").as_uri(), tmp_path / "out.tar.gz")
    assert "links.html" in line and "a FIFO" in line, line
    # a local page naming a FIFO as the archive itself
    os.mkfifo(tmp_path / "core-1.0.tar.gz")
    (tmp_path / "page.html").write_text(f'<a href="{(tmp_path / "core-1.0.tar.gz").as_uri()}">core-1.0.tar.gz</a>\n')
    line = _child("links", (tmp_path / "page.html").as_uri(), tmp_path / "out.tar.gz")
    assert "core-1.0.tar.gz" in line and "a FIFO" in line, line
