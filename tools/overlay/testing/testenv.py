"""The CPU environment the composed plugin is tested in (composed-test, smoke, mutation check).

One shared virtual environment outside the repository holds the pinned third-party
packages (requirements/composed-test.txt, torch CPU build). vLLM itself is NOT in it:
each composed core tree is installed once, with `pip install --target`, into its own
directory beside it (<venv>/cores/<tree id>[-<version>]/) and put on PYTHONPATH by
test_env(). So v0.23.0, v0.24.0 and v0.25.0 coexist, and two processes can use two
cores at once without reinstalling anything.

Stdlib + overlay only: this runs in the tool's own environment and drives the test
environment through subprocesses.
"""

from __future__ import annotations

import ast
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Callable, Iterable, Iterator, NamedTuple

from overlay import gitcmd
from overlay.errors import OverlayError, printable
from overlay.series import yamldoc

Progress = Callable[[str], None] | None  # None: stay quiet (not a terminal, or --json)

ROOT = Path(__file__).resolve().parents[3]
REQUIREMENTS = ROOT / "requirements" / "composed-test.txt"
REQUIREMENTS_STAMP = ".composed-test-requirements"  # in the venv: sha256 of REQUIREMENTS
CORES_DIR = "cores"  # in the venv: one installed vLLM per composed core tree
TEST_ENV = {
    "TORCH_DEVICE_BACKEND_AUTOLOAD": "0",  # as the plugin's CPU CI job sets it
    "VLLM_WORKER_MULTIPROC_METHOD": "spawn",
}
# The plugin's setup.py writes this at build time from SOC_VERSION; its CPU CI job
# builds with SOC_VERSION=ascend910b1, which maps to A2.
BUILD_INFO = "# Auto-generated file\n__device_type__ = 'A2'\n"
# torchvision's PyPI wheels are CUDA-linked: on CPU torch its C extension does not
# load, yet importing it registers fake kernels for these two operators. Defining
# their schemas first lets it import; the unit tests never run these operators.
TORCHVISION_SHIM_MODULE = "composed_test_torchvision"  # import it (or `pytest -p` it) first
TORCHVISION_SHIM = '''"""composed-test: define torchvision's operator schemas for CPU-only torch."""
try:
    import torch
except ImportError:  # no torch, no torchvision to prepare
    torch = None

if torch is not None:
    _LIB = torch.library.Library("torchvision", "FRAGMENT")
    for _schema in ("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
                    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"):
        _LIB.define(_schema)
'''
PLUGIN_DIST = "vllm_ascend-0.0.0+composedtest.dist-info"
HEARTBEAT_S = 15.0  # a progress line at least this often while pip is silent


def default_venv() -> Path:
    """$OVERLAY_COMPOSED_VENV, else ~/.cache/overlay/composed-test-venv."""
    env = os.environ.get("OVERLAY_COMPOSED_VENV")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "overlay" / "composed-test-venv"


# ----------------------------------------------------------------------------- pure helpers


def plugin_entry_points(setup_py: str, where: str = "setup.py") -> dict[str, list[str]]:
    """The entry_points={...} literal of the plugin's setup() call.

    vLLM finds its platform plugin through these entry points, so the tests need
    them registered even though the plugin is not pip-installed.
    """
    try:
        tree = ast.parse(setup_py)
    except SyntaxError as exc:
        raise OverlayError(f"cannot parse the plugin's setup.py: {exc.msg}", path=where,
                           line=exc.lineno) from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == "entry_points":
                    try:
                        return ast.literal_eval(kw.value)
                    except ValueError:
                        raise OverlayError("the plugin's entry_points are not a literal",
                                           path=where, line=kw.value.lineno) from None
    raise OverlayError("the plugin's setup.py declares no entry_points", path=where)


def entry_points_txt(groups: dict[str, list[str]]) -> str:
    return "\n".join(f"[{group}]\n" + "\n".join(items) + "\n" for group, items in groups.items())


def core_version(pin_text: str) -> str | None:
    """`vllm==X` of a PyPI-sourced core: the version its sdist would report.

    The composed core is a git tree without tags, where setuptools-scm would invent
    a dev version and the plugin's vllm_version_is() checks would take the wrong
    branch; pretend the release version instead.
    """
    m = re.search(r"^\s*pypi:\s*[\"']?vllm==([^\s\"'#]+)", pin_text, re.M)
    return m.group(1) if m else None


def requirement_names(text: str) -> list[str]:
    """The requirement lines of a pip requirements file, comments and blanks dropped."""
    return [line.split("#", 1)[0].strip() for line in text.splitlines()
            if line.split("#", 1)[0].strip()]


def core_dir_name(tree: str, version: str | None) -> str:
    return f"{tree}-{version}" if version else tree


class PipProgress:
    """Turns pip's plain output into short progress lines: `[k/N] collecting X`, installing."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.seen = 0

    def line(self, text: str) -> str | None:
        text = text.strip()
        m = re.match(r"^(Collecting|Processing|Requirement already satisfied:)\s+(\S+)", text)
        if m:
            self.seen += 1
            name = m.group(2).rsplit("/", 1)[-1]
            return f"[{self.seen}/{self.total}] {name}"
        m = re.match(r"^Downloading\s+(\S+)\s*\(([^)]+)\)", text)
        if m:
            return f"  downloading {m.group(1).rsplit('/', 1)[-1]} ({m.group(2)})"
        if text.startswith("Installing collected packages:"):
            n = len(text.split(":", 1)[1].split(","))
            return f"installing {n} package(s)"
        if text.startswith("Building wheel for") or text.startswith("Building wheels for"):
            return text.rstrip(". ")
        if text.startswith("Successfully installed"):
            return "installed"
        return None


# ----------------------------------------------------------------------------- side effects


def _run(cmd: list[str], *, env: dict | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run(cmd, env=env, cwd=cwd, text=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-1:]
        raise OverlayError(f"`{' '.join(cmd[:4])} ...` exited {proc.returncode}"
                           + (f": {tail[0]}" if tail else ""))
    return proc.stdout


def stream(cmd: list[str], *, what: str, progress: Progress, parse: Callable[[str], str | None],
           env: dict | None = None, cwd: Path | None = None, heartbeat_s: float = HEARTBEAT_S) -> None:
    """Run a long command, turning its output into progress lines (and a heartbeat while it
    is silent). On failure: one error naming the command and its last output line."""
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, bufsize=1)
    tail: deque[str] = deque(maxlen=30)
    start = last = time.monotonic()
    done = threading.Event()

    def beat() -> None:
        nonlocal last
        while not done.wait(1.0):
            now = time.monotonic()
            if progress and now - last >= heartbeat_s:
                progress(f"{what}: still working ({int(now - start)}s)")
                last = now

    ticker = threading.Thread(target=beat, daemon=True)
    ticker.start()
    try:
        assert proc.stdout is not None
        for raw in proc.stdout:
            tail.append(raw.rstrip())
            msg = parse(raw)
            if progress and msg:
                progress(f"{what}: {msg}")
                last = time.monotonic()
        code = proc.wait()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        done.set()
        ticker.join()
    if code != 0:
        errors = [t for t in tail if t.startswith("ERROR") or "Error" in t]
        reason = (errors or [t for t in tail if t.strip()] or ["no output"])[-1].strip()
        raise OverlayError(f"{what} failed (`{' '.join(cmd[:5])} ...` exited {code}): {reason}")


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on `path` (created): one builder at a time."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def compose(root: Path, pin: str, mirror: str) -> dict[str, dict]:
    """`overlay apply --pin PIN --json`: target -> its record (path, base, tree, patches)."""
    out = _run([sys.executable, "-m", "overlay", "--root", str(root), "apply", "--pin", pin,
                "--mirror", str(mirror), "--json"])
    try:
        doc = json.loads(out)
        return {t["target"]: t for t in doc["targets"]}
    except (ValueError, KeyError, TypeError):
        raise OverlayError(f"`overlay apply --pin {pin} --json` printed no composition record") from None


def export_tree(repo: str | Path, rev: str, dest: Path) -> Path:
    """The files of `rev` in `repo` at `dest` (git archive: the repo's work tree stays untouched)."""
    dest.mkdir(parents=True)
    archive = dest.parent / (dest.name + ".tar")
    _run(["git", "-C", str(repo), "archive", "--format=tar", "-o", str(archive), "--end-of-options",
          rev])
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()
    return dest


def apply_patches(tree: Path, patches: Iterable[Path]) -> None:
    """Apply patch files, in order, to the exported (not a git work tree) `tree`; one that does
    not apply is an error naming it (nothing is half-applied: `git apply` is atomic per patch)."""
    for patch in patches:
        proc = gitcmd.git(["apply", "--whitespace=nowarn", "--", str(patch)], cwd=tree, check=False)
        if proc.returncode != 0:
            raise OverlayError(f"does not apply to the reference tree without the rest of the series: "
                               f"{printable(proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else 'git apply failed')}",
                               path=f"patches/{patch.name}",
                               hint="a compatibility patch must not depend on the experiment's patches")


_TORCH_PIN = re.compile(r"^torch==(\d+\.\d+)", re.M)


def torch_pin(text: str | None) -> str | None:
    """The torch family (major.minor) a requirements text pins, if any (pure)."""
    m = _TORCH_PIN.search(text or "")
    return m.group(1) if m else None


class Environment(NamedTuple):
    """Where a core's unit tests run: the venv, its requirements, and the deviation when the
    core's own torch family is stood in for by another (None when it is not)."""
    venv: Path
    requirements: Path
    deviation: str | None = None


SUBSTITUTES_NAME = "composed-test-substitutes.yaml"


def _substitute(family: str) -> tuple[str, str] | None:
    """(family to use, why) for `family` from requirements/composed-test-substitutes.yaml,
    the only place a core may run on a torch it does not pin; any malformed entry is one
    error naming the file."""
    path = REQUIREMENTS.with_name(SUBSTITUTES_NAME)
    if not path.is_file():
        return None
    shown = f"requirements/{SUBSTITUTES_NAME}"
    doc = yamldoc.load(path, shown)
    hint = 'map a torch family to {use: "X.Y", why: "..."}, e.g. "2.11": {use: "2.13", why: ...}'
    if not isinstance(doc.value, dict):
        raise OverlayError("expected a mapping of torch families", path=shown, line=doc.line, hint=hint)
    node = doc.value.get(family)
    if node is None:
        return None
    entry = node.value
    if (not isinstance(entry, dict) or set(entry) != {"use", "why"}
            or not all(isinstance(entry[k].value, str) and entry[k].value.strip() for k in ("use", "why"))):
        raise OverlayError(f"entry {family!r} must have exactly `use:` and `why:`, both text",
                           path=shown, line=node.line, hint=hint)
    return entry["use"].value.strip(), " ".join(entry["why"].value.split())


def select_environment(venv: Path, core_tree: Path) -> Environment:
    """The environment for a core tree: one per torch family, reused across pin sets. The
    family is the torch the core pins (requirements/cpu.txt); the default requirements serve
    their own family at `venv`, another family is requirements/composed-test-torch<X.Y>.txt at
    the sibling `<venv>-torch<X.Y>`. A family with neither runs in another family's
    environment only where composed-test-substitutes.yaml says so, as a stated deviation."""
    try:
        cpu = (core_tree / "requirements" / "cpu.txt").read_text(errors="replace")
    except OSError:
        cpu = None
    family, default = torch_pin(cpu), torch_pin(REQUIREMENTS.read_text())
    if family is None or family == default:
        return Environment(venv, REQUIREMENTS)
    requirements = REQUIREMENTS.with_name(f"composed-test-torch{family}.txt")
    if requirements.is_file():
        return Environment(venv.with_name(f"{venv.name}-torch{family}"), requirements)
    substitute = _substitute(family)
    if substitute is not None:
        use, why = substitute
        deviation = f"core pins torch {family}, run on torch {use}: {why}"
        if use == default:
            return Environment(venv, REQUIREMENTS, deviation)
        other = REQUIREMENTS.with_name(f"composed-test-torch{use}.txt")
        if not other.is_file():
            raise OverlayError(f"torch {family} is to run on torch {use}, which has no environment "
                               f"(neither composed-test.txt's {default} nor {other.name})",
                               path=f"requirements/{SUBSTITUTES_NAME}",
                               hint="name a family that has requirements")
        return Environment(venv.with_name(f"{venv.name}-torch{use}"), other, deviation)
    raise OverlayError(f"this core pins torch {family}; the composed-test environment is torch {default} "
                       f"and there is no {requirements.name}",
                       path=f"requirements/{requirements.name}",
                       hint=f"write {requirements.name}: pip's resolved list for that core, as "
                            f"composed-test.txt is for its own, or list the family in {SUBSTITUTES_NAME} "
                            "(README.md, composed-test)")


def requirements_digest(requirements: Path = REQUIREMENTS) -> str:
    return hashlib.sha256(requirements.read_bytes()).hexdigest()


def ensure_venv(venv: Path, progress: Progress, requirements: Path = REQUIREMENTS) -> Path:
    """The venv's python; (re)builds the venv when its stamp does not match `requirements`."""
    python = venv / "bin" / "python"
    stamp = venv / REQUIREMENTS_STAMP
    want = requirements_digest(requirements)

    def ready() -> bool:
        return python.exists() and stamp.is_file() and stamp.read_text() == want

    if ready():
        return python
    with locked(venv.parent / (venv.name + ".lock")):
        if ready():  # another process built it while we waited
            return python
        total = len(requirement_names(requirements.read_text()))
        if progress:
            progress(f"building the test environment in {venv} from {requirements.name}: "
                     f"{total} packages, about 3.5 GB; torch alone unpacks for minutes "
                     "(once; rebuilt only when that file changes)")
        # Anything there (a half-built venv) is replaced; the installed cores go with it,
        # as they were built against the old packages.
        _run([sys.executable, "-m", "venv", "--clear", str(venv)])
        stream([str(python), "-m", "pip", "install", "--no-deps", "--progress-bar", "off",
                "--disable-pip-version-check", "-r", str(requirements)],
               what="pip install", progress=progress, parse=PipProgress(total).line)
        stamp.write_text(want)
    return python


def ensure_core(python: Path, venv: Path, core: dict, version: str | None, progress: Progress) -> Path:
    """A directory holding vLLM installed from the composed core tree `core` (an `overlay
    apply --json` record), built once per tree id: put it on PYTHONPATH (test_env)."""
    return _install_core(python, venv, core_dir_name(core["tree"], version), version, progress,
                         f"the composed core tree {core['tree'][:12]}", str(core["path"]),
                         lambda dest: export_tree(core["path"], "HEAD", dest))


def ensure_release_core(python: Path, venv: Path, tree: Path, key: str, version: str,
                        progress: Progress) -> Path:
    """As ensure_core, for a core release's source tree (a directory, e.g. the gate's
    checkout of the release archive), keyed by `key` (its archive digest): copied first, so
    the build never writes into the shared checkout."""
    return _install_core(python, venv, core_dir_name(key, version), version, progress,
                         f"the vllm {version} release tree", str(tree),
                         lambda dest: Path(shutil.copytree(tree, dest, symlinks=True)))


def _install_core(python: Path, venv: Path, name: str, version: str | None, progress: Progress,
                  what: str, where: str, populate: Callable[[Path], Path]) -> Path:
    cores = venv / CORES_DIR
    dest = cores / name
    if dest.is_dir():
        return dest
    cores.mkdir(parents=True, exist_ok=True)
    if progress:
        progress(f"installing vLLM from {what}{f' as {version}' if version else ''} "
                 "(VLLM_TARGET_DEVICE=empty, once per tree)")
    # Built beside its final place, then renamed: a reader never sees a half-installed core,
    # and two builders of the same tree both succeed (the second discards its copy).
    with tempfile.TemporaryDirectory(prefix=".build-", dir=cores) as tmp:
        src = populate(Path(tmp) / "src")
        site = Path(tmp) / "site"
        env = dict(os.environ, VLLM_TARGET_DEVICE="empty")
        env.pop("PYTHONPATH", None)
        if version:
            env["SETUPTOOLS_SCM_PRETEND_VERSION"] = version
        stream([str(python), "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                "--progress-bar", "off", "--disable-pip-version-check", "--target", str(site), str(src)],
               what="vLLM install", progress=progress, parse=PipProgress(1).line, env=env)
        if not (site / "vllm" / "__init__.py").is_file():
            raise OverlayError(f"installing {what} produced no vllm package",
                               path=where, hint="is this a vLLM source tree?")
        try:
            site.rename(dest)
        except OSError:
            if not dest.is_dir():
                raise
    return dest


def write_build_info(tree: Path) -> None:
    (tree / "vllm_ascend" / "_build_info.py").write_text(BUILD_INFO)


def write_shims(shim_dir: Path, plugin_tree: Path) -> None:
    """The torchvision schema shim and a dist-info registering the plugin's entry points."""
    shim_dir.mkdir(parents=True, exist_ok=True)
    (shim_dir / f"{TORCHVISION_SHIM_MODULE}.py").write_text(TORCHVISION_SHIM)
    dist = shim_dir / PLUGIN_DIST
    dist.mkdir(exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm_ascend\nVersion: 0.0.0+composedtest\n")
    setup_py = plugin_tree / "setup.py"
    groups = plugin_entry_points(setup_py.read_text(), where=str(setup_py))
    (dist / "entry_points.txt").write_text(entry_points_txt(groups))


def test_env(shim_dir: Path, core_dir: Path, extra: Iterable[Path] = ()) -> dict[str, str]:
    """os.environ + TEST_ENV, with PYTHONPATH = shims, the installed core, then `extra`."""
    paths = [shim_dir, core_dir, *extra]
    return dict(os.environ, **TEST_ENV, PYTHONPATH=os.pathsep.join(str(p) for p in paths))


test_env.__test__ = False  # not a pytest test, despite the name

