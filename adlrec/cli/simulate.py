"""`adlrec simulate` and `adlrec trace generate` (docs/simulate.md)."""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

from adlrec.cli.common import (
    core_count,
    fraction,
    number,
    open_tracker,
    pos_float,
    settings_from,
    stdout,
    store_args,
    worker_count,
)
from adlrec.config import SIMULATION_EXPERIMENT
from adlrec.errors import UsageError
from adlrec.words import count

__all__ = ["add_commands"]

SIM_POLICIES = "even,proportional,greedy,optimal,fixed,maxmin"


def add_commands(sub) -> None:
    sim = sub.add_parser(
        "simulate",
        help="replay a job trace on one node under several allocation policies and compare them",
        description="Discrete-event replay of a CSV trace (docs/simulate.md) on one node: jobs queue for GPUs, "
        "the policy re-decides loader workers at arrivals, completions and every --interval seconds, CPU "
        "oversubscription slows every process, and each worker-count change costs --resize-s of progress. "
        "Curves are derived from the measured profiles the trace names, or read from the published tables "
        "in PROFILES/published/ (names like synergy:res18).",
    )
    sim.add_argument(
        "trace", type=Path, help="the trace CSV (job_id,arrival_s,work_samples,profile,gpus,requested_workers)"
    )
    sim.add_argument("--policy", default=SIM_POLICIES, help=f"comma-separated policies (default {SIM_POLICIES})")
    _node_args(sim)
    sim.add_argument("--memory-gb", type=pos_float, default=256.0, help="memory for loader workers (default 256)")
    sim.add_argument(
        "--interval",
        type=number(float, 1, unit="seconds"),
        default=60.0,
        metavar="SECONDS",
        help="re-decide at least this often (at least 1; default 60)",
    )
    sim.add_argument(
        "--resize-s",
        type=number(float, 0, unit="seconds"),
        default=0.5,
        help="progress lost per worker-count change (default 0.5)",
    )
    sim.add_argument(
        "--threshold",
        type=fraction,
        default=0.05,
        help="hysteresis: fraction (0..1) of a job's full-speed value a change must gain (default 0.05)",
    )
    sim.add_argument(
        "--objective",
        choices=["busy_gpus", "throughput", "weighted"],
        default="busy_gpus",
        help="what the policies maximise (default busy_gpus)",
    )
    sim.add_argument(
        "--contention",
        choices=["all", "busy"],
        default="all",
        help="who competes for CPU: every worker (all, default) or only workers a job can use (busy)",
    )
    sim.add_argument(
        "--main-cpu",
        type=fraction,
        default=1.0,
        help="share of a core a training process needs at full speed (0..1, default 1)",
    )
    sim.add_argument(
        "--ranks",
        choices=["independent", "lockstep"],
        default="independent",
        help="a multi-GPU job's ranks: each loads at its own pace (independent, default), or every step waits "
        "for the rank with the fewest workers, as in synchronous data-parallel training (lockstep)",
    )
    sim.add_argument(
        "--log-mlflow",
        action="store_true",
        help=f"log the comparison as one run in experiment {SIMULATION_EXPERIMENT} (or --experiment)",
    )
    store_args(sim, experiment=SIMULATION_EXPERIMENT)

    tr = sub.add_parser(
        "trace",
        help="make job traces for `adlrec simulate`",
        description="Make job traces for `adlrec simulate`: `trace generate` draws a seeded trace whose jobs "
        "name measured profiles or a published table's curves.",
    )
    trs = tr.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    gen = trs.add_parser(
        "generate",
        help="draw a seeded job trace whose curves come from the measured profiles",
        description="Draw jobs (profile, GPUs, length, Poisson arrivals) with a fixed seed and write them as a "
        "trace CSV. Each job names a measured profile; the simulator derives its curve on the node from the "
        "profile's measured parameters.",
    )
    gen.add_argument(
        "--jobs", type=number(int, 1, maximum=10_000), default=40, help="number of jobs, at most 10,000 (default 40)"
    )
    gen.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    gen.add_argument("--out", type=Path, default=Path("trace.csv"), help="file to write; a new one (default trace.csv)")
    gen.add_argument("--force", action="store_true", help="replace --out if it exists")
    _node_args(gen)
    gen.add_argument(
        "--load",
        type=pos_float,
        default=1.0,
        help="offered GPU load: full-speed GPU-seconds per second / GPUs (default 1.0)",
    )
    gen.add_argument(
        "--num-workers",
        type=worker_count,
        default=8,
        help="num_workers per rank every job's script asks for (default 8)",
    )
    gen.add_argument("--min-minutes", type=pos_float, default=10.0, help="shortest job at full speed (default 10)")
    gen.add_argument("--max-minutes", type=pos_float, default=120.0, help="longest job at full speed (default 120)")
    gen.add_argument("--include-cpu", action="store_true", help="also draw profiles measured with --device cpu")
    gen.add_argument(
        "--curves",
        default="measured",
        metavar="SOURCE",
        help="draw from the measured profiles (measured, the default) or from a published table in "
        "PROFILES/published/ by name (e.g. synergy: Synergy's GPU-server curves)",
    )
    sim.set_defaults(handler=_cmd_simulate)
    tr.set_defaults(handler=_cmd_trace)


def _node_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cores", type=core_count, default=32, help="node logical cores (default 32)")
    p.add_argument("--gpus", type=number(int, 1, maximum=256), default=8, help="node GPUs (default 8)")
    p.add_argument(
        "--profiles", type=Path, default=Path("profiles"), help="folder of measured profiles (default profiles/)"
    )


def _profiles(folder: Path):
    """The profiles in ``folder``: as (file stem, profile) pairs and as a catalogue of names."""
    from adlrec.simulate.trace import profile_catalog, profile_files

    if not folder.is_dir():
        raise UsageError(f"profiles folder {folder} not found (use --profiles)")
    try:
        return profile_files(folder), profile_catalog(folder)
    except ValueError as exc:  # names the file (read_profile) or the published table
        raise UsageError(f"profiles folder {folder}: {exc}") from None


def _cmd_simulate(args: argparse.Namespace) -> int:
    from adlrec.allocate import POLICIES, InfeasibleRequest
    from adlrec.simulate import (
        Node,
        SimConfig,
        SimulationError,
        build_jobs,
        check_trace,
        compare_policies,
        comparison_csv,
        comparison_rows,
        comparison_table,
        read_trace,
    )

    if not args.log_mlflow:  # as profile --no-log: a flag naming where nothing goes is a mistake, not a no-op
        for flag, value in (
            ("--tracking-uri", args.tracking_uri),
            ("--experiment", args.experiment),
            ("--data-dir", args.data_dir),
        ):
            if value is not None:
                raise UsageError(
                    f"{flag} names where --log-mlflow logs the comparison; without --log-mlflow nothing is logged"
                )
    given = [n.strip() for n in args.policy.split(",")]
    if "" in given:
        raise UsageError(
            f"--policy {args.policy!r} has an empty name; expected comma-separated names from "
            f"{', '.join(sorted(POLICIES))}"
        )
    names = list(dict.fromkeys(given))  # each once, in order
    unknown = [n for n in names if n not in POLICIES]
    if unknown:
        raise UsageError(f"unknown policy {', '.join(unknown)}; choose from {', '.join(sorted(POLICIES))}")
    if args.cores < args.gpus:
        raise UsageError(
            f"--cores {args.cores} is fewer than --gpus {args.gpus}: every GPU's training process needs a core; "
            "expected at least as many cores as GPUs"
        )
    node = Node(cores=args.cores, gpus=args.gpus, memory_mb=int(args.memory_gb * 1024))
    config = SimConfig(
        interval_s=args.interval,
        resize_s=args.resize_s,
        threshold=args.threshold,
        objective=args.objective,
        contention=args.contention,
        main_cpu=args.main_cpu,
    )
    rows, digest = read_trace(args.trace)
    lockstep = args.ranks == "lockstep"
    jobs = build_jobs(rows, _profiles(args.profiles)[1], node, source=str(args.trace), lockstep=lockstep)
    try:
        check_trace(jobs, node, config)  # before the store is opened: a trace refused here stores nothing
    except SimulationError as exc:
        raise UsageError(f"cannot simulate {args.trace} on this node: {exc}") from None
    tracker = None
    if args.log_mlflow:  # only once the input is known good: a bad trace stores nothing
        args.experiment = args.experiment or SIMULATION_EXPERIMENT
        settings = settings_from(args)
        tracker = open_tracker(settings, args)
        tracker.experiment_id()  # fail on a bad store before simulating
    try:
        runs = compare_policies(jobs, {n: POLICIES[n] for n in names}, node, config)
    except (InfeasibleRequest, SimulationError) as exc:
        raise UsageError(f"cannot simulate {args.trace} on this node: {exc}") from None
    table_rows = comparison_rows(runs)
    console = stdout()
    console.print(
        f"trace {args.trace} ({count(len(jobs), 'job')}, sha256 {digest}); node {count(node.cores, 'core')}, "
        f"{count(node.gpus, 'GPU')}, "
        f"{args.memory_gb:g} GB for workers; objective {config.objective}, interval {config.interval_s:g} s, "
        f"resize {config.resize_s:g} s, threshold {config.threshold:g}, contention {config.contention}, "
        f"main-cpu {config.main_cpu:g}, ranks {args.ranks}",
        soft_wrap=True,
    )
    console.print(
        "curves derived from measured profile parameters, or read from published tables (docs/simulate.md); "
        "not measured on this node",
        soft_wrap=True,
    )
    console.print(comparison_table(table_rows, title="policies compared"))
    console.print(
        "throughput: normalised samples/s per GPU held by jobs (thr./held GPU), vs the baseline; makespan: "
        "reduction vs the baseline; busy GPUs: share of the node's GPU-time spent training",
        soft_wrap=True,
    )
    if tracker is not None:
        from adlrec.tracking import log_simulation

        params = {
            "policies": ",".join(names),
            "trace": str(args.trace.resolve()),
            "trace_sha256": digest,
            "profiles": str(args.profiles.resolve()),
            "jobs": len(jobs),
            "node.cores": node.cores,
            "node.gpus": node.gpus,
            "node.memory_mb": node.memory_mb,
            "ranks": args.ranks,
        } | {f"config.{k}": v for k, v in vars(config).items()}
        run_id = log_simulation(
            tracker, params, table_rows, comparison_csv(table_rows), note=f"adlrec {shlex.join(args.argv)}"
        )
        console.print(
            f"logged run {run_id} to experiment {tracker.experiment!r} at {tracker.tracking_uri}", soft_wrap=True
        )
    return 0


def _cmd_trace(args: argparse.Namespace) -> int:
    from adlrec.simulate import Node, TraceSpec, format_trace, generate_trace
    from adlrec.simulate.generate import trace_profiles

    if args.out.exists() and not args.out.is_dir() and not args.force:  # a hand-edited trace is not lost
        raise UsageError(f"--out {args.out} already exists; expected a new file, or --force to replace it")
    files, _ = _profiles(args.profiles)
    source = f"profiles drawn from {args.profiles}"
    derived = (
        "curves derived from measured profile parameters (docs/simulate.md): the simulator extends each to its node"
    )
    if args.curves != "measured":
        files, source = _published(args.profiles, args.curves)
        derived = "curves from a published table (docs/simulate.md), read by the simulator for its node"
    node = Node(cores=args.cores, gpus=args.gpus)
    try:
        spec = TraceSpec(
            jobs=args.jobs,
            seed=args.seed,
            load=args.load,
            min_minutes=args.min_minutes,
            max_minutes=args.max_minutes,
            num_workers=args.num_workers,
            include_cpu=args.include_cpu,
        )
        rows = generate_trace(files, node, spec)
    except ValueError as exc:
        raise UsageError(f"cannot generate a trace from {args.profiles}: {exc}") from None
    drawn = [name for name, _ in trace_profiles(files, args.include_cpu)]
    comments = [
        f"adlrec {shlex.join(args.argv)}",
        f"{spec.jobs} jobs, seed {spec.seed}, offered GPU load {spec.load:g} on {node.gpus} GPUs, "
        f"{spec.min_minutes:g}-{spec.max_minutes:g} min at full speed, num_workers={spec.num_workers} per rank",
        f"{source}: {', '.join(drawn)}",
        derived,
    ]
    try:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(format_trace(rows, comments))
    except OSError as exc:
        raise UsageError(f"--out {args.out}: cannot write the trace there: {exc.strerror or exc}") from None
    print(f"wrote {count(len(rows), 'job')} to {args.out} (profiles: {', '.join(drawn)})")
    print(derived)
    return 0


def _published(folder: Path, name: str):
    """The models of the published table ``name`` in ``folder/published/``, and a line saying where from."""
    from adlrec.simulate.published import load_published, published_files

    tables = {p.stem: p for p in published_files(folder)}
    if name not in tables:
        known = ", ".join(["measured", *sorted(tables)])
        raise UsageError(f"--curves {name!r}: no table {folder / 'published' / (name + '.json')}; choose from {known}")
    source = json.loads(tables[name].read_text()).get("source", "")
    return load_published(tables[name]), f"published table {name} ({source})"
