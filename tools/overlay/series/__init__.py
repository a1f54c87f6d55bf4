"""What the repository declares: series.yaml, patches/, pins/ and their provenance.

model (series entries, pin sets, sources), yamldoc (line-tracked YAML), patchfile (patch
files), provenance (the upstream commits an entry names, checked against a mirror),
upstream (commit subjects and pull-request references), checks (`overlay check`).

May import: the foundation (overlay.errors, overlay.paths, overlay.gitcmd,
overlay.reporting) and the standard library / its libraries. Nothing above it.
"""
