"""The checker engine: differential type checking with a pinned real checker (mypy).

The plugin is checked twice, against the core it declares and against the core under
test, each time from a prepared scratch copy (see prepare.py): suppressions stripped,
version tests settled for that core, a torch stub. The diagnostics the new core adds,
compared as a multiset of (file, rule, whole message with its detail lines) with line
numbers ignored (and an unpack's core-side count, `comparable`), are the checker's findings.

Upstream material is data. Core is type-checked from its source tree, never imported or
run; the checker runs with a configuration file of ours (no plugins, no installed
packages, no configuration from either tree: the plugin's own `mypy.ini`, `setup.cfg`
or `pyproject.toml` is never read, and is not copied), in an isolated interpreter
(`python -I`), from a scratch folder this run makes (with its marker) and removes.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from overlay.errors import OverlayError
from overlay.gate.prepare import TORCH_STUB, dead_lines, prepare_text
from overlay.gate.source import TreeSource
from overlay.trees import ownership

CHECKER = "mypy"
PIN = "2.4.1"  # pyproject.toml's `gate` extra pins the same
INSTALL_HINT = f"install it with the `gate` extra: pip install -e '.[gate]' (mypy=={PIN})"
TIMEOUT_S = 1800
SCRATCH_PREFIX = "overlay-checker-"


@dataclass(frozen=True)
class Diagnostic:
    path: str  # plugin file, relative to the plugin tree
    line: int
    rule: str  # the checker's error code (`attr-defined`)
    message: str  # the whole message, detail lines included ("\n"-joined)

    def key(self) -> tuple[str, str, str]:
        return (self.path, self.rule, comparable(self.message))


# An unpack of the wrong size names the plugin's count ("3 expected") and core's ("4
# provided", "Need more than 2"): only the plugin's says which site it is. A site that
# already mismatched with the declared core (7 provided) and mismatches otherwise with the
# new one (8 provided) is no new break.
UNPACK_HEAD = re.compile(r"^(Too many values to unpack|Need more than \d+ values? to unpack)\b")  # any unpack
_UNPACK = re.compile(r"^(?:Too many values to unpack \((\d+) expected, \d+ provided\)"
                     r"|Need more than \d+ values? to unpack \((\d+) expected\))")


def comparable(message: str) -> str:
    """The message as the two runs are compared: an unpack's core-side count left out."""
    m = _UNPACK.match(message)
    if m is None:
        return message
    return f"values to unpack ({m.group(1) or m.group(2)} expected) of another size{message[m.end():]}"


@dataclass(frozen=True)
class CheckerRun:
    diagnostics: tuple[Diagnostic, ...]
    seconds: float
    pinned: int  # version tests settled
    stripped: int  # files that had a suppression comment
    unparsed: tuple[str, ...] = ()  # plugin files left out: they do not parse


def installed() -> str | None:
    """The installed mypy's version, or None when it is not installed."""
    if importlib.util.find_spec("mypy") is None:
        return None
    try:
        return importlib.metadata.version("mypy")
    except importlib.metadata.PackageNotFoundError:
        return None


def require() -> str:
    version = installed()
    if version is None:
        raise OverlayError("the checker engine needs mypy, which is not installed", hint=INSTALL_HINT)
    return version


def plugin_files(plugin: TreeSource, packages: Iterable[str]) -> list[str]:
    return sorted(p for pkg in sorted(packages) for p in plugin.py_files(pkg))


def parses(text: str) -> bool:
    try:
        ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def write_scratch(plugin: TreeSource, packages: Iterable[str], version: str | None,
                  dest: Path, dead: dict[str, frozenset[int]] | None = None) -> tuple[int, int, tuple[str, ...]]:
    """The prepared copy of the plugin's packages under `dest/plugin`, the torch stub
    under `dest/stubs`; (version tests pinned, files with a suppression removed, files
    left out because they do not parse: one would stop the checker's whole run).
    `dead` gets, per file, the lines of branches the settled version tests never take."""
    pinned = stripped = 0
    unparsed = []
    for rel in plugin_files(plugin, packages):
        data = plugin.read(rel)
        if data is None:
            continue
        raw = data.decode("utf-8", "replace")
        if not parses(raw):
            unparsed.append(rel)
            continue
        text, n, cut = prepare_text(raw, version)
        if n and dead is not None:
            dead[rel] = dead_lines(text)
        pinned += n
        stripped += cut
        out = dest / "plugin" / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    for rel, text in TORCH_STUB.items():
        out = dest / "stubs" / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    return pinned, stripped, tuple(unparsed)


def config_text(core_root: Path, scratch: Path, core_packages: Iterable[str] = ()) -> str:
    """Our configuration: the stub and core's source tree on the search path, nothing
    installed, no plugins; core's own modules are read for their types but not reported.
    A module of core's own packages that is not found is reported (core dropped it);
    any other missing module is Any."""
    strict = [line for pkg in sorted(core_packages)
              for line in (f"[mypy-{pkg}.*]", "ignore_missing_imports = False", "")]
    return "\n".join([
        "[mypy]",
        f"mypy_path = {scratch / 'stubs'}:{core_root}",
        "no_site_packages = True",
        "ignore_missing_imports = True",
        "follow_imports = silent",
        "check_untyped_defs = True",
        "explicit_package_bases = True",
        "namespace_packages = True",
        "warn_unused_configs = False",
        "warn_unused_ignores = False",
        "disable_error_code = annotation-unchecked",
        f"cache_dir = {scratch / 'cache'}",
        "plugins =",
        "",
        *strict,
    ])


def parse(output: str, scratch_plugin: Path) -> list[Diagnostic]:
    """The checker's JSON lines as Diagnostics on plugin files (others are dropped)."""
    out = []
    prefix = str(scratch_plugin) + os.sep
    for line in output.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if not isinstance(doc, dict) or doc.get("severity") != "error":
            continue
        path = str(doc.get("file") or "")
        if path.startswith(prefix):
            path = path[len(prefix):]
        elif os.path.isabs(path):
            continue
        message = str(doc.get("message") or "")
        if doc.get("hint"):
            message += "\n" + str(doc["hint"])
        out.append(Diagnostic(path.replace(os.sep, "/"), int(doc.get("line") or 0), str(doc.get("code") or ""),
                              message))
    return out


def _env() -> dict[str, str]:
    """The checker's environment: none of mypy's own settings, and a fixed hash seed (the
    same trees give the same run)."""
    drop = {"MYPYPATH", "MYPY_CACHE_DIR", "PYTHONPATH", "PYTHONSTARTUP", "PYTHONHOME", "MYPY_FORCE_COLOR"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONHASHSEED"] = "0"
    return env


def check(core_root: Path, plugin: TreeSource, packages: Iterable[str], version: str | None,
          progress: Callable[[str], None] | None = None, core_packages: Iterable[str] = ()) -> CheckerRun:
    """One checker run of the prepared plugin against the core tree at `core_root`."""
    require()
    say = progress or (lambda msg: None)
    started = time.perf_counter()
    scratch = ownership.make(Path(tempfile.gettempdir()), SCRATCH_PREFIX)
    try:
        dead: dict[str, frozenset[int]] = {}
        pinned, stripped, unparsed = write_scratch(plugin, packages, version, scratch, dead)
        config = scratch / "mypy.ini"
        config.write_text(config_text(Path(core_root).resolve(), scratch, core_packages), encoding="utf-8")
        tops = sorted(p.name for p in (scratch / "plugin").iterdir() if p.is_dir())
        if not tops:
            return CheckerRun((), time.perf_counter() - started, pinned, stripped, unparsed)
        say(f"{CHECKER}: checking the plugin against core {version or Path(core_root).name}")
        cmd = [sys.executable, "-I", "-m", "mypy", "--config-file", str(config), "-O", "json",
               "--no-error-summary", "--no-pretty", "--hide-error-context", *tops]
        try:
            done = subprocess.run(cmd, cwd=scratch / "plugin", env=_env(), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise OverlayError(f"{CHECKER} ran past {TIMEOUT_S}s on core {core_root}",
                               hint="gate with --engine hand") from None
        if done.returncode not in (0, 1):
            last = (done.stderr.strip().splitlines() or done.stdout.strip().splitlines() or ["no output"])[-1]
            raise OverlayError(f"{CHECKER} failed (exit {done.returncode}): {last[:200]}",
                               path=str(core_root), hint="gate with --engine hand")
        found = [d for d in parse(done.stdout, scratch / "plugin") if d.line not in dead.get(d.path, ())]
        return CheckerRun(tuple(found), time.perf_counter() - started, pinned, stripped, unparsed)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def new_diagnostics(new: Iterable[Diagnostic], old: Iterable[Diagnostic]) -> list[Diagnostic]:
    """What `new` holds that `old` does not, as a multiset of (file, rule, message): line
    numbers move between releases and never count. Pure."""
    left = Counter(d.key() for d in old)
    out = []
    for d in new:
        if left[d.key()] > 0:
            left[d.key()] -= 1
        else:
            out.append(d)
    return out
