"""`adlrec profile` and `adlrec profiles export|list|import`."""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from adlrec.cli.common import (
    job_output_to_stderr,
    open_tracker,
    seconds,
    settings_from,
    stdout,
    store_args,
    store_exists,
    tracker_from,
    worker_count,
)
from adlrec.errors import UsageError
from adlrec.words import count

if TYPE_CHECKING:
    from adlrec.config import Settings
    from adlrec.schemas import Profile
    from adlrec.tracking import Tracker

__all__ = ["add_commands", "datasets_folder", "job_and_device", "log_or_keep", "profile_tracker", "sweep"]


def add_commands(sub) -> None:
    p = sub.add_parser(
        "profile",
        help="sweep a model.py's DataLoader workers and log the throughput curve to MLflow",
        description="Sweep num_workers from 0 to --max-workers, measure steady-state throughput and where "
        "step time goes (compute ceiling, preprocessing, fetch), print a table and log one MLflow run.",
    )
    p.add_argument("model_py", type=Path, help="the job: a model.py that follows the adlrec contract (see README)")
    p.add_argument(
        "--max-workers", type=worker_count, default=None, help="largest worker count (default: cores + 2, at most 16)"
    )
    p.add_argument(
        "--device",
        default="auto",
        help="auto | cpu | cuda | emulate:MS (a timed wait of MS ms replaces the training step); default auto",
    )
    p.add_argument(
        "--budget",
        type=seconds,
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
    store_args(p)
    p.add_argument("--json", action="store_true", help="print the profile as JSON instead of a table")
    p.add_argument("--no-log", action="store_true", help="measure and print only; log nothing to MLflow")

    pr = sub.add_parser(
        "profiles",
        help="work with logged profiles",
        description="List the complete profiles in the MLflow store, export them to a profiles/ folder, or import "
        "profiles measured on a machine without the store.",
    )
    prs = pr.add_subparsers(dest="profiles_command", metavar="ACTION", required=True)
    ex = prs.add_parser(
        "export",
        help="write the newest complete profile per workload/params/device/hardware as JSON files",
        description="Export complete profiles from the MLflow store to a folder (default profiles/), one JSON "
        "file each with its hardware fingerprint and the exact command that measured it, and an index README.md.",
    )
    ex.add_argument("--out", type=Path, default=Path("profiles"), help="folder to write (default: profiles/)")
    store_args(ex)
    ls = prs.add_parser(
        "list",
        help="list complete profiles in the MLflow store",
        description="List the complete profiles in the MLflow store, newest first: run id, time, workload, device, "
        "the best worker count and the fewest reaching 95% of it. It creates no store.",
    )
    store_args(ls)
    im = prs.add_parser(
        "import",
        help="log profiles measured elsewhere (adlrec profile --no-log --json) into the MLflow store",
        description="Log profile JSON files into the MLflow store, one complete run each, as if measured here: "
        "what `adlrec profile --no-log --json` printed on a machine without the store (a GPU node, "
        "bench/device_profiles.sh), or files `profiles export` wrote. Every file is checked before any is "
        "logged; a profile already in the store (same measurement and time) is skipped.",
    )
    im.add_argument("files", type=Path, nargs="+", metavar="FILE", help="profile JSON files")
    store_args(im)
    p.set_defaults(handler=_cmd_profile)
    pr.set_defaults(handler=_cmd_profiles)


def job_and_device(args: argparse.Namespace, settings):
    from adlrec.job import load_job, parse_param_overrides
    from adlrec.profile.device import parse_device

    device = parse_device(args.device)
    # the arguments first: a model.py that is missing or does not load leaves no datasets folder behind
    job = load_job(
        args.model_py,
        overrides=parse_param_overrides(args.param),
        data_dir=settings.datasets_dir,
        seed=settings.seed,
    )
    return job, device


@contextlib.contextmanager
def datasets_folder(settings: Settings) -> Iterator[Path]:
    """The folder the job caches generated data in, made for the block; if the block fails, the folders it
    made that are still empty are removed (a failing ``build_dataset`` removes what it wrote itself: ``Job.dataset``),
    so a job that fails leaves no empty ``datasets`` folder, nor a data dir made only for it."""
    from adlrec.folders import ensure_folder

    made = [p for p in (settings.datasets_dir, *settings.datasets_dir.parents) if not p.exists()]  # deepest first
    # a folder that cannot be made is the setting's fault, not model.py's
    ensure_folder(settings.datasets_dir, "the datasets folder", "--data-dir or ADLREC_DATA_DIR")
    try:
        yield settings.datasets_dir
    except BaseException:
        for folder in made:
            try:
                folder.rmdir()  # only when empty: what another command put there meanwhile stays
            except OSError:
                break
        raise


def sweep(args: argparse.Namespace, job, device, settings, hardware=None):
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


def profile_tracker(args: argparse.Namespace, settings):
    """The store a sweep will be logged to, checked now rather than after a long sweep."""
    if args.no_log:
        return None
    tracker = open_tracker(settings, args)
    tracker.experiment_id()
    return tracker


def log_or_keep(tracker: Tracker, profile: Profile, settings: Settings) -> str:
    """Log the profile; when the store fails after the sweep (or the user stops a slow log with
    Ctrl-C), keep the profile in a file that ``adlrec profiles import`` logs later, so minutes of
    measuring are not lost."""
    from adlrec.errors import AdlrecError
    from adlrec.tracking import check_server

    try:
        check_server(tracker.tracking_uri, tracker.origin)  # a server gone during the sweep: at once, not after retries
        return tracker.log_profile(profile)
    except (Exception, KeyboardInterrupt) as exc:
        kept = _keep(profile, settings.data_dir / "unlogged")
        where = (
            f"the profile is kept in {kept}: `adlrec profiles import {shlex.quote(str(kept))}` logs it"
            if kept is not None
            else "the profile is printed above: save it and `adlrec profiles import` it"
        )
        if isinstance(exc, KeyboardInterrupt):
            print(f"adlrec: interrupted while logging; {where}", file=sys.stderr)
            raise
        if isinstance(exc, AdlrecError):  # the store's failure, or a store the user must fix
            raise type(exc)(f"{exc}; {where}") from exc
        print(f"adlrec: logging the profile failed; {where}", file=sys.stderr)
        raise  # not the store's failure: a bug, with its traceback


def _keep(profile: Profile, folder: Path) -> Path | None:
    """Write the profile to a new file in ``folder`` (never over another), else to stdout: None."""
    from adlrec.profile.library import file_name
    from adlrec.schemas import json_text

    text = json_text(profile.to_dict())
    stem = file_name(profile).removesuffix(".json") + time.strftime("-%Y%m%d-%H%M%S")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, path = tempfile.mkstemp(suffix=".json", prefix=f"{stem}-", dir=folder)  # a new name each time
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return Path(path)
    except OSError:
        print(text)
        return None


def _cmd_profile(args: argparse.Namespace) -> int:
    from adlrec.profile.report import best_line, profile_table
    from adlrec.schemas import json_text

    if args.no_log and args.experiment is not None:
        raise UsageError("--experiment names the experiment the profile is logged to; with --no-log nothing is logged")
    if args.no_log and getattr(args, "tracking_uri", None) is not None:
        raise UsageError("--tracking-uri names the store the profile is logged to; with --no-log nothing is logged")
    settings = settings_from(args, point_budget_s=args.budget)
    with job_output_to_stderr(args.json):  # stdout is the JSON alone, whatever model.py prints
        job, device = job_and_device(args, settings)
        with datasets_folder(settings):
            tracker = profile_tracker(args, settings)
            profile = sweep(args, job, device, settings)
    run_id = log_or_keep(tracker, profile, settings) if tracker is not None else None
    if args.json:
        out = profile.to_dict() | {"run_id": run_id, "tracking_uri": tracker.tracking_uri if tracker else None}
        print(json_text(out))
        return 0
    console = stdout()
    console.print(profile_table(profile))
    for note in profile.notes:
        console.print(f"note: {note}", markup=False)
    console.print(best_line(profile))
    if tracker is not None:
        console.print(f"logged run {run_id} to experiment {settings.experiment!r} at {tracker.tracking_uri}")
        console.print(f"view it: mlflow ui --backend-store-uri {tracker.tracking_uri}", soft_wrap=True)
    return 0


def _cmd_profiles(args: argparse.Namespace) -> int:
    from adlrec.folders import ensure_folder
    from adlrec.profile.library import export_profiles, newest_first
    from adlrec.schemas import ENOUGH_SHARE

    if args.profiles_command == "import":
        profiles = _read_profiles(args.files)  # before the store is opened: a bad file leaves no trace
        return _import(profiles, *tracker_from(args))
    settings = settings_from(args)
    if not store_exists(args, settings, reading=True):  # the default store, before anything was logged
        nothing = f"no profiles yet in {settings.resolved_tracking_uri}; `adlrec profile model.py` logs one"
        if args.profiles_command == "list":
            print(nothing)
            return 0
        raise UsageError(f"no complete profiles to export: {nothing}")
    from adlrec.tracking import prompt_reads

    unreadable: list[str] = []  # complete runs whose profile.json cannot be read: named, the rest still read
    with prompt_reads():
        tracker = open_tracker(settings, args)
        runs = tracker.profiles(unreadable)
    if args.profiles_command == "list" or not runs:
        for line in unreadable:
            print(f"adlrec: warning: skipped {line}", file=sys.stderr)
    if args.profiles_command == "list":
        runs = newest_first(runs, lambda r: r.profile)
        if not runs:
            print(f"no complete profiles in experiment {settings.experiment!r} at {tracker.tracking_uri}")
        wide = max((len(r.profile.workload) for r in runs), default=0)  # columns line up whatever the names
        dev = max((len(r.profile.device.label) for r in runs), default=0)
        for r in runs:
            p = r.profile
            print(
                f"{r.run_id}  {p.created_at}  {p.workload:<{wide}}  {p.device.label:<{dev}}  best {p.best.workers}w "
                f"{p.best.throughput:,.1f}/s, {ENOUGH_SHARE:.0%} at {p.enough().workers}w"
            )
        return 0
    if not runs:
        raise UsageError(
            f"no complete profiles to export in experiment {settings.experiment!r} at {tracker.tracking_uri}"
        )
    ensure_folder(args.out, "--out")
    skipped = unreadable  # named with what export skips, and in the index
    try:
        written = export_profiles(runs, args.out, skipped)
    except OSError as exc:
        raise UsageError(f"--out {args.out}: cannot write the profiles there: {exc.strerror or exc}") from None
    for line in skipped:
        print(f"adlrec: warning: skipped {line}", file=sys.stderr)
    for path in written:
        print(path)
    print(f"exported {count(len(written) - 1, 'profile')} to {args.out}/ (index: {args.out / 'README.md'})")
    return 0


def _read_profiles(files: list[Path]) -> list[tuple[Path, Profile]]:
    from adlrec.profile.check import read_profile

    profiles = []
    for f in files:
        try:
            profiles.append((f, read_profile(f)))
        except ValueError as exc:
            raise UsageError(f"{exc}; nothing was imported") from None
    return profiles


def _imported_before(logged: int) -> str:
    return (
        f"the {count(logged, 'file')} before it {'was' if logged == 1 else 'were'} imported, and the same command "
        "again imports the rest (those already stored are skipped)"
    )


def _import(profiles: list[tuple[Path, Profile]], settings: Settings, tracker: Tracker) -> int:
    from adlrec.errors import TrackingError
    from adlrec.profile.library import measured_at, profile_key

    def ident(p: Profile) -> tuple[str, datetime]:
        return profile_key(p), measured_at(p)

    unreadable: list[str] = []
    stored = {ident(r.profile): r.run_id for r in tracker.profiles(unreadable)}
    for line in unreadable:  # its measurement cannot be recognised: a file of it is logged again
        print(f"adlrec: warning: {line}", file=sys.stderr)
    logged = 0
    for f, p in profiles:
        key = ident(p)
        if key in stored:
            print(f"{f}: already in the store as run {stored[key]}; skipped")
            continue
        try:
            stored[key] = tracker.log_profile(p)
        except TrackingError as exc:
            raise TrackingError(f"{f}: {exc}; {_imported_before(logged)}") from exc
        except KeyboardInterrupt:  # the command's own line says only that the unfinished one was not logged
            print(f"adlrec: interrupted while importing {f}; {_imported_before(logged)}", file=sys.stderr)
            raise
        logged += 1
        print(f"{f}: logged as run {stored[key]} ({p.workload} on {p.device.title}; {p.hardware.summary})")
    print(
        f"imported {logged} of {len(profiles)} profiles into experiment {settings.experiment!r} at "
        f"{tracker.tracking_uri}; `adlrec profiles export` writes them to profiles/"
    )
    return 0
