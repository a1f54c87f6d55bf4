"""Which package index the user configured, read as data (pip is never imported or run).

The sources, highest precedence first, as pip and uv read them:
  1. environment: PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS, PIP_NO_INDEX, PIP_CERT;
     then uv's UV_DEFAULT_INDEX / UV_INDEX_URL, UV_INDEX / UV_EXTRA_INDEX_URL, UV_FIND_LINKS,
     UV_NO_INDEX (a `uv venv` has no pip, and no pip.conf either);
  2. pip's configuration files, in pip's override order (pip/_internal/configuration.py:
     GLOBAL, USER, SITE, then the file named by PIP_CONFIG_FILE; PIP_CONFIG_FILE=os.devnull
     loads none), sections [global] then [download];
  3. where no index-url is set (and no-index is not), pip's own built-in default index, as
     pip would use it, read as data from the installed pip's source (pip/_internal/models/
     index.py: `PyPI = PackageIndex("<url>", ...)`): the tool names no registry host of its
     own. Without an installed pip, and with none of the above, no index is searched and the
     fetch says, in one line, what to set.
"""

from __future__ import annotations

import ast
import configparser
import importlib.util
import os
import urllib.parse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from overlay.errors import redact

_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class IndexConfig:
    """Where to look for an sdist: simple-API index URLs, then find-links folders/pages."""

    index_urls: tuple[str, ...]
    find_links: tuple[str, ...] = ()
    cert: str | None = None  # a CA bundle for https (pip's `cert`)
    origin: dict = field(default_factory=dict, compare=False)  # setting -> where it came from

    def describe(self) -> str:
        """Where it looks, credentials redacted (for progress and error lines)."""
        places = [*self.index_urls, *(f"find-links {f}" for f in self.find_links)]
        return redact(", ".join(places)) if places else "no index (no-index, no find-links)"


def pip_config_files(env: Mapping[str, str], home: Path, prefix: Path) -> list[Path]:
    """pip's configuration files in its override order (later ones win), as on POSIX."""
    named = env.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return []
    xdg_dirs = [d for d in env.get("XDG_CONFIG_DIRS", "/etc/xdg").split(os.pathsep) if d]
    files = [Path(d) / "pip" / "pip.conf" for d in xdg_dirs] + [Path("/etc/pip.conf")]
    if not (named and Path(named).exists()):  # pip skips the user files when the named one exists
        xdg_home = env.get("XDG_CONFIG_HOME") or str(home / ".config")
        files += [home / ".pip" / "pip.conf", Path(xdg_home) / "pip" / "pip.conf"]
    files.append(prefix / "pip.conf")
    if named:
        files.append(Path(named))
    return files


def _split(value: str, commas: bool = False) -> list[str]:
    parts = value.replace(",", " ").split() if commas else value.split()
    return [p for p in parts if p]


def _uv_index(value: str) -> list[str]:
    # UV_INDEX entries may be `name=url`; a URL itself never has `=` before `://`.
    out = []
    for item in value.split():
        name, sep, url = item.partition("=")
        out.append(url if sep and "://" not in name else item)
    return out


def _from_files(files: list[Path]) -> dict[str, tuple[str, str]]:
    """key -> (value, file) from pip.conf files; later files and [download] win."""
    found: dict[str, tuple[str, str]] = {}
    for path in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:  # absent or unreadable: pip ignores it too
            continue
        parser = configparser.RawConfigParser(strict=False, interpolation=None)
        try:
            parser.read_string(text, source=str(path))
        except configparser.Error:
            continue  # pip would refuse; we only look for an index, so skip it
        for section in ("global", "download"):
            if parser.has_section(section):
                for key, value in parser.items(section):
                    found[key.replace("_", "-")] = (value, str(path))
    return found


def pip_default_index(pip_dir: Path | None = None) -> str | None:
    """The simple-API URL of pip's built-in default index, read from pip's own source as data
    (pip is neither imported nor run), or None when no pip is installed or its source does
    not say. `pip_dir`: the pip package folder (found without importing it by default)."""
    if pip_dir is None:
        try:
            spec = importlib.util.find_spec("pip")  # locates the package; runs none of it
        except (ImportError, ValueError):
            return None
        if spec is None or not spec.origin:
            return None
        pip_dir = Path(spec.origin).parent
    try:
        tree = ast.parse((pip_dir / "_internal" / "models" / "index.py").read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError, ValueError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "PyPI" for t in node.targets)
                and isinstance(node.value, ast.Call) and node.value.args
                and isinstance(node.value.args[0], ast.Constant) and isinstance(node.value.args[0].value, str)):
            url = node.value.args[0].value
            if urllib.parse.urlsplit(url).scheme in ("https", "http"):
                return urllib.parse.urljoin(url, "simple")
    return None


def read_index_config(env: Mapping[str, str] | None = None, home: Path | None = None,
                      prefix: Path | None = None,
                      default_index: Callable[[], str | None] = pip_default_index) -> IndexConfig:
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    prefix = Path(sys.prefix) if prefix is None else prefix
    files = _from_files(pip_config_files(env, home, prefix))
    origin: dict[str, str] = {}

    def pick(env_names: tuple[str, ...], file_key: str | None) -> str | None:
        for name in env_names:
            if env.get(name, "").strip():
                origin[file_key or name] = name
                return env[name]
        if file_key and file_key in files:
            origin[file_key] = files[file_key][1]
            return files[file_key][0]
        return None

    no_index = (pick(("PIP_NO_INDEX", "UV_NO_INDEX"), "no-index") or "").strip().lower() in _TRUE
    main = pick(("PIP_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX_URL"), "index-url")
    if main is None and not no_index:
        main = default_index()  # pip's own default, as pip itself would search it
        if main:
            origin["index-url"] = "pip's built-in default"
    extra_env = [_split(env.get("PIP_EXTRA_INDEX_URL", "")), _uv_index(env.get("UV_INDEX", "")),
                 _split(env.get("UV_EXTRA_INDEX_URL", ""))]
    extra = [u for part in extra_env for u in part]
    if extra:
        origin["extra-index-url"] = "environment"
    elif "extra-index-url" in files:
        extra = _split(files["extra-index-url"][0])
        origin["extra-index-url"] = files["extra-index-url"][1]
    links_env = _split(env.get("PIP_FIND_LINKS", "")) + _split(env.get("UV_FIND_LINKS", ""), commas=True)
    links = links_env or (_split(files["find-links"][0]) if "find-links" in files else [])
    if links:
        origin["find-links"] = "environment" if links_env else files["find-links"][1]
    cert = pick(("PIP_CERT",), "cert")
    if no_index:
        indexes: list[str] = []
    else:
        indexes = [u.strip() for u in ([main] if main else []) + extra if u.strip()]
    return IndexConfig(tuple(dict.fromkeys(indexes)), tuple(dict.fromkeys(links)),
                       cert.strip() if cert else None, origin)
