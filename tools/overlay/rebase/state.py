"""The state of a rebase in progress (.overlay/rebase.json) and each patch's plan."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from overlay.errors import OverlayError

STATE = "rebase.json"  # under .overlay/

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

    def plan(self, patch: str) -> PatchPlan:
        return next(p for p in self.plans if p.patch == patch)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "RebaseState":
        data = json.loads(text)
        data["plans"] = [PatchPlan(**p) for p in data["plans"]]
        return cls(**data)


def state_path(root: Path) -> Path:
    return root / ".overlay" / STATE


def load_state(root: Path) -> RebaseState:
    path = state_path(root)
    if not path.is_file():
        raise OverlayError("no rebase is in progress", path=".overlay/" + STATE,
                           hint="start one with overlay rebase --pin NAME --onto TARGET=REF")
    try:
        return RebaseState.from_json(path.read_text(encoding="utf-8"))
    except (ValueError, TypeError, KeyError) as exc:
        raise OverlayError(f"the rebase state is unreadable ({exc})", path=".overlay/" + STATE,
                           hint="remove it and the composed tree it names, then start again") from None


def save_state(root: Path, state: RebaseState) -> None:
    path = state_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(state.to_json(), encoding="utf-8")
    tmp.replace(path)
