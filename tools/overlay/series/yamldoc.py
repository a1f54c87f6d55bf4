"""Load YAML keeping line numbers, so every validation error can name file:line:field.

Every YAML file the tool reads (series, pins, evidence protocols, deviations, the
gate allowlist, the ledger) goes through `load`, which bounds the work a hostile
file can cause: the size is capped and aliases are refused (an alias bomb of a
few hundred bytes expands to gigabytes), so parsing is linear in at most
MAX_BYTES of input.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from overlay import paths
from overlay.errors import OverlayError, quoted, shortened


@dataclass(frozen=True)
class Node:
    """A YAML value with the (1-based) line it starts on."""

    value: Any  # dict[str, Node] | list[Node] | scalar
    line: int


_PLAIN_TAGS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")

# The largest YAML input: the project's own files are a few KiB; a 50 MB series
# took 89 s to parse. Override with OVERLAY_YAML_MAX_BYTES for an unusual ledger.
MAX_BYTES = 1 << 20


def max_bytes() -> int:
    try:
        return int(os.environ.get("OVERLAY_YAML_MAX_BYTES", "")) or MAX_BYTES
    except ValueError:
        return MAX_BYTES


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases (`*name`) the moment it meets one."""

    def compose_node(self, parent, index):  # noqa: ANN001 - PyYAML's signature
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise OverlayError(f"YAML alias {quoted('*' + event.anchor)} is not allowed",
                               path=getattr(self, "overlay_path", None),
                               line=event.start_mark.line + 1,
                               hint="write the value out in full; aliases are refused so a "
                                    "small file cannot expand without bound")
        return super().compose_node(parent, index)


def _convert(node: yaml.Node, path: str) -> Node:
    line = node.start_mark.line + 1
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)) and node.tag not in _PLAIN_TAGS:
        raise OverlayError(f"YAML tag {quoted(node.tag)} is not allowed", path=path, line=line,
                           hint="write plain mappings, lists and values")
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Node] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise OverlayError("mapping keys must be plain strings", path=path,
                                   line=key_node.start_mark.line + 1)
            key = key_node.value
            if key in out:
                raise OverlayError(f"duplicate key {quoted(key)}", path=path,
                                   line=key_node.start_mark.line + 1,
                                   hint="each key may appear once")
            out[key] = _convert(value_node, path)
        return Node(out, line)
    if isinstance(node, yaml.SequenceNode):
        return Node([_convert(v, path) for v in node.value], line)
    # Scalars: let the safe constructor decide the type (int, bool, str, null).
    try:
        value = yaml.SafeLoader("").construct_object(node, deep=True)
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        # e.g. an impossible date such as 2026-02-30, which YAML types as a date
        raise OverlayError(f"bad value {quoted(node.value)}: {shortened(str(exc))}", path=path, line=line,
                           hint="quote it if it is meant as text") from None
    return Node(value, line)


def load(path: Path, display: str | None = None, limit: int | None = None) -> Node:
    """Parse `path`; a syntax error becomes one OverlayError line with its position.
    `limit`: a larger cap for a file known to be large (never below OVERLAY_YAML_MAX_BYTES)."""
    shown = display or str(path)
    limit = max_bytes() if limit is None else max(limit, max_bytes())
    try:
        try:
            raw = paths.read_capped(path, limit)
        except paths.NotARegularFile as exc:
            if exc.kind == "a directory":
                raise IsADirectoryError from None  # worded below, as for any directory
            kind = "a FIFO" if exc.kind == "a FIFO" else "a device"
            raise OverlayError(f"not a regular file ({kind}): expected a YAML file", path=shown) from None
        if len(raw) > limit:
            raise OverlayError(f"file is larger than {limit} bytes, the cap for YAML inputs",
                               path=shown, hint="the project's YAML files are a few KiB: check "
                                                "what wrote this one (OVERLAY_YAML_MAX_BYTES raises the cap)")
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise OverlayError("file not found", path=shown) from None
    except IsADirectoryError:
        raise OverlayError("is a directory, expected a YAML file", path=shown) from None
    except UnicodeDecodeError:
        raise OverlayError("not UTF-8 text", path=shown) from None
    except OSError as exc:
        raise OverlayError(f"cannot read: {exc.strerror}", path=shown) from None
    known = _PARSED.get((shown, text))
    if known is not None:
        return known
    node = _parse(text, shown)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[(shown, text)] = node
    return node


# One command reads series.yaml and the pin files many times over (a rebase: about a
# hundred loads, 7 s of parsing on the real series): the same text is parsed once. The
# Nodes are never modified by their readers; a changed file is a new key.
_PARSED: dict[tuple[str, str], Node] = {}
_PARSED_MAX = 64


def _parse(text: str, shown: str) -> Node:
    try:
        loader = _NoAliasLoader(text)
        loader.overlay_path = shown
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except RecursionError:
        raise OverlayError("nesting too deep", path=shown,
                           hint="see the README for the expected format") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        raise OverlayError(f"YAML syntax error: {problem}", path=shown,
                           line=(mark.line + 1) if mark else None,
                           hint="fix the YAML syntax") from None
    except yaml.YAMLError as exc:
        raise OverlayError(f"YAML error: {exc}", path=shown) from None
    if root is None:
        raise OverlayError("file is empty", path=shown, line=1,
                           hint="see the README for the expected format")
    try:
        return _convert(root, shown)
    except RecursionError:
        raise OverlayError("nesting too deep", path=shown,
                           hint="see the README for the expected format") from None


# ----------------------------------------------------------------------------- entry edits


def entry_block(lines: list[str], entry_line: int) -> tuple[int, int, int]:
    """(first line, one past the last, indent of the `- `) of the series entry that
    starts at `entry_line` (1-based)."""
    start = entry_line - 1
    while start > 0 and not lines[start].lstrip().startswith("-"):
        start -= 1
    item_indent = len(lines[start]) - len(lines[start].lstrip())
    end = start + 1
    while end < len(lines):
        stripped = lines[end].strip()
        indent = len(lines[end]) - len(lines[end].lstrip())
        if stripped and (indent <= item_indent):
            break
        end += 1
    return start, end, item_indent


def set_only_pins(text: str, entry_line: int, pins: list[str], by: str = "overlay rebase") -> str:
    """series.yaml text with the entry at `entry_line` carrying `only-pins: [...]` (an
    older one replaced); every other byte is kept."""
    lines = text.splitlines(keepends=True)
    start, end, item_indent = entry_block(lines, entry_line)
    block = [line for line in lines[start:end] if not line.strip().startswith("only-pins:")
             or line is lines[start]]
    gap: list[str] = []
    while block and not block[-1].strip():
        gap.insert(0, block.pop())
    if block and not block[-1].endswith("\n"):
        block[-1] += "\n"
    pad = " " * (item_indent + 2)
    block.append(f"{pad}only-pins: [{', '.join(json.dumps(p) for p in dict.fromkeys(pins))}]"
                 f"  # recorded by {by}: only these pin sets carry it\n")
    return "".join(lines[:start] + block + gap + lines[end:])
