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
    return parser


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


def _cmd_profile(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from adlrec.job import load_job, parse_param_overrides
    from adlrec.profile.device import parse_device

    settings = _settings(args, point_budget_s=args.budget)
    device = parse_device(args.device)
    job = load_job(
        args.model_py,
        overrides=parse_param_overrides(args.param),
        data_dir=settings.datasets_dir,
        seed=settings.seed,
    )
    tracker = None
    if not args.no_log:
        from adlrec.tracking import Tracker

        tracker = Tracker(settings.resolved_tracking_uri, settings.experiment, settings.artifact_root)
        tracker.experiment_id()  # fail on a bad store now, not after a long sweep

    from adlrec.profile.report import profile_table
    from adlrec.profile.sweep import profile_job

    err = Console(stderr=True)
    command = "adlrec " + shlex.join(args.argv)
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

        profile = profile_job(
            job, device, settings, max_workers=args.max_workers, command=command, on_progress=on_progress
        )

    run_id = tracker.log_profile(profile) if tracker is not None else None
    if args.json:
        out = profile.to_dict() | {"run_id": run_id, "tracking_uri": tracker.tracking_uri if tracker else None}
        print(json.dumps(out, indent=2))
        return 0
    console = Console() if sys.stdout.isatty() else Console(width=160)
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
