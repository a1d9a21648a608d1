"""The ``adlrec`` command line.

Every mistake in the user's input ends in one line on stderr and exit code 2; an interrupt ends
with 130 and nothing logged.  Heavy imports (torch, mlflow) happen inside the commands, so
``adlrec --help`` is instant.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from adlrec import __version__
from adlrec.errors import AdlrecError, UsageError

__all__ = ["main"]


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adlrec",
        description="Profile, predict and allocate DataLoader workers for training jobs that share a node.",
    )
    parser.add_argument("--version", action="version", version=f"adlrec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser(
        "profile",
        help="sweep a model.py's DataLoader workers and log the throughput curve to MLflow",
        description="Sweep num_workers from 0 to --max-workers, measure steady-state throughput and where "
        "step time goes (compute ceiling, preprocessing, fetch), print a table and log one MLflow run.",
    )
    p.add_argument("model_py", type=Path, help="the job: a model.py that follows the adlrec contract (see README)")
    p.add_argument(
        "--max-workers", type=_nonneg_int, default=None, help="largest worker count (default: cores + 2, at most 16)"
    )
    p.add_argument(
        "--device",
        default="auto",
        help="auto | cpu | cuda | emulate:MS (a timed wait of MS ms replaces the training step); default auto",
    )
    p.add_argument(
        "--budget",
        type=_pos_float,
        default=None,
        metavar="SECONDS",
        help="measurement time per worker count (default 6)",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one of model.py's PARAMS (repeatable)",
    )
    _store_args(p)
    p.add_argument("--json", action="store_true", help="print the profile as JSON instead of a table")
    p.add_argument("--no-log", action="store_true", help="measure and print only; log nothing to MLflow")

    pr = sub.add_parser("profiles", help="work with logged profiles")
    prs = pr.add_subparsers(dest="profiles_command", metavar="ACTION", required=True)
    ex = prs.add_parser(
        "export",
        help="write the newest complete profile per workload/params/device/hardware as JSON files",
        description="Export complete profiles from the MLflow store to a folder (default profiles/), one JSON "
        "file each with its hardware fingerprint and the exact command that measured it, and an index README.md.",
    )
    ex.add_argument("--out", type=Path, default=Path("profiles"), help="folder to write (default: profiles/)")
    _store_args(ex)
    ls = prs.add_parser("list", help="list complete profiles in the MLflow store")
    _store_args(ls)
    _add_model_commands(sub)
    _add_simulation_commands(sub)
    _add_service_commands(sub)
    return parser


def _add_model_commands(sub) -> None:
    m = sub.add_parser("model", help="fit and inspect the throughput model in the MLflow Model Registry")
    ms = m.add_subparsers(dest="model_command", metavar="ACTION", required=True)
    fit = ms.add_parser(
        "fit",
        help="cross-validate, fit on all curves, register a version of adlrec-throughput",
        description="Evaluate by leave-one-workload-out cross validation over the curves in --profiles and in "
        "the MLflow store, fit on all of them, log the fit as a run and register a new version of "
        "adlrec-throughput. The champion alias moves to it only if it beats the current champion's spec "
        "on the same evaluation.",
    )
    fit.add_argument(
        "--kind", choices=["learned", "analytic", "interp"], default="learned", help="model kind (default learned)"
    )
    fit.add_argument(
        "--hparam",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a hyperparameter of the learned model, e.g. max_depth=4",
    )
    fit.add_argument(
        "--profiles",
        type=Path,
        default=Path("profiles"),
        help="folder of exported profiles to train on too (default profiles/)",
    )
    _store_args(fit)
    lst = ms.add_parser("list", help="list registered versions and the champion")
    _store_args(lst)

    pr = sub.add_parser(
        "predict",
        help="probe a model.py briefly and predict its whole throughput curve",
        description="Run a short probe (at most a quarter of a full sweep's budget), load "
        "models:/adlrec-throughput@champion (the analytic model when none is registered), and print the "
        "predicted curve, its maximum and the fewest workers reaching 95%% of it.",
    )
    pr.add_argument("model_py", type=Path, help="the job: a model.py that follows the adlrec contract")
    pr.add_argument(
        "--max-workers",
        type=_nonneg_int,
        default=None,
        help="largest worker count to predict (default: cores + 2, at most 16)",
    )
    pr.add_argument("--device", default="auto", help="auto | cpu | cuda | emulate:MS; default auto")
    pr.add_argument(
        "--budget",
        type=_pos_float,
        default=None,
        metavar="SECONDS",
        help="a full sweep's budget per worker count; the probe gets a quarter of the sweep (default 6)",
    )
    pr.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one of model.py's PARAMS (repeatable)",
    )
    pr.add_argument("--compare", action="store_true", help="also run the full sweep and print predicted vs measured")
    pr.add_argument("--no-log", action="store_true", help="with --compare: do not log the sweep to MLflow")
    pr.add_argument("--json", action="store_true", help="print JSON instead of tables")
    _store_args(pr)


def _store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite in the data dir)",
    )
    p.add_argument("--experiment", default=None, help="MLflow experiment (default: adlrec-profiles)")
    p.add_argument(
        "--data-dir", type=Path, default=None, help="folder for embedded stores and generated data (default: .adlrec)"
    )


def _nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {v}")
    return v


def _pos_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {v}")
    return v


def _settings(args: argparse.Namespace, **extra):
    from pydantic import ValidationError

    from adlrec.config import load_settings

    try:
        return load_settings(
            tracking_uri=args.tracking_uri, experiment=args.experiment, data_dir=args.data_dir, **extra
        )
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(x) for x in err["loc"]) or "settings"
        raise UsageError(f"setting {field}: {err['msg']} (from ADLREC_{field.upper()} or its flag)") from None


def _job_and_device(args: argparse.Namespace, settings):
    from adlrec.job import load_job, parse_param_overrides
    from adlrec.profile.device import parse_device

    device = parse_device(args.device)
    job = load_job(
        args.model_py,
        overrides=parse_param_overrides(args.param),
        data_dir=settings.datasets_dir,
        seed=settings.seed,
    )
    return job, device


def _sweep(args: argparse.Namespace, job, device, settings, hardware=None):
    """A full sweep with a progress bar on stderr (when it is a terminal)."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from adlrec.profile.sweep import profile_job

    err = Console(stderr=True)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task(f"profiling {job.name} on {device.title}", total=None)

        def on_progress(ev) -> None:
            bar.update(task, completed=ev.done, total=ev.total, description=f"{job.name}: {ev.stage}")

        return profile_job(
            job,
            device,
            settings,
            max_workers=args.max_workers,
            command="adlrec " + shlex.join(args.argv),
            on_progress=on_progress,
            hardware=hardware,
        )


def _profile_tracker(args: argparse.Namespace, settings):
    """The store a sweep will be logged to, checked now rather than after a long sweep."""
    if args.no_log:
        return None
    from adlrec.tracking import Tracker

    tracker = Tracker(settings.resolved_tracking_uri, settings.experiment, settings.artifact_root)
    tracker.experiment_id()
    return tracker


def _stdout():
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


def _cmd_profile(args: argparse.Namespace) -> int:
    from adlrec.profile.report import profile_table

    settings = _settings(args, point_budget_s=args.budget)
    job, device = _job_and_device(args, settings)
    tracker = _profile_tracker(args, settings)
    profile = _sweep(args, job, device, settings)
    run_id = tracker.log_profile(profile) if tracker is not None else None
    if args.json:
        out = profile.to_dict() | {"run_id": run_id, "tracking_uri": tracker.tracking_uri if tracker else None}
        print(json.dumps(out, indent=2))
        return 0
    console = _stdout()
    console.print(profile_table(profile))
    for note in profile.notes:
        console.print(f"note: {note}")
    best = profile.best
    console.print(f"best: {best.workers} workers, {best.throughput:,.1f} samples/s")
    if tracker is not None:
        console.print(f"logged run {run_id} to experiment {settings.experiment!r} at {tracker.tracking_uri}")
        console.print(f"view it: mlflow ui --backend-store-uri {tracker.tracking_uri}", soft_wrap=True)
    return 0


def _tracker(args: argparse.Namespace):
    from adlrec.tracking import Tracker

    settings = _settings(args)
    return settings, Tracker(settings.resolved_tracking_uri, settings.experiment, settings.artifact_root)


def _cmd_profiles(args: argparse.Namespace) -> int:
    from adlrec.profile.library import export_profiles

    settings, tracker = _tracker(args)
    runs = tracker.profiles()
    if args.profiles_command == "list":
        if not runs:
            print(f"no complete profiles in experiment {settings.experiment!r} at {tracker.tracking_uri}")
        for r in runs:
            p = r.profile
            print(
                f"{r.run_id}  {p.created_at}  {p.workload:<12} {p.device.label:<12} best {p.best.workers}w {p.best.throughput:,.1f}/s"
            )
        return 0
    if not runs:
        raise UsageError(
            f"no complete profiles to export in experiment {settings.experiment!r} at {tracker.tracking_uri}"
        )
    written = export_profiles(runs, args.out)
    for path in written:
        print(path)
    print(f"exported {len(written) - 1} profiles to {args.out}/ (index: {args.out / 'README.md'})")
    return 0


def _parse_hparams(items: Sequence[str]) -> dict:
    from adlrec.predict.models import LearnedModel

    defaults = LearnedModel().spec()
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or key not in defaults or key == "kind":
            known = ", ".join(k for k in defaults if k != "kind")
            raise UsageError(f"--hparam {item!r}: expected KEY=VALUE with KEY one of {known}")
        try:
            out[key] = type(defaults[key])(raw)
        except ValueError:
            raise UsageError(f"--hparam {item!r}: {raw!r} is not a valid {type(defaults[key]).__name__}") from None
    return out


def _cmd_model(args: argparse.Namespace) -> int:
    from adlrec.tracking import MODEL_NAME, ModelRegistry

    settings, tracker = _tracker(args)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    console = _stdout()
    if args.model_command == "list":
        versions = registry.versions()
        if not versions:
            console.print(f"no versions of {MODEL_NAME} in {settings.resolved_tracking_uri}")
        champion = registry.champion()
        for mv in versions:
            mark = "  champion" if champion and champion.version == str(mv.version) else ""
            ape = mv.tags.get("cv_median_ape")
            ape_text = f"{float(ape):.1%}" if ape else "?"
            console.print(f"v{mv.version}  {mv.tags.get('adlrec.spec', '')}  cv median APE {ape_text}{mark}")
        return 0

    from adlrec.predict.fit import fit_and_register, gather_curves
    from adlrec.predict.report import fit_table

    if args.kind != "learned" and args.hparam:
        raise UsageError("--hparam applies to --kind learned only")
    spec = {"kind": args.kind} | _parse_hparams(args.hparam)
    if args.kind == "learned":
        from adlrec.predict.models import LearnedModel

        spec = LearnedModel(**{k: v for k, v in spec.items() if k != "kind"}).spec()
    curves = gather_curves(args.profiles, tracker)
    workloads = {c.group for c in curves}
    if len(workloads) < 2:
        raise UsageError(
            f"need curves of at least 2 workloads to cross-validate; found {len(curves)} curves of "
            f"{len(workloads)} in {args.profiles}/ and {tracker.tracking_uri}"
        )
    outcome = fit_and_register(curves, spec, registry, sources=f"{args.profiles}, {tracker.tracking_uri}")
    console.print(fit_table(outcome))
    if outcome.promoted:
        before = f" (was v{outcome.previous_champion})" if outcome.previous_champion else ""
        console.print(f"registered {MODEL_NAME} v{outcome.version} and moved @champion to it{before}")
    else:
        console.print(
            f"registered {MODEL_NAME} v{outcome.version}, but it does not beat champion v{outcome.previous_champion} "
            f"on the same evaluation (median APE {outcome.evaluation.median_ape:.1%} vs "
            f"{outcome.champion_evaluation.median_ape:.1%}); @champion stays on v{outcome.previous_champion}"
        )
    console.print(f"fit run {outcome.run_id} in experiment 'adlrec-models' at {settings.resolved_tracking_uri}")
    return 0


def _cmd_predict(args: argparse.Namespace) -> int:
    import numpy as np

    from adlrec.predict.models import AnalyticModel, smallest_reaching
    from adlrec.predict.probe import probe_job, sweep_budget
    from adlrec.predict.report import prediction_table
    from adlrec.profile.hardware import detect_hardware
    from adlrec.profile.sweep import default_max_workers
    from adlrec.tracking import MODEL_NAME, ModelRegistry

    settings = _settings(args, point_budget_s=args.budget)
    job, device = _job_and_device(args, settings)
    tracker = _profile_tracker(args, settings) if args.compare else None
    hardware = detect_hardware()
    max_w = args.max_workers if args.max_workers is not None else default_max_workers(hardware.logical_cores)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    loaded = registry.load()
    if loaded is None:
        print(
            f"adlrec: no registered model {MODEL_NAME}@champion in {settings.resolved_tracking_uri}; "
            "predicting with the analytic model",
            file=sys.stderr,
        )
    probe = probe_job(job, device, settings, hardware, max_w)
    workers = list(range(max_w + 1))
    if loaded is None:
        curve = AnalyticModel().predict(probe.features, workers)
        source = "analytic model (no registered model)"
    else:
        import pandas as pd

        rows = pd.DataFrame([probe.features.to_dict() | {"workers": w} for w in workers])
        pyfunc, version = loaded
        curve = np.asarray(pyfunc.predict(rows)["throughput"], dtype=float)
        source = f"{MODEL_NAME}@champion (v{version})"
    best_w = int(np.argmax(curve))
    enough_w = smallest_reaching(curve)
    measured = None
    sweep_s = None
    if args.compare:
        import time

        t0 = time.perf_counter()
        profile = _sweep(args, job, device, settings, hardware)
        sweep_s = time.perf_counter() - t0
        measured = [p.throughput for p in profile.points]
        if tracker is not None:
            tracker.log_profile(profile)
    summary = {
        "workload": job.name,
        "device": device.label,
        "model": source,
        "probe": probe.features.to_dict(),
        "probe_seconds": probe.seconds,
        "probe_budget_share": 4 * probe.part_budget_s / sweep_budget(settings.point_budget_s, max_w),
        "predicted": [float(t) for t in curve],
        "predicted_max": float(curve[best_w]),
        "predicted_best_workers": best_w,
        "workers_for_95pct": enough_w,
        "measured": measured,
        "sweep_seconds": sweep_s,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    console = _stdout()
    console.print(prediction_table(job.name, device, curve, measured))
    console.print(f"model: {source}")
    console.print(
        f"predicted max {curve[best_w]:,.1f} samples/s at {best_w} workers; {enough_w} workers reach 95% of it"
    )
    line = f"probe: {probe.seconds:.1f} s"
    if sweep_s is not None:
        line += f"; full sweep: {sweep_s:.1f} s ({probe.seconds / sweep_s:.0%} of it)"
        apes = [abs(p - m) / m for p, m in zip(curve, measured, strict=True)]
        line += f"; median APE {float(np.median(apes)):.1%}"
        best_m = int(np.argmax(measured))
        line += (
            f"; measured best {measured[best_m]:,.1f} at {best_m} workers, predicted best w={best_w} "
            f"reaches {measured[best_w] / measured[best_m]:.0%} of it"
        )
    console.print(line)
    return 0


# ==============================================================================================
# Allocation simulator: `adlrec simulate` and `adlrec trace generate` (docs/simulate.md)
# ==============================================================================================
SIM_POLICIES = "even,greedy,optimal,fixed,maxmin"


def _add_simulation_commands(sub) -> None:
    sim = sub.add_parser(
        "simulate",
        help="replay a job trace on one node under several allocation policies and compare them",
        description="Discrete-event replay of a CSV trace (docs/simulate.md) on one node: jobs queue for GPUs, "
        "the policy re-decides loader workers at arrivals, completions and every --interval seconds, CPU "
        "oversubscription slows every process, and each worker-count change costs --resize-s of progress. "
        "Curves are derived from the measured profiles the trace names.",
    )
    sim.add_argument(
        "trace", type=Path, help="the trace CSV (job_id,arrival_s,work_samples,profile,gpus,requested_workers)"
    )
    sim.add_argument("--policy", default=SIM_POLICIES, help=f"comma-separated policies (default {SIM_POLICIES})")
    _node_args(sim)
    sim.add_argument("--memory-gb", type=_pos_float_any, default=256.0, help="memory for loader workers (default 256)")
    sim.add_argument(
        "--interval",
        type=_pos_float,
        default=60.0,
        metavar="SECONDS",
        help="re-decide at least this often (default 60)",
    )
    sim.add_argument(
        "--resize-s", type=_nonneg_float, default=0.5, help="progress lost per worker-count change (default 0.5)"
    )
    sim.add_argument(
        "--threshold",
        type=_nonneg_float,
        default=0.05,
        help="hysteresis: fraction of a job's full-speed value a change must gain (default 0.05)",
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
        type=_nonneg_float,
        default=1.0,
        help="share of a core a training process needs at full speed (0..1, default 1)",
    )
    sim.add_argument(
        "--log-mlflow", action="store_true", help="log the comparison as one run in experiment adlrec-simulations"
    )
    _store_args(sim)

    tr = sub.add_parser("trace", help="make job traces for `adlrec simulate`")
    trs = tr.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    gen = trs.add_parser(
        "generate",
        help="draw a seeded job trace whose curves come from the measured profiles",
        description="Draw jobs (profile, GPUs, length, Poisson arrivals) with a fixed seed and write them as a "
        "trace CSV. Each job names a measured profile; the simulator derives its curve on the node from the "
        "profile's measured parameters.",
    )
    gen.add_argument("--jobs", type=_pos_int, default=40, help="number of jobs (default 40)")
    gen.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    gen.add_argument("--out", type=Path, default=Path("trace.csv"), help="file to write (default trace.csv)")
    _node_args(gen)
    gen.add_argument(
        "--load",
        type=_pos_float_any,
        default=1.0,
        help="offered GPU load: full-speed GPU-seconds per second / GPUs (default 1.0)",
    )
    gen.add_argument(
        "--num-workers",
        type=_nonneg_int,
        default=8,
        help="num_workers per rank every job's script asks for (default 8)",
    )
    gen.add_argument("--min-minutes", type=_pos_float_any, default=10.0, help="shortest job at full speed (default 10)")
    gen.add_argument(
        "--max-minutes", type=_pos_float_any, default=120.0, help="longest job at full speed (default 120)"
    )
    gen.add_argument("--include-cpu", action="store_true", help="also draw profiles measured with --device cpu")


def _node_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cores", type=_pos_int, default=32, help="node logical cores (default 32)")
    p.add_argument("--gpus", type=_pos_int, default=8, help="node GPUs (default 8)")
    p.add_argument(
        "--profiles", type=Path, default=Path("profiles"), help="folder of measured profiles (default profiles/)"
    )


def _pos_int(text: str) -> int:
    v = _nonneg_int(text)
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {v}")
    return v


def _pos_float_any(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text!r}") from None
    if not (v > 0 and v < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {v}")
    return v


def _nonneg_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not (v >= 0 and v < float("inf")):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {v}")
    return v


def _profiles(folder: Path):
    """The profiles in ``folder``: as (file stem, profile) pairs and as a catalogue of names."""
    from adlrec.simulate.trace import profile_catalog, profile_files

    if not folder.is_dir():
        raise UsageError(f"profiles folder {folder} not found (use --profiles)")
    try:
        return profile_files(folder), profile_catalog(folder)
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"profiles folder {folder}: a profile file is malformed: {exc}") from None


def _cmd_simulate(args: argparse.Namespace) -> int:
    from adlrec.allocate import POLICIES, InfeasibleRequest
    from adlrec.simulate import (
        Node,
        SimConfig,
        SimulationError,
        build_jobs,
        compare_policies,
        comparison_csv,
        comparison_rows,
        comparison_table,
        read_trace,
    )

    names = [n.strip() for n in args.policy.split(",") if n.strip()]
    unknown = [n for n in names if n not in POLICIES]
    if unknown or not names:
        raise UsageError(f"unknown policy {', '.join(unknown) or '(none)'}; choose from {', '.join(sorted(POLICIES))}")
    if not args.main_cpu <= 1:
        raise UsageError(f"--main-cpu must be within 0..1, got {args.main_cpu}")
    tracker = None
    if args.log_mlflow:
        from adlrec.tracking import SIMULATION_EXPERIMENT, Tracker

        args.experiment = args.experiment or SIMULATION_EXPERIMENT
        settings = _settings(args)
        tracker = Tracker(settings.resolved_tracking_uri, settings.experiment, settings.artifact_root)
        tracker.experiment_id()  # fail on a bad store before simulating
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
    jobs = build_jobs(rows, _profiles(args.profiles)[1], node, source=str(args.trace))
    try:
        runs = compare_policies(jobs, {n: POLICIES[n] for n in names}, node, config)
    except (InfeasibleRequest, SimulationError) as exc:
        raise UsageError(f"cannot simulate {args.trace} on this node: {exc}") from None
    table_rows = comparison_rows(runs)
    console = _stdout()
    console.print(
        f"trace {args.trace} ({len(jobs)} jobs, sha256 {digest}); node {node.cores} cores, {node.gpus} GPUs, "
        f"{args.memory_gb:g} GB for workers; objective {config.objective}, interval {config.interval_s:g} s, "
        f"resize {config.resize_s:g} s, threshold {config.threshold:g}, contention {config.contention}, "
        f"main-cpu {config.main_cpu:g}",
        soft_wrap=True,
    )
    console.print("curves derived from measured profile parameters (docs/simulate.md), not measured on this node")
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
            "trace": str(args.trace),
            "trace_sha256": digest,
            "jobs": len(jobs),
            "node.cores": node.cores,
            "node.gpus": node.gpus,
            "node.memory_mb": node.memory_mb,
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

    files, _ = _profiles(args.profiles)
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
        f"profiles drawn from {args.profiles}: {', '.join(drawn)}",
        "curves derived from measured profile parameters (docs/simulate.md): the simulator extends each to its node",
    ]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(format_trace(rows, comments))
    print(f"wrote {len(rows)} jobs to {args.out} (profiles: {', '.join(drawn)})")
    print("curves derived from measured profile parameters: the simulator extends each to the node's worker range")
    return 0


# ==============================================================================================
# The allocation service: `adlrec serve` (docs/service.md)
# ==============================================================================================
def _add_service_commands(sub) -> None:
    sv = sub.add_parser(
        "serve",
        help="run the allocation service (HTTP API: jobs register, heartbeat and read their workers)",
        description="Start the allocation service under uvicorn: a job store (SQLite in the data dir by default), "
        "periodic recompute with the configured policy, predictions from the registered throughput model. "
        "Without a token it listens on loopback only.",
    )
    sv.add_argument("--host", default=None, help="interface to bind (default 127.0.0.1; others need a token)")
    sv.add_argument("--port", type=_nonneg_int, default=None, help="TCP port (default 8470)")
    sv.add_argument(
        "--token",
        default=None,
        help="bearer token that guards every write (prefer $ADLREC_SERVICE_TOKEN: flags show in `ps`)",
    )
    sv.add_argument("--store-url", default=None, help="SQLAlchemy URL of the job store (default: sqlite in data dir)")
    sv.add_argument("--policy", default=None, help="allocation policy: even | fixed | greedy | maxmin | optimal")
    sv.add_argument("--interval", type=_pos_float, default=None, metavar="SECONDS", help="recompute period (30)")
    sv.add_argument("--ttl", type=_pos_float, default=None, metavar="SECONDS", help="expire silent jobs after (120)")
    _store_args(sv)


def _cmd_serve(args: argparse.Namespace) -> int:
    from adlrec.service.server import serve

    settings = _settings(
        args,
        service_host=args.host,
        service_port=args.port,
        service_token=args.token,
        service_store_url=args.store_url,
        service_policy=args.policy,
        service_interval_s=args.interval,
        service_ttl_s=args.ttl,
    )
    serve(settings)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    try:
        if args.command == "profile":
            return _cmd_profile(args)
        if args.command == "profiles":
            return _cmd_profiles(args)
        if args.command == "model":
            return _cmd_model(args)
        if args.command == "predict":
            return _cmd_predict(args)
        if args.command == "simulate":
            return _cmd_simulate(args)
        if args.command == "trace":
            return _cmd_trace(args)
        if args.command == "serve":
            return _cmd_serve(args)
        parser.error(f"unknown command {args.command}")
    except AdlrecError as exc:
        print(f"adlrec: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("adlrec: interrupted; nothing was logged for the unfinished work", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
