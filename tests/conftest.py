from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fixtures import COMPOSER, World, make_world  # noqa: E402


def pytest_configure(config):
    # A shell without job control (`make test &` in a script, a CI step in the
    # background) starts its jobs with SIGINT ignored, and every child inherits that:
    # the Ctrl-C tests' overlay processes would then never see their Ctrl-C. Tests run
    # as from a terminal, where Ctrl-C is delivered.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("OVERLAY_MIRROR"):
        return
    skip = pytest.mark.skip(reason="needs a real upstream mirror: set OVERLAY_MIRROR")
    for item in items:
        if "mirror" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path_factory):
    """Tests never see the developer's mirror, cache or identity."""
    for var in ("OVERLAY_MIRROR", "OVERLAY_CACHE", "OVERLAY_ROOT", "OVERLAY_FAULT_INJECT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GIT_COMMITTER_NAME", COMPOSER[0])
    monkeypatch.setenv("GIT_COMMITTER_EMAIL", COMPOSER[1])


@pytest.fixture(scope="session")
def _world_template(tmp_path_factory) -> World:
    return make_world(tmp_path_factory.mktemp("template"))


@pytest.fixture
def world(_world_template: World, tmp_path: Path) -> World:
    """A fresh copy of the synthetic upstreams, mirror and project for each test."""
    src = _world_template
    dst = tmp_path / "w"
    shutil.copytree(src.tmp, dst, symlinks=True)
    # Pin URLs point at the template's upstreams; repoint them at this copy.
    for pin in (dst / "project" / "pins").glob("*.yaml"):
        pin.write_text(pin.read_text().replace(str(src.tmp), str(dst)))
    rel = lambda p: dst / p.relative_to(src.tmp)  # noqa: E731
    return World(dst, rel(src.core), rel(src.plugin), src.core_commits, src.plugin_commits,
                  rel(src.project), rel(src.mirror))


@pytest.fixture
def run(capsys):
    """Run the CLI in-process: returns (exit code, stdout, stderr)."""
    from overlay.cli import main

    def _run(*argv: str, root: Path | None = None):
        args = ([f"--root={root}"] if root else []) + [str(a) for a in argv]
        code = main(args)
        out = capsys.readouterr()
        return code, out.out, out.err

    return _run


@pytest.fixture
def mirror_dir() -> Path:
    """The real upstream mirror (tests marked `mirror` only run when it is set)."""
    value = os.environ.get("OVERLAY_MIRROR_REAL") or _REAL_MIRROR
    assert value, "mirror tests need OVERLAY_MIRROR"
    return Path(value)


_REAL_MIRROR = os.environ.get("OVERLAY_MIRROR")  # read before the autouse fixture hides it


# Generated inputs (hypothesis): a few seconds a property in `make test`, more under
# OVERLAY_HYPOTHESIS_PROFILE=long; the example database stays out of the checkout.
try:
    from hypothesis import HealthCheck, settings
    from hypothesis.database import InMemoryExampleDatabase
except ImportError:  # the test extra installs it; without it the property tests fail to import
    pass
else:
    settings.register_profile("default", max_examples=60, deadline=None, database=InMemoryExampleDatabase(),
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    settings.register_profile("long", max_examples=2000, deadline=None, database=InMemoryExampleDatabase(),
                              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    settings.load_profile(os.environ.get("OVERLAY_HYPOTHESIS_PROFILE", "default"))
