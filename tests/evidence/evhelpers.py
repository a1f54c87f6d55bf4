"""Shared helpers for the evidence tests: protocol writers for synthetic and fake-server runs."""

from __future__ import annotations

import socket
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).parent
FAKE_SERVER = HERE / "fake_server.py"
FAKE_CLIENT = HERE / "fake_bench_client.py"

BASE_PROTOCOL = """\
claim: synthetic
preregistered: 2026-11-30
hypothesis: the treatment lowers per-token latency
model: synthetic
baseline: base
variants:
  base: {{}}
  fast:
    env: {{FAKE_SPEEDUP: "1"}}
scenarios:
  c4: {{input-len: 32, output-len: 16, num-prompts: {prompts}, max-concurrency: 4}}
starts: {starts}
seed: 7
bootstrap: {{resamples: {resamples}}}
claims:
  latency:
    hypothesis: fast lowers mean TPOT, p99 ITL and raises throughput by >= {effect}%
    checks:
      - {{metric: tpot, statistic: mean, change: lower, min-effect-pct: {effect}}}
      - {{metric: itl, statistic: p99, change: lower, min-effect-pct: {effect}}}
      - {{metric: throughput, change: higher, min-effect-pct: {effect}}}
"""


def write_protocol(folder: Path, *, starts: int = 5, prompts: int = 24, resamples: int = 2000,
                   effect: float = 2.0, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "protocol.yaml"
    p.write_text(BASE_PROTOCOL.format(starts=starts, prompts=prompts, resamples=resamples,
                                      effect=effect) + textwrap.dedent(extra))
    return p


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fake_protocol(folder: Path, *, starts: int = 2, base_itl: float = 3.0, fast_itl: float = 1.5,
                  startup_s: float = 0.0, fail_variant: str | None = None, cpus: bool = True,
                  base_extra: str = "", fast_extra: str = "", server_extra: str = "") -> Path:
    """A protocol whose server is the fake OpenAI server and whose client is the
    schema-compatible stand-in for `vllm bench serve`."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    fail = '\n      FAKE_FAIL_START: "1"' if fail_variant == "fast" else ""
    cpu_block = "cpus: {server: \"0\", client: \"0\"}\n" if cpus else ""
    text = f"""\
claim: fake-ab
preregistered: 2026-11-30
hypothesis: the fast variant streams tokens faster
model: fake-model
baseline: base
variants:
  base:
{base_extra}    env:
      FAKE_ITL_MS: "{base_itl}"
      FAKE_STARTUP_S: "{startup_s}"
  fast:
{fast_extra}    env:
      FAKE_ITL_MS: "{fast_itl}"
      FAKE_STARTUP_S: "{startup_s}"{fail}
scenarios:
  burst: {{input-len: 8, output-len: 6, num-prompts: 6, max-concurrency: 3, warmups: 1}}
starts: {starts}
seed: 3
{cpu_block}server:
  command: ["{sys.executable}", "{FAKE_SERVER}", "--model", "{{model}}", "--host", "{{host}}", "--port", "{{port}}"{server_extra}]
  port: {port}
  ready-timeout-s: 20
  stop-timeout-s: 5
client:
  command: ["{sys.executable}", "{FAKE_CLIENT}"]
  timeout-s: 60
bootstrap: {{resamples: 500}}
claims:
  itl:
    hypothesis: fast lowers p50 ITL by >= 10%
    checks:
      - {{metric: itl, statistic: p50, change: lower, min-effect-pct: 10}}
"""
    p = folder / "protocol.yaml"
    p.write_text(text)
    return p


def ladder_protocol(folder: Path, *, itls: tuple[float, ...] = (3.0, 1.5, 1.5), starts: int = 2,
                    startup_s: float = 0.0) -> Path:
    """The fake protocol as a ladder: rung0 (the baseline), rung1, ... each with its own ITL;
    rung k is judged against rung k-1."""
    import yaml

    p = fake_protocol(folder, starts=starts, cpus=False, startup_s=startup_s)
    doc = yaml.safe_load(p.read_text())
    base = doc["variants"]["base"]
    names = [f"rung{i}" for i in range(len(itls))]
    doc["variants"] = {n: {"env": {**base["env"], "FAKE_ITL_MS": str(itl)}} for n, itl in zip(names, itls)}
    doc["baseline"], doc["ladder"] = names[0], names
    doc["hypothesis"] = "each rung streams tokens faster than the one before"
    p.write_text(yaml.safe_dump(doc, sort_keys=False))
    return p
