"""A tiny OpenAI-compatible streaming server with controlled timing (test double for `vllm serve`).

GET /v1/models, GET /health, POST /v1/completions and /v1/chat/completions with
"stream": true (server-sent events, one token per chunk, then usage and [DONE]).
Timing from the environment: FAKE_STARTUP_S (delay before listening),
FAKE_TTFT_MS, FAKE_ITL_MS (per token), FAKE_FAIL_START=1 (exit before listening),
FAKE_SERVED_MODEL (the id /v1/models lists instead of --model), FAKE_DIE_AFTER=N
(exit with status 7 after N completions: a server dying mid-run), FAKE_WORKER=FILE
(fork a worker, as vLLM forks its engine core and workers, and write its pid to
FILE; FAKE_WORKER_SETSID=1: the worker leaves the process group, and ignores
SIGTERM so only SIGKILL stops it).
--probe FILE prints FILE's text and PYTHONPATH (tests of composed trees).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


FAKE_WORKER_TAG = "fake-server-worker"  # in the worker's argv, so tests can find it


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="fake")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--probe", help="print this file (which tree am I running from?)")
    args, _ = ap.parse_known_args()
    if args.probe:
        text = open(args.probe).read().strip() if os.path.isfile(args.probe) else "(missing)"
        print(f"probe {args.probe}: {text}", flush=True)
        print(f"pythonpath: {os.environ.get('PYTHONPATH', '')}", flush=True)
    if os.environ.get("FAKE_FAIL_START") == "1":
        print("fake server: failing on purpose", flush=True)
        return 3
    worker_file = os.environ.get("FAKE_WORKER")
    if worker_file:
        code = ("import os, signal, time\n"
                "if os.environ.get('FAKE_WORKER_SETSID') == '1':\n"
                "    os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                "time.sleep(3600)\n")
        import subprocess

        worker = subprocess.Popen([sys.executable, "-c", code, FAKE_WORKER_TAG])
        with open(worker_file, "w") as fh:
            fh.write(str(worker.pid))
    time.sleep(float(os.environ.get("FAKE_STARTUP_S", "0")))
    die_after = int(os.environ.get("FAKE_DIE_AFTER", "0"))
    served = [0]
    finishing = threading.Lock()
    ttft = float(os.environ.get("FAKE_TTFT_MS", "5")) / 1000
    itl = float(os.environ.get("FAKE_ITL_MS", "2")) / 1000
    model = os.environ.get("FAKE_SERVED_MODEL") or args.model

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):  # quiet
            pass

        def _json(self, obj, code=200):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path == "/v1/models":
                self._json({"object": "list", "data": [{"id": model, "root": model, "object": "model"}]})
            elif self.path == "/health":
                self._json({})
            else:
                self._json({"error": "not found"}, 404)

        def do_POST(self):
            length = int(self.headers.get("Content-Length", "0"))
            req = json.loads(self.rfile.read(length) or b"{}")
            if self.path not in ("/v1/completions", "/v1/chat/completions") or not req.get("stream"):
                self._json({"error": "only streaming completions"}, 400)
                return
            n = int(req.get("max_tokens") or req.get("max_completion_tokens") or 16)
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            time.sleep(ttft)
            for i in range(n):
                if i:
                    time.sleep(itl)
                chunk = {"id": "cmpl-fake", "object": "text_completion", "model": model,
                         "choices": [{"index": 0, "text": "x", "finish_reason": None if i < n - 1 else "length"}]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.flush()
            usage = {"id": "cmpl-fake", "object": "text_completion", "model": model, "choices": [],
                     "usage": {"prompt_tokens": int(req.get("prompt_len", 0)), "completion_tokens": n}}
            # One handler at a time finishes and counts: the N-th completion exits holding the
            # lock, so no concurrent request completes (or counts, or prints) after it,
            # however the threads are scheduled.
            with finishing:
                self.wfile.write(f"data: {json.dumps(usage)}\n\ndata: [DONE]\n\n".encode())
                self.wfile.flush()
                self.close_connection = True
                served[0] += 1
                if die_after and served[0] >= die_after:
                    print(f"fake server: dying after {served[0]} requests", flush=True)
                    os._exit(7)

    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"fake server listening on {args.host}:{args.port}", flush=True)
    try:
        server.serve_forever(poll_interval=0.05)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
