"""Series variants the view tests share: a second pin set (p2) on the same upstreams, an entry
that upstream carries at p2 and a port only p2 carries."""

from __future__ import annotations

from pathlib import Path


def add_second_pin(world) -> None:
    """p2: the same upstream commits as p1; 0001 is merged upstream there (a recorded rule),
    0003 is left to p1 (`only-pins`)."""
    pins = world.project / "pins"
    (pins / "p2.yaml").write_text((pins / "p1.yaml").read_text().replace("default: true", "default: false"))
    series = world.project / "series.yaml"
    text = series.read_text()
    text = text.replace("    core-change: example/core#35536\n",
                        "    core-change: example/core#35536\n"
                        "    applied-upstream:\n"
                        "      - ref: \"example/plugin#10935\"\n"
                        f"        commit: {world.plugin_commits[-1]}\n"
                        "        rule: \"upstream-commit\"\n"
                        "        pins: [\"p2\"]\n")
    text = text.replace("    evidence: evidence/fast-path\n",
                        "    evidence: evidence/fast-path\n    only-pins: [\"p1\"]\n")
    series.write_text(text)


def set_lock(pin_file: Path, target: str, tree: str) -> None:
    """Write `tree:` into the target's mapping of a fixture pin file."""
    lines, out, inside = pin_file.read_text().splitlines(keepends=True), [], None
    for line in lines:
        if line.startswith("  ") and not line.startswith("    "):
            inside = line.strip().rstrip(":")
        if inside == target and line.strip().startswith("tree:"):
            continue
        out.append(line)
        if inside == target and line.strip().startswith("commit:"):
            out.append(f"    tree: {tree}\n")
    pin_file.write_text("".join(out))
