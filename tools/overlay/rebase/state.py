"""The state of a rebase in progress (.overlay/rebase.json) and each patch's plan.

The file is data, and may be anything by the time it is read back: `parse_state`
checks it against the exact schema `to_json` writes (every field present, of its type
and within its bounds, nothing else, and the names it lists naming plans it holds), in
this one place, before anything is done with it. `load_state` adds what needs the
checkout: the composed tree is the one the rebase itself would choose (build/NEW/TARGET),
and the state file is a regular file, not a link. A state that fails is one line naming
the file and what to do.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

from overlay import paths
from overlay.errors import OverlayError
from overlay.series.model import PATCH_NAME, PIN_NAME, TARGET_NAME

STATE = "rebase.json"  # under .overlay/
SHOWN = ".overlay/" + STATE

# What happened to each patch (the summary's words).
DROPPED, KEPT, REFRESHED, CONFLICTED, SKIPPED = "dropped", "kept", "refreshed", "conflicted", "skipped"
PORTED = "ported"
# What the rebase does with each patch at the start.
APPLY, DECIDE = "apply", "decide"  # (and DROPPED): decide = superseded upstream, ask the user


@dataclass
class PatchPlan:
    patch: str
    drift: str  # the drift class at REF, with its rule: "merged (reverse)", "fuzz"
    detail: str
    action: str  # dropped | apply | decide (superseded upstream: drop, or port on top)
    overlap: list[str] = field(default_factory=list)  # one line per upstream commit
    applied_upstream: dict | None = None  # what series.yaml records for a dropped patch
    upstream_version: dict | None = None  # upstream's own version, if drift saw one
    outcome: str = ""  # kept | refreshed | conflicted | skipped | dropped | ported (at the end)
    why: str = ""
    note: str = ""  # why a patch upstream carries is kept all the same (the pairing)
    ported_as: list[str] = field(default_factory=list)  # the new entries that port it
    split_as: str | None = None  # the new pin set's own version of it (other pin sets keep theirs)


@dataclass
class RebaseState:
    old_pin: str
    new_pin: str
    target: str
    ref: str
    head: str
    git_dir: str  # where drift read upstream history (its objects serve git am -3)
    work: str  # the composed tree being rebased
    pin_text: str  # pins/NEW.yaml, written at the end
    plans: list[PatchPlan]
    apply_order: list[str]  # patches handed to git am, in order
    conflicts: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    # targets moved along without patches of their own (core to a release archive):
    # composed and locked at the end
    others: list[str] = field(default_factory=list)
    moves: dict[str, str] = field(default_factory=dict)  # target -> where it moved, in words
    mirror: str | None = None  # --mirror (or OVERLAY_MIRROR) at the start: the end composes from it too
    decisions: list[str] = field(default_factory=list)  # superseded patches still to decide
    decision_base: str | None = None  # HEAD when the rebase stopped for the first of them
    ports: dict[str, list[str]] = field(default_factory=dict)  # patch -> its port commits
    timings: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    waited: float = 0.0  # seconds stopped for the maintainer (conflicts, decisions)
    stopped_at: float | None = None  # when the rebase last stopped (time.time())
    owner: str = ""  # the nonce of the marker the rebase put in the composed tree's .git/

    def plan(self, patch: str) -> PatchPlan:
        return next(p for p in self.plans if p.patch == patch)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "RebaseState":
        return parse_state(text)


# ----------------------------------------------------------------------------- the schema

STATE_MAX = 32 << 20  # bytes of the whole file
_TEXT_MAX = 256 << 10  # characters of one text (a drift detail, an overlap line, a reason)
_PIN_TEXT_MAX = 1 << 20  # the pin file (the YAML loader's own cap)
_ITEMS_MAX = 100_000  # entries of one list or mapping
_NAME_MAX = 128
_SECONDS_MAX = 1e12

_COMMIT = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")  # SHA-1 or SHA-256, in full
_NONCE = re.compile(r"[0-9a-f]{16}")
_ONE_LINE = re.compile(r"[^\x00-\x1f\x7f]+")  # printable, one line


class StateProblem(ValueError):
    """Where in the document and what is wrong (pure: `parse_state` raises it)."""

    def __init__(self, where: str, what: str) -> None:
        super().__init__(f"{where} {what}" if where else what)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _kind(value: Any) -> str:
    return {type(None): "null", bool: "true/false", int: "a number", float: "a number",
            str: "text", list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


Check = Callable[[Any, str], Any]


def _text(limit: int = _TEXT_MAX, pattern: re.Pattern | None = None, what: str = "text") -> Check:
    def check(value: Any, where: str) -> str:
        if not isinstance(value, str):
            raise StateProblem(where, f"is {_kind(value)}, not {what}")
        if len(value) > limit:
            raise StateProblem(where, f"is longer than {limit} characters")
        if "\x00" in value or (pattern is not None and not pattern.fullmatch(value)):
            raise StateProblem(where, f"{_show(value)} is not {what}")
        return value
    return check


def _name(pattern: re.Pattern, what: str, limit: int = _NAME_MAX) -> Check:
    return _text(limit, pattern, what)


_PIN = _name(PIN_NAME, "a pin set name")
_TARGET = _name(TARGET_NAME, "a target name")
_PATCH = _name(PATCH_NAME, "a patch file name", 255)
_SHA = _text(64, _COMMIT, "a full commit id")
_LINE = _text(4096, _ONE_LINE, "one line of text")
_FREE = _text()


def _optional(check: Check) -> Check:
    def optional(value: Any, where: str) -> Any:
        return None if value is None else check(value, where)
    return optional


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise StateProblem(where, f"is {_kind(value)}, not a number of seconds")
    if not math.isfinite(value) or not 0 <= value <= _SECONDS_MAX:
        raise StateProblem(where, f"{_show(value)} is not a number of seconds")
    return float(value)


def _list(item: Check, *, unique: bool = False) -> Check:
    def check(value: Any, where: str) -> list:
        if not isinstance(value, list):
            raise StateProblem(where, f"is {_kind(value)}, not a list")
        if len(value) > _ITEMS_MAX:
            raise StateProblem(where, f"has more than {_ITEMS_MAX} entries")
        out = [item(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if unique and len(set(out)) != len(out):
            raise StateProblem(where, "names an entry twice")
        return out
    return check


def _mapping(key: Check, item: Check) -> Check:
    def check(value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise StateProblem(where, f"is {_kind(value)}, not a mapping")
        if len(value) > _ITEMS_MAX:
            raise StateProblem(where, f"has more than {_ITEMS_MAX} entries")
        return {key(k, f"{where} key"): item(v, f"{where}[{k!r}]" if len(k) < 40 else f"{where}[...]")
                for k, v in value.items()}
    return check


def _record(required: dict[str, Check], optional: dict[str, Check] | None = None) -> Check:
    """A mapping of exactly these fields (those of `optional` may be left out)."""
    optional = optional or {}

    def check(value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise StateProblem(where, f"is {_kind(value)}, not a mapping")
        unknown = [k for k in value if k not in required and k not in optional]
        if unknown:
            raise StateProblem(where, f"has an unknown field {_show(unknown[0])}")
        missing = [k for k in required if k not in value]
        if missing:
            raise StateProblem(where, f"lacks the field '{missing[0]}'")
        both = {**required, **optional}
        return {k: both[k](v, f"{where}.{k}" if where else k) for k, v in value.items()}
    return check


def _one_of(*words: str) -> Check:
    def check(value: Any, where: str) -> str:
        if value not in words:
            raise StateProblem(where, f"{_show(value)} is not one of {', '.join(map(repr, words))}")
        return value
    return check


_APPLIED = _record({"ref": _LINE}, {"commit": _optional(_SHA), "rule": _LINE})
_VERSION = _record({"ref": _LINE, "commit": _optional(_SHA)})
_PLAN_FIELDS = {
    "patch": _PATCH, "drift": _LINE, "detail": _FREE, "action": _one_of(DROPPED, APPLY, DECIDE),
    "overlap": _list(_FREE), "applied_upstream": _optional(_APPLIED),
    "upstream_version": _optional(_VERSION),
    "outcome": _one_of("", KEPT, REFRESHED, CONFLICTED, SKIPPED, DROPPED, PORTED),
    "why": _FREE, "note": _FREE, "ported_as": _list(_PATCH, unique=True),
    "split_as": _optional(_PATCH)}
_PATH = _text(4096, _ONE_LINE, "a path")
_STATE_FIELDS = {
    "old_pin": _PIN, "new_pin": _PIN, "target": _TARGET, "ref": _LINE, "head": _SHA,
    "git_dir": _PATH, "work": _PATH, "pin_text": _text(_PIN_TEXT_MAX), "plans": _list(_record(_PLAN_FIELDS)),
    "apply_order": _list(_PATCH, unique=True), "conflicts": _list(_PATCH, unique=True),
    "skipped": _list(_PATCH, unique=True), "others": _list(_TARGET, unique=True),
    "moves": _mapping(_TARGET, _FREE), "decisions": _list(_PATCH, unique=True),
    "decision_base": _optional(_SHA), "ports": _mapping(_PATCH, _list(_SHA)),
    "timings": _mapping(_LINE, _seconds), "waited": _seconds, "stopped_at": _optional(_seconds),
    "owner": _text(16, _NONCE, "a marker's nonce"), "mirror": _optional(_PATH)}
_SCHEMA = _record(_STATE_FIELDS)
# every field of the dataclasses is in the schema, and nothing else (a new field needs its check)
assert set(_STATE_FIELDS) == {f.name for f in fields(RebaseState)}
assert set(_PLAN_FIELDS) == {f.name for f in fields(PatchPlan)}


def _consistent(data: dict) -> None:
    """The names the state lists are of plans it holds (a missing one was a StopIteration)."""
    names = [p["patch"] for p in data["plans"]]
    if len(set(names)) != len(names):
        raise StateProblem("plans", "hold a patch twice")
    action = {p["patch"]: p["action"] for p in data["plans"]}
    if data["apply_order"] != [n for n in names if action[n] == APPLY]:
        raise StateProblem("apply_order", "is not the plans to apply, in their order")
    for key, among, what in (("conflicts", APPLY, "applied"), ("skipped", APPLY, "applied"),
                             ("decisions", DECIDE, "to decide"), ("ports", DECIDE, "to decide")):
        stray = [n for n in data[key] if action.get(n) != among]
        if stray:
            raise StateProblem(key, f"names {_show(stray[0])}, which is no plan {what}")
    if data["target"] in data["others"]:
        raise StateProblem("others", f"names the rebased target '{data['target']}'")


def parse_state(text: str) -> RebaseState:
    """The state in `text`, checked against the exact schema (pure); StateProblem if not."""
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise StateProblem("", "is nested deeper than any state overlay writes") from None
    except ValueError as exc:
        raise StateProblem("", f"is not JSON ({str(exc)[:80]})") from None
    data = _SCHEMA(data, "")
    _consistent(data)
    data["plans"] = [PatchPlan(**p) for p in data["plans"]]
    return RebaseState(**data)


def _no_constant(word: str):
    raise ValueError(f"{word} is no number")


# ----------------------------------------------------------------------------- the file

def pin_name_problem(name: str) -> str | None:
    """Why `name` cannot name a pin set (pins/NAME.yaml, build/NAME/), or None."""
    try:
        _PIN(name, "")
    except StateProblem as exc:
        return str(exc).strip()
    return None


class BadState(OverlayError):
    """The state file is there but is not one a rebase wrote (the one-line error)."""

    def __init__(self, why: str) -> None:
        super().__init__(f"the rebase state is not one overlay wrote: {why}", path=SHOWN,
                         hint="give up with `overlay rebase --abort` (it removes only what is "
                              "provably this rebase's), or delete the file")
        self.why = why


def bad_state(why: str) -> BadState:
    return BadState(why)


def state_path(root: Path) -> Path:
    return root / ".overlay" / STATE


def load_state(root: Path) -> RebaseState:
    path = state_path(root)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is None:
        raise OverlayError("no rebase is in progress", path=SHOWN,
                           hint="start one with overlay rebase --pin NAME --onto TARGET=REF")
    if not stat.S_ISREG(mode):
        raise bad_state("it is a symbolic link" if stat.S_ISLNK(mode) else f"it is {paths.file_kind(mode)}")
    try:
        raw = paths.read_capped(path, STATE_MAX)
    except paths.NotARegularFile as exc:
        raise bad_state(f"it is {exc.kind}") from None
    except OSError as exc:
        raise bad_state(f"it cannot be read ({exc.strerror})") from None
    if len(raw) > STATE_MAX:
        raise bad_state(f"it is larger than {STATE_MAX >> 20} MiB")
    try:
        state = parse_state(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise bad_state("it is not UTF-8") from None
    except StateProblem as exc:
        raise bad_state(str(exc)) from None
    where = _misplaced(root, state)
    if where:
        raise bad_state(where)
    return state


def _misplaced(root: Path, state: RebaseState) -> str | None:
    """Why the state's paths are not the ones a rebase of this checkout uses, or None."""
    expected = str(paths.composed_dir(root, state.new_pin, state.target))
    if state.work != expected:
        return f"work {_show(state.work)} is not the composed tree of pin set '{state.new_pin}' ({expected})"
    if not os.path.isabs(state.git_dir) or os.path.normpath(state.git_dir) != state.git_dir:
        return f"git_dir {_show(state.git_dir)} is not an absolute, normal path"
    return None


def save_state(root: Path, state: RebaseState) -> None:
    path = state_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = state.to_json()
    try:
        parse_state(text)  # never write a state this very module would refuse
    except StateProblem as exc:
        raise OverlayError(f"the rebase state cannot be recorded: {exc}", path=SHOWN,
                           hint="report it with the command you ran") from None
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)  # a link there is replaced, never written through
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    tmp.replace(path)
