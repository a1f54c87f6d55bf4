"""The trees of upstream's own pairing for a pin set: its plugin without the series, and
the core release that plugin declares (`.github/vllm-release-tag.commit`, or in releases
before 0.21 the Dockerfile's `ARG VLLM_TAG=`). The gate's baseline (`overlay gate
--baseline declared`): what upstream ships is not the series'."""

from __future__ import annotations

import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from overlay import paths
from overlay.errors import OverlayError
from overlay.series.model import ArchiveSource, load_pin
from overlay.trees import archive as archive_mod
from overlay.trees import sources


DECLARED_MAX = 4096  # a release tag file holds one tag
DOCKERFILE_MAX = 256 * 1024  # the plugin's Dockerfile is a few KiB
# The tag the plugin's image clones core at; only a release version counts (a branch or a
# build argument declares no release).
def _arg_release(names: str) -> re.Pattern:
    """`ARG <one of names>=vX.Y.Z` on a line of its own: only a release version counts."""
    return re.compile(r"^[ \t]*ARG[ \t]+(?:" + names + r")[ \t]*=[ \t]*"
                      r"v?([0-9]+(?:\.[0-9]+){1,3}(?:(?:rc|\.post)[0-9]+)?)[ \t]*$", re.MULTILINE)


_DOCKER_TAG = _arg_release("VLLM_TAG")


def _read_in_tree(plugin_tree: Path, relative: str, limit: int) -> str | None:
    try:
        raw = paths.read_capped(plugin_tree / relative, limit, within=plugin_tree)
    except (OSError, paths.NotARegularFile, paths.OutsideTree):
        return None
    return None if len(raw) > limit else raw.decode("utf-8", "replace")


# Folders where a plugin keeps the images it publishes (vllm-gaudi: `.cd/Dockerfile.*`, each
# cloning core at `ARG VLLM_PROJECT_COMMIT=v0.24.0`); a few files each, read capped.
_IMAGE_FOLDERS = (".cd", "docker")
_IMAGES_MAX = 32
_IMAGE_TAG = _arg_release("VLLM_TAG|VLLM_PROJECT_COMMIT")


def _image_folder_release(plugin_tree: Path) -> str | None:
    """The one release every image under the plugin's image folders clones core at; None when
    none names a release or two name different ones. Links and non-folders are not followed."""
    found: set[str] = set()
    for folder in _IMAGE_FOLDERS:
        where = plugin_tree / folder
        if where.is_symlink() or not where.is_dir():
            continue
        names = sorted(p.name for p in where.iterdir() if p.name.startswith("Dockerfile"))[:_IMAGES_MAX]
        for name in names:
            text = _read_in_tree(plugin_tree, f"{folder}/{name}", DOCKERFILE_MAX)
            found.update(_IMAGE_TAG.findall(text) if text else ())
    return found.pop() if len(found) == 1 else None


# The install script at the tree's top that a plugin without images or a release tag file
# installs core with (vllm-metal: `VLLM_VERSION="0.27.1"`, before that `local vllm_v="0.25.1"`):
# a shell assignment of a literal release to a variable named for core's version, on a line
# of its own. A value built from other variables or a branch declares nothing.
INSTALL_SCRIPT = "install.sh"
_SCRIPT_RELEASE = re.compile(
    r"^[ \t]*(?:(?:local|export|readonly|declare)[ \t]+)?vllm_(?:version|v|tag|release)[ \t]*=[ \t]*"
    r"([\"']?)v?([0-9]+(?:\.[0-9]+){1,3}(?:(?:rc|\.post)[0-9]+)?)\1[ \t]*(?:#[^\n]*)?$",
    re.MULTILINE | re.IGNORECASE)


def _install_script_release(plugin_tree: Path) -> str | None:
    """The one release the plugin's install script assigns to core's version variable; None
    when it names none, or two different ones."""
    text = _read_in_tree(plugin_tree, INSTALL_SCRIPT, DOCKERFILE_MAX)
    found = {m.group(2) for m in _SCRIPT_RELEASE.finditer(text)} if text else set()
    return found.pop() if len(found) == 1 else None


def declared_release(plugin_tree: Path) -> str | None:
    """The core release the plugin tree declares, read as data (regular files inside the
    tree, capped): its `.github/vllm-release-tag.commit`, else, for releases older than that
    file, the Dockerfile's `ARG VLLM_TAG=vX.Y.Z`, else the one release the images in its
    image folders clone core at (vllm-gaudi), else the one its install script installs
    (vllm-metal). None when none declares one."""
    text = _read_in_tree(plugin_tree, ".github/vllm-release-tag.commit", DECLARED_MAX)
    if text is not None and text.strip():
        return text.split()[0].lstrip("v")
    docker = _read_in_tree(plugin_tree, "Dockerfile", DOCKERFILE_MAX)
    match = _DOCKER_TAG.search(docker) if docker else None
    return match.group(1) if match else (_image_folder_release(plugin_tree)
                                         or _install_script_release(plugin_tree))


PYPROJECT_MAX = 256 * 1024
_REQUIRES_DIST = re.compile(r"^Requires-Dist:[ \t]*(.+?)[ \t]*$", re.MULTILINE)


def _wheel_metadata(plugin_tree: Path) -> list[str]:
    """`<name>-<version>.dist-info/METADATA` at the tree's top: where a wheel keeps PKG-INFO."""
    try:
        return [f"{p.name}/METADATA" for p in plugin_tree.iterdir()
                if p.name.endswith(".dist-info") and not p.is_symlink() and p.is_dir()]
    except OSError:
        return []


def declared_requirement(plugin_tree: Path, core: str = "vllm") -> str | None:
    """The core versions the plugin tree's pyproject.toml admits, as its `[project]
    dependencies` spell them (`>=0.17.1,<0.17.2`), else as PKG-INFO's unconditional
    `Requires-Dist` does (a wheel's `*.dist-info/METADATA` where there is no PKG-INFO), read
    as data; None when neither names one or the file does not
    parse. Plugins without a release tag file (vllm-spyre, vllm-rbln) declare their core
    this way."""
    import tomllib

    from packaging.requirements import InvalidRequirement, Requirement

    text = _read_in_tree(plugin_tree, "pyproject.toml", PYPROJECT_MAX)
    deps: object = []
    if text:
        try:
            deps = tomllib.loads(text).get("project", {}).get("dependencies", [])
        except (tomllib.TOMLDecodeError, AttributeError):
            deps = []
    if not deps:  # an archive without pyproject (a wheel, or made from one): its metadata's Requires-Dist
        meta = _read_in_tree(plugin_tree, "PKG-INFO", PYPROJECT_MAX)
        for info in ([] if meta else sorted(_wheel_metadata(plugin_tree))):
            meta = _read_in_tree(plugin_tree, info, PYPROJECT_MAX)
            if meta:
                break
        # the headers only: a long description follows the first blank line
        deps = _REQUIRES_DIST.findall(meta.replace("\r\n", "\n").split("\n\n", 1)[0]) if meta else []
    for dep in deps if isinstance(deps, list) else []:
        try:
            req = Requirement(str(dep))
        except InvalidRequirement:
            continue
        if req.name.lower() == core and str(req.specifier) and "extra" not in str(req.marker or ""):
            # `vllm==0.13.0+cpu` is a local build of 0.13.0: the release is what the mirror has
            return ",".join(str(s).split("+")[0] for s in req.specifier)
    return None



@contextmanager
def declared_pairing(root: Path, pin_name: str, composed_core: Path, mirror: Path | None,
                     progress=None) -> Iterator[tuple[Path, Path, str]]:
    """(upstream's plugin tree at the pin, the declared core's tree, words); the plugin is
    checked out by git into a scratch folder removed on exit."""
    pin = load_pin(root, pin_name)
    target = pin.target("plugin")
    obtained = sources.obtain(root, target, mirror, progress)
    (root / ".overlay").mkdir(exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="baseline-", dir=root / ".overlay"))
    try:
        archive_mod.checkout_tree(obtained.git_dir, obtained.commit, scratch / "plugin",
                                  {"GIT_INDEX_FILE": str(scratch / "index")})
        version = declared_release(scratch / "plugin")
        if version is None:
            raise OverlayError(f"pin set {pin_name}'s plugin declares no core release "
                               "(.github/vllm-release-tag.commit or the Dockerfile's VLLM_TAG): there is no declared pairing to compare with",
                               hint="drop --baseline, or gate against that release with --against")
        core_src = pin.target("core").source if "core" in pin.target_names else None
        core_name = core_src.name if isinstance(core_src, ArchiveSource) else "vllm"
        if isinstance(core_src, ArchiveSource) and core_src.version == version:
            core_dir = composed_core
        else:
            core_dir = sources.release_tree(root, mirror, core_name, version, progress)
        where = (f"PyPI {target.source.requirement}" if isinstance(target.source, ArchiveSource)
                 else f"{obtained.commit[:12]}")
        yield scratch / "plugin", core_dir, f"upstream's plugin {where} without the series, against {core_name}=={version} (its release)"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
