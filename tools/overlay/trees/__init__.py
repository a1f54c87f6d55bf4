"""Trees: obtain upstream sources, compose them with the series, lock and refresh them.

sources (git mirror, archive or simple-index download of a pinned target), archive and
simple_index / index_config (fetching and unpacking safely), pypi_mirror (a mirror's pypi/
made again from benchmarks/mirror.yaml, `overlay mirror`), compose and composed (the
composed branch and its recorded state), lockfile (`overlay lock`), refresh
(`overlay refresh`), seriesswap (atomic replacement of series.yaml + patches/),
ownership and runlock (which process made what; one writer at a time).

May import: the foundation and overlay.series. Nothing above it (testing, the
subsystems, commands).
"""
