"""`overlay evidence plan|analyze|counters|tails|ledger` and `overlay bench ab` (thin handlers)."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path

from overlay import EXTRA_HINT
from overlay.errors import OverlayError
from overlay.reporting import table

EXTRA = ("numpy", "matplotlib")  # the `evidence` extra (pyproject.toml)


def needs_evidence_extra(command: str):
    """The handler, saying in one line (exit 2) how to install the evidence extra when
    numpy or matplotlib is missing, wherever in the command it is first imported."""
    def wrap(func):
        @functools.wraps(func)
        def handler(args) -> int:
            try:
                return func(args)
            except ModuleNotFoundError as exc:
                missing = (exc.name or "").split(".")[0]
                if missing not in EXTRA:
                    raise
                raise OverlayError(f"overlay {command} needs {missing}, which is not installed",
                                   hint=EXTRA_HINT.format(extra="evidence")) from None
        return handler
    return wrap


def register(sub) -> None:
    ev = sub.add_parser("evidence", help="preregistered A/B protocols, analysis, counters, tails")
    evs = ev.add_subparsers(dest="evidence_command", metavar="SUBCOMMAND")
    ev.set_defaults(func=lambda a: (ev.print_help(sys.stderr), 2)[1])

    p = evs.add_parser("plan", help="print the exact run order of a protocol")
    p.add_argument("protocol", type=Path, help="protocol.yaml or its claim folder")
    p.add_argument("--json", action="store_true", help="the plan as JSON")
    p.set_defaults(func=needs_evidence_extra("evidence plan")(cmd_plan))

    a = evs.add_parser("analyze", help="deltas, paired-start intervals and decisions")
    a.add_argument("folder", type=Path, help="claim folder (protocol.yaml) or protocol.yaml")
    a.add_argument("--results", type=Path, help="results folder (default: <folder>)")
    a.add_argument("--out", type=Path, help="where analysis.md/.json and plots go "
                                            "(default: <results>/analysis; a reported-figures packet: <folder>/analysis)")
    a.add_argument("--no-plots", action="store_true", help="write analysis.md/.json only, no PNG plots")
    a.add_argument("--json", action="store_true", help="the decisions as JSON")
    a.set_defaults(func=needs_evidence_extra("evidence analyze")(cmd_analyze))

    c = evs.add_parser("counters", help="per-step counts from Ascend profiler statistics CSVs")
    c.add_argument("files", nargs="+", metavar="VARIANT=CSV",
                   help="a variant's profiler statistics CSV (op_statistic / api_statistic)")
    c.add_argument("--steps", type=int, required=True, help="decode steps profiled per variant")
    c.add_argument("--name", action="append", required=True,
                   help="API/op name or glob to count (repeatable)")
    c.add_argument("--json", action="store_true", help="the counts as JSON")
    c.set_defaults(func=needs_evidence_extra("evidence counters")(cmd_counters))

    t = evs.add_parser("tails", help="per-phase tail diagnosis of per-rank timing records")
    t.add_argument("records", type=Path, help="CSV round,rank,phase,ms or JSON Lines")
    t.add_argument("--compare", type=Path, help="records of a second variant")
    t.add_argument("--threshold-ms", type=float, default=5.0,
                   help="a step slower than this is a tail (default: %(default)s ms)")
    t.add_argument("--derive", action="append", default=[], metavar="NAME=A-B",
                   help="derived phase, e.g. excess=runner_run-device_wall")
    t.add_argument("--top", type=int, default=10, help="list this many slowest steps (default: %(default)s)")
    t.add_argument("--json", action="store_true", help="the tails as JSON")
    t.set_defaults(func=needs_evidence_extra("evidence tails")(cmd_tails))

    led = evs.add_parser("ledger", help="show a tuning ledger; emit a protocol for one step")
    led.add_argument("folder", type=Path, help="the claim folder holding the ledger")
    led.add_argument("--protocol-for", metavar="STEP", help="print the A/B protocol re-running this step")
    led.add_argument("--ladder-protocol", action="store_true",
                     help="print a ladder protocol re-running every kept step, rung k against rung k-1 "
                          "(`bench ab [--cluster ...]` runs it; its analysis is the computed ledger)")
    led.add_argument("--json", action="store_true", help="the ledger as JSON")
    led.set_defaults(func=needs_evidence_extra("evidence ledger")(cmd_ledger))

    b = sub.add_parser("bench", help="run benchmarks for real")
    bs = b.add_subparsers(dest="bench_command", metavar="SUBCOMMAND")
    b.set_defaults(func=lambda a: (b.print_help(sys.stderr), 2)[1])
    from overlay.commands.bench_suite import register_suite
    register_suite(bs)
    ab = bs.add_parser("ab", help="run a protocol: server starts, client runs, resumable")
    ab.add_argument("--protocol", type=Path, required=True, help="the protocol.yaml to run")
    ab.add_argument("--results", type=Path, help="results folder (default: the protocol's folder)")
    ab.add_argument("--max-runs", type=int, help="stop after this many new runs (resume later)")
    ab.add_argument("--mirror", type=Path, help="local mirror for composing the variants' trees "
                                                 "(default: $OVERLAY_MIRROR)")
    ab.add_argument("--cluster", metavar="ADDRESS|local",
                    help="run the protocol's blocks as Ray tasks on the cluster at HOST:PORT, or on a "
                         "local one (needs the cluster extra: pip install -e '.[cluster]')")
    ab.add_argument("--local-cards", type=int, metavar="N",
                    help="with --cluster local: the cards (the protocol's cards.resource) the local "
                         "cluster offers (default: what Ray detects)")
    ab.add_argument("--max-attempts", type=int, default=3, metavar="N",
                    help="with --cluster: how often a block lost with its worker or node is sent again")
    ab.add_argument("--json", action="store_true", help="what ran and what remains, as JSON")
    ab.set_defaults(func=needs_evidence_extra("bench ab")(cmd_bench_ab))


def _protocol(path: Path, root: Path):
    from overlay.evidence.protocol import load_protocol

    return load_protocol(path, root)


def cmd_plan(args) -> int:
    from overlay.evidence import orchestrate
    from overlay.evidence.plan import plan
    from overlay.evidence.trees import layout

    proto = _protocol(args.protocol, args.root)
    orchestrate.check_series(proto, args.root)
    runs = plan(proto)
    # Where `bench ab` (default results folder) composes each variant's trees.
    trees = layout(proto, args.root, proto.folder)
    argv = {v.name: orchestrate.server_argv(proto, v, trees.get(v.name)) for v in proto.variants}
    if args.json:
        print(json.dumps({"claim": proto.claim, "preregistered": proto.preregistered.isoformat(),
                          "runs": [{"position": r.position, "run": r.run_id, "variant": r.variant,
                                    "start": r.start, "scenarios": list(r.scenarios),
                                    "server_argv": argv[r.variant],
                                    "env": dict(proto.variant(r.variant).env)} for r in runs]}, indent=2))
        return 0
    print(f"# {proto.claim}: {len(runs)} server starts ({proto.starts} per variant, balanced interleaved)")
    print(f"# server CPUs {proto.server_cpus or 'NOT PINNED'}, client CPUs {proto.client_cpus or 'NOT PINNED'}")
    lines = table.render([(r.position, r.run_id, f"scenarios: {', '.join(r.scenarios)}") for r in runs],
                         align="r", indent=" ")
    under = " " * (1 + len(str(max((r.position for r in runs), default=0))) + 2)  # under the run id
    for line, r in zip(lines, runs):
        env = " ".join(f"{k}={val}" for k, val in proto.variant(r.variant).env)
        print(line)
        print(f"{under}server: {(env + ' ') if env else ''}{' '.join(argv[r.variant])}")
    return 0


def cmd_analyze(args) -> int:
    folder = args.folder if args.folder.is_dir() else args.folder.parent
    if args.folder.is_dir() and (folder / "ledger.yaml").is_file() and not (folder / "protocol.yaml").exists():
        raise OverlayError("this is a tuning ledger (ledger.yaml), not a claim with a protocol.yaml",
                           path=str(folder),
                           hint=f"show it with `overlay evidence ledger {folder}`; `overlay evidence ledger "
                                f"{folder} --protocol-for STEP` writes a protocol that re-runs one step")
    proto = _protocol(args.folder, args.root)
    results = args.results or folder
    if (folder / "reported.yaml").is_file() and args.results is None and not (folder / "runs").is_dir():
        return _analyze_reported(proto, folder, args)
    from overlay.evidence import analyze, report
    from overlay.evidence.protocol import load_deviations

    devs = load_deviations(folder, args.root)
    counters = folder / "counters"
    from overlay.evidence.orchestrate import terminal_progress, throttled

    a = analyze.analyze(proto, results, devs, counters if counters.is_dir() else None,
                        progress=throttled(terminal_progress(args.json)))
    out = args.out or results / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    plots: list[str] = []
    if not args.no_plots:
        from overlay.evidence import plots as plotmod

        plots = [p.name for p in plotmod.render_all(a, out)]
    md = report.render_markdown(a, plots)
    data = report.to_json(a, plots)
    if proto.ladder:  # a ladder campaign: its result is a ledger, computed
        from overlay.evidence import ledger as ledger_mod

        computed = ledger_mod.computed_ladder(a)
        data["ladder"] = computed
        md += "\n" + ledger_mod.render_computed_ladder(computed)
        import yaml

        (out / "ledger.yaml").write_text(yaml.safe_dump(computed, sort_keys=False, allow_unicode=True),
                                         encoding="utf-8")
    (out / "analysis.md").write_text(md, encoding="utf-8")
    (out / "analysis.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(report.decision_table(a.claims, report.rows_from_claims(a.claims)), end="")
        print(f"intervals: {report.interval_note(a)}")
        for note in a.notes:
            print(f"note: {note}")
        print(f"E2E latency: {a.e2el_source}")
        if a.engine:
            print(f"engine: {a.engine}")
        print(f"\nwrote {out / 'analysis.md'}, {out / 'analysis.json'}" +
              (f" and {len(plots)} plots" if plots else ""))
    return 0


def _analyze_reported(proto, folder: Path, args) -> int:
    """A packet of figures reported by a source: same decisions, same outputs as measured data."""
    from overlay.evidence import reported
    from overlay.evidence.protocol import load_deviations

    rep = reported.load_reported(folder, args.root)
    devs = load_deviations(folder, args.root)
    measured, measured_by = {}, None
    if (folder / "counters").is_dir():  # counts measured here decide their counters claims
        from overlay.evidence.analyze import decide_counter_claim

        measured_by = reported.load_measured(folder, args.root)
        measured = {c.name: decide_counter_claim(c, folder / "counters") for c in proto.claims
                    if c.kind == "counters"}
    decisions, rows = reported.decide_reported(proto, rep, measured, measured_by)
    md = reported.render(proto, rep, decisions, rows, devs)
    notes = [n for n in [reported.pin_deviation_note(proto, measured_by, devs)] if n]
    out = args.out or folder / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    plots: list[str] = []
    if measured and not args.no_plots:  # the counts measured here, as figures
        from overlay.evidence import plots as plotmod

        what = ", ".join(x for x in ((f"implementation {measured_by.implementation}" if measured_by else ""),
                                     (f"pin {measured_by.pin}" if measured_by and measured_by.pin else ""),
                                     (measured_by.device if measured_by else "")) if x)
        plots = [p.name for p in plotmod.counters(list(measured.values()), out,
                                                  f"{proto.claim}: counted here ({what or 'counters/'})")]
    md += "".join(f"\n- note: {n}" for n in notes) + ("\n" if notes else "")
    if plots:
        md += "\n## Plots (counts measured here)\n\n" + "".join(f"![{x}]({x})\n" for x in plots)
    data = {"claim": proto.claim, "status": rep.status, "source": rep.source,
            "decisions": [d.__dict__ for d in decisions], "rows": [r.__dict__ for r in rows],
            "deviations": [{"kind": d.kind, "run": d.run, "scenario": d.scenario, "reason": d.reason}
                           for d in devs], "notes": notes, "plots": plots}
    (out / "analysis.md").write_text(md, encoding="utf-8")
    (out / "analysis.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(md, end="")
        print(f"\nwrote {out / 'analysis.md'}, {out / 'analysis.json'}"
              + (f" and {len(plots)} plots of the counts measured here" if plots else
                 " (no plots: no raw data or counts here)"))
    return 0


def cmd_counters(args) -> int:
    from overlay.evidence import profiler

    files: dict[str, Path] = {}
    for item in args.files:
        if "=" not in item:
            raise OverlayError(f"'{item}' is not VARIANT=CSV", hint="e.g. baseline=api_statistic_base.csv")
        v, p = item.split("=", 1)
        files[v] = Path(p)
    table = profiler.per_step(files, tuple(args.name), args.steps)
    missing = profiler.unmatched(files, tuple(args.name))
    for n in missing:
        print(f"overlay: warning: --name {n} matches no API or op in any file (a typo? its count is 0)",
              file=sys.stderr)
    if args.json:
        print(json.dumps({"steps": args.steps, "counts": {v: {n: {"count": c, "per_step": s}
                                                              for n, (c, s) in d.items()}
                                                          for v, d in table.items()},
                          "unmatched": missing}, indent=2))
        return 0
    variants = list(table)
    print("| name | " + " | ".join(variants) + " |")
    print("| --- |" + " --- |" * len(variants))
    for n in args.name:
        cells = [f"{table[v][n][0]} ({table[v][n][1]:g}/step)" for v in variants]
        print(f"| {n} | " + " | ".join(cells) + " |")
    print(f"\n{args.steps} steps per variant")
    return 0


def cmd_tails(args) -> int:
    from overlay.evidence import tails

    def load(path: Path):
        ph = tails.load_records(path)
        for spec in args.derive:
            try:
                name, expr = spec.split("=", 1)
                a, b = expr.split("-", 1)
            except ValueError:
                raise OverlayError(f"--derive '{spec}' is not NAME=A-B",
                                   hint="e.g. --derive excess=runner_run-device_wall") from None
            ph = tails.derive(ph, name.strip(), a.strip(), b.strip())
        return ph

    a = load(args.records)
    stats = tails.phase_stats(a)
    outs = tails.outliers(a, args.threshold_ms)
    data: dict = {"threshold_ms": args.threshold_ms,
                  "phases": [s.__dict__ for s in stats],
                  "outliers": [o.__dict__ for o in outs]}
    if args.compare:
        b = load(args.compare)
        shifts, moved = tails.compare(a, b, args.threshold_ms)
        data["compare"] = {"phases": [s.__dict__ for s in shifts], "moved": [list(m) for m in moved]}
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print("| phase | n | p50 ms | p95 ms | p99 ms | max ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for s in stats:
        print(f"| {s.phase} | {s.n} | {s.p50:.3f} | {s.p95:.3f} | {s.p99:.3f} | {s.max:.3f} |")
    by_kind = {k: sum(o.kind == k for o in outs) for k in ("single-rank", "common")}
    print(f"\noutliers above the round median + {args.threshold_ms:g} ms: {by_kind['single-rank']} single-rank, "
          f"{by_kind['common']} common (round median above the phase median + threshold)")
    rows = [(o.phase, f"round {o.round}", f"rank {o.rank}" if o.rank is not None else "all ranks",
             f"{o.ms:.3f} ms", f"(reference {o.reference_ms:.3f} ms, +{o.ms - o.reference_ms:.3f})")
            for o in outs[: args.top]]
    for line in table.render(rows, align="lllr", indent="  "):
        print(line)
    if args.compare:
        print("\n| phase | outliers A | outliers B | p99 A ms | p99 B ms |\n| --- | --- | --- | --- | --- |")
        for s in data["compare"]["phases"]:
            print(f"| {s['phase']} | {s['outliers_a']} | {s['outliers_b']} | {s['p99_a']:.3f} | {s['p99_b']:.3f} |")
        moved = data["compare"]["moved"]
        print("\ntail moved: " + (", ".join(f"{f} -> {t}" for f, t in moved) if moved else "no"))
    return 0


def cmd_ledger(args) -> int:
    from overlay.evidence import ledger

    led = ledger.load_ledger(args.folder, args.root)
    if args.protocol_for is not None:
        print(ledger.protocol_yaml(led, args.protocol_for), end="")
        return 0
    if args.ladder_protocol:
        print(ledger.ladder_protocol_yaml(led), end="")
        return 0
    if args.json:
        print(json.dumps(ledger.to_json(led), indent=2))
        return 0
    print(ledger.render(led), end="")
    return 0


def cmd_bench_ab(args) -> int:
    from overlay import paths
    from overlay.evidence import orchestrate

    proto = _protocol(args.protocol, args.root)
    results = (args.results or proto.folder).resolve()

    if args.cluster:
        return _bench_campaign(proto, results, args)
    if args.local_cards is not None:
        raise OverlayError("--local-cards is for --cluster local", hint="add --cluster local or drop it")
    # SIGINT and SIGTERM stop the current server and set its run aside (orchestrate).
    summary = orchestrate.bench_ab(proto, args.root, results, orchestrate.terminal_progress(args.json, "bench"),
                                   only=args.max_runs, mirror=paths.mirror_root(args.mirror))
    data = {"planned": summary.planned, "already_complete": list(summary.already_complete),
            "ran": list(summary.ran), "excluded": list(summary.excluded), "results": str(summary.results)}
    remaining = summary.planned - len(summary.already_complete) - len(summary.ran)
    if args.json:
        print(json.dumps({**data, "remaining": remaining}, indent=2))
    else:
        print(f"{len(summary.ran)} runs done now, {len(summary.already_complete)} already complete, "
              f"{remaining} remaining of {summary.planned}; results in {summary.results}")
        for e in summary.excluded:
            print(f"excluded/{e}: record it in deviations.yaml before analysis")
    return 0


def _bench_campaign(proto, results: Path, args) -> int:
    from overlay import paths
    from overlay.evidence import campaign, orchestrate

    if args.max_runs is not None:
        raise OverlayError("--max-runs is for the serial bench ab", hint="drop it with --cluster")
    if args.max_attempts < 1:
        raise OverlayError("--max-attempts must be at least 1")
    summary = campaign.campaign(proto, args.root, results, orchestrate.terminal_progress(args.json, "bench"),
                                address=args.cluster, mirror=paths.mirror_root(args.mirror),
                                local_cards=args.local_cards, max_attempts=args.max_attempts)
    remaining = summary.planned - len(summary.already_complete) - len(summary.ran)
    data = {"planned": summary.planned, "already_complete": list(summary.already_complete),
            "ran": list(summary.ran), "excluded": list(summary.excluded), "requeued": summary.requeued,
            "nodes": summary.nodes, "results": str(summary.results), "remaining": remaining}
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(f"{len(summary.ran)} runs done now on {len(summary.nodes)} node(s), "
              f"{len(summary.already_complete)} already complete, {remaining} remaining of {summary.planned}; "
              f"{summary.requeued} block(s) requeued; results in {summary.results}")
        for e in summary.excluded:
            print(f"excluded/{e}: record it in deviations.yaml before analysis")
    return 0
