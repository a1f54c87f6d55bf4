"""New findings only: a finding already present at the baseline is not the series' break.

The baseline is the plugin as upstream ships it against the core it declares (its
release tag): what upstream's own maintainers pair and test. A finding the composed tree
shares with it, by kind, symbol and plugin file (line numbers move), is upstream's; only
the rest are new. Counted as multisets: one more of the same kind is new. Pure.
"""

from __future__ import annotations

from collections import Counter
from typing import Iterable


def key(finding) -> tuple[str, str, str, str]:
    return (finding.kind, finding.symbol, finding.plugin_path, finding.severity)


def new_findings(findings: Iterable, baseline: Iterable) -> list:
    """The findings that the baseline does not already hold, in their order."""
    left = Counter(key(f) for f in baseline)
    out = []
    for f in findings:
        k = key(f)
        if left[k] > 0:
            left[k] -= 1
        else:
            out.append(f)
    return out
