"""The CPU start-up smoke (`overlay smoke`, `make smoke PIN=NAME`).

`walker` runs inside the composed test environment (testenv) and walks the
plugin's start-up path step by step; `results` reads and judges what it wrote;
`run` composes the pin set, prepares the environment and runs the walker on the
composed plugin (and, with --baseline, on the pinned plugin without the series). The
command is overlay.commands.smoke.

May import: the foundation, overlay.series, overlay.trees and
overlay.testing; no other subsystem.
"""
