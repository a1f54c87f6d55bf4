"""The trees of upstream's own pairing for a pin set: its plugin without the series, and
the core release that plugin declares (`.github/vllm-release-tag.commit`). The gate's
baseline (`overlay gate --baseline declared`): what upstream ships is not the series'."""

from __future__ import annotations

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


def declared_release(plugin_tree: Path) -> str | None:
    """The core release the plugin tree declares (its `.github/vllm-release-tag.commit`),
    read as data: a regular file inside the tree, capped; None when absent or unreadable."""
    try:
        raw = paths.read_capped(plugin_tree / ".github" / "vllm-release-tag.commit", DECLARED_MAX,
                                within=plugin_tree)
    except (OSError, paths.NotARegularFile, paths.OutsideTree):
        return None
    text = raw[:DECLARED_MAX].decode("utf-8", "replace").strip()
    return text.split()[0].lstrip("v") if text else None


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
                               "(.github/vllm-release-tag.commit): there is no declared pairing to compare with",
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
