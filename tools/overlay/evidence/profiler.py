"""Mechanism counters from the Ascend profiler's exported statistics (CSV).

Supported input: the summary CSVs msprof / the torch_npu profiler export:
  api_statistic_*.csv   columns: [Device_id,] Level, API Name, Time(us), Count, Avg(us), ...
  acl_statistic_*.csv   columns: Name, Type, Time(%), Time(us), Count, Avg(us), ...
  op_statistic_*.csv    columns: [Device_id,] OP Type, Core Type, Count, ...
Any CSV with a name column (`API Name`, `Name`, `OP Type` or `Op Name`) and a
`Count` column works. Rows with the same name (several devices, levels or
threads) are summed. Names are matched exactly, or as a shell glob when they
contain * ? or [ (e.g. `*memcpy*device_to_host*`).

The seed's mechanism check: profile the same number of decode steps for each
variant, count D2H copies and event waits, divide by the steps.
"""

from __future__ import annotations

import csv
import fnmatch
from pathlib import Path

from overlay.errors import OverlayError
from overlay.evidence import bounded

NAME_COLUMNS = ("API Name", "Name", "OP Type", "Op Name")


def load_statistics(path: Path) -> dict[str, int]:
    """name -> total call count over all rows of one statistics CSV."""
    if not path.exists() and not path.is_symlink():
        raise OverlayError("profiler statistics file not found", path=str(path))
    text = bounded.read_text(path, limit=bounded.RESULT_MAX_BYTES, encoding="utf-8-sig")
    reader = csv.DictReader(text.splitlines())
    header = [h.strip() for h in (reader.fieldnames or [])]
    name_col = next((c for c in NAME_COLUMNS if c in header), None)
    if name_col is None or "Count" not in header:
        raise OverlayError("not a profiler statistics CSV: needs a name column "
                           f"({', '.join(NAME_COLUMNS)}) and a Count column", path=str(path), line=1,
                           hint="export api_statistic_*.csv (msprof --export) or op_statistic_*.csv")
    out: dict[str, int] = {}
    for lineno, row in enumerate(reader, 2):
        row = {(k or "").strip(): (v or "").strip() for k, v in row.items()}
        name = row.get(name_col, "")
        if not name:
            continue
        try:
            count = int(float(row["Count"]))
        except (ValueError, OverflowError):  # "abc", "nan", "inf"
            raise OverlayError(f"Count '{row['Count']}' is not a finite number", path=str(path),
                               line=lineno, hint="a call count is a whole number >= 0") from None
        if count < 0:
            raise OverlayError(f"Count {row['Count']} of '{name}' is negative", path=str(path),
                               line=lineno, hint="a call count is a whole number >= 0; re-export the statistics")
        out[name] = out.get(name, 0) + count
    return out


def count(table: dict[str, int], pattern: str) -> int:
    if any(ch in pattern for ch in "*?["):
        return sum(v for k, v in table.items() if fnmatch.fnmatchcase(k, pattern))
    return table.get(pattern, 0)


def per_step(files: dict[str, Path], names: tuple[str, ...], steps: int
             ) -> dict[str, dict[str, tuple[int, float]]]:
    """variant -> name -> (raw count, count per step)."""
    if steps < 1:
        raise OverlayError("--steps must be at least 1")
    out: dict[str, dict[str, tuple[int, float]]] = {}
    for variant, path in files.items():
        table = load_statistics(path)
        out[variant] = {n: (count(table, n), count(table, n) / steps) for n in names}
    return out


def unmatched(files: dict[str, Path], names: tuple[str, ...]) -> list[str]:
    """Names (or globs) that match no API/op in any file: likely a typo, not a zero count."""
    tables = [load_statistics(p) for p in files.values()]

    def hit(table: dict[str, int], pattern: str) -> bool:
        if any(ch in pattern for ch in "*?["):
            return any(fnmatch.fnmatchcase(k, pattern) for k in table)
        return pattern in table

    return [n for n in names if not any(hit(t, n) for t in tables)]
