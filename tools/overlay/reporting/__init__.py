"""The reporting layer: how the tool shows what it does, for people and for CI.

- `progress`: progress lines on a terminal (stderr) only; quiet with `--json` and when
  piped; no colour with `NO_COLOR` or `TERM=dumb`; one prefix, `overlay <command>: `.
- `table`: aligned plain-text tables (the terminal reports), wrapped to the terminal.
- `junit`: JUnit XML that validates against the common JUnit XSD (drift, gate).
- `files`: report files (`--markdown`, `--junit`): atomic, 0644, errors naming the report.
- `colour`: `FAILED` and `overlay: error:` in red where colour is on (`--color`).
- `manpage`: the man page, rendered from the CLI's own argparse parser.
- `printable`: untrusted text (upstream subjects, file names) made safe for a terminal.

Foundation package: it may import only the standard library and `overlay.errors`, and
it imports nothing above it. Subsystems (gate, drift, rebase, evidence, smoke) and the
commands use it; it knows none of them. No third-party library: each job is small, and
its output is pinned by tests (JUnit against the XSD in tests/reporting/).
"""

from overlay.reporting.progress import Progress, colour_allowed, is_terminal, progress
from overlay.reporting.text import printable

__all__ = ["Progress", "colour_allowed", "is_terminal", "printable", "progress"]
