"""Evidence toolkit: preregistered A/B protocols, orchestration, paired-start statistics.

Modules, one job each:
  protocol     load and validate evidence/<claim>/protocol.yaml (+ deviations.yaml)
  plan         the balanced interleaved run order
  bounded      regular-file, size and JSON-depth checks for every file read from a results folder
  results      read `vllm bench serve --save-result --save-detailed` JSON files
  stats        paired-start intervals: t on log pair ratios at few starts, cluster bootstrap
               from 20 pairs, sign-flip p (pure, vectorised numpy)
  decide       three-way decisions from intervals and the protocol's thresholds
  analyze      per-variant summaries, deltas, decisions, deviation checks
  report       Markdown / JSON rendering
  plots        PNG figures (matplotlib, Agg)
  trees        compose each variant's (pin, series subset) for its server (overlay.trees.compose)
  orchestrate  `overlay bench ab`: real server starts, client runs, resume
  profiler     Ascend profiler statistics CSV -> per-step counters
  tails        per-phase tail diagnosis (seed 004)
  reported     figures reported by a source (packets without raw data)
  ledger       tuning ledgers whose steps are re-runnable variants
  e2e          `overlay evidence-e2e`: the toolkit on the real vLLM engine on CPU

The commands are overlay.commands.evidence (`overlay evidence ...`, `overlay bench ab`)
and overlay.commands.evidence_e2e.
May import: the foundation, overlay.series, overlay.trees and
overlay.testing; no other subsystem.
numpy and matplotlib come from the `evidence` extra.
"""
