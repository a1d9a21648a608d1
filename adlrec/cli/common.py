"""What every ``adlrec`` command shares: argument types, store options, settings, output."""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from adlrec.errors import UsageError

__all__ = [
    "job_output_to_stderr",
    "number",
    "open_tracker",
    "settings_from",
    "stdout",
    "store_args",
    "store_exists",
    "store_source",
    "tracker_from",
]


def number(
    kind: type, minimum: float, *, exclusive: bool = False, unit: str = "", maximum: float | None = None
) -> Callable[[str], float]:
    """An argparse type for a finite number ``>= minimum`` (``> minimum`` when ``exclusive``), and
    ``<= maximum`` if given."""
    what = ("a whole number" if kind is int else "a number") + (f" of {unit}" if unit else "")
    rule = f"{'>' if exclusive else '>='} {minimum:g}"
    if maximum is not None:
        rule = f"within {minimum:g}..{maximum:g}" if not exclusive else f"{rule} and <= {maximum:g}"

    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what} {rule}, got {text!r}") from None
        ok = math.isfinite(v) and (v > minimum if exclusive else v >= minimum) and (maximum is None or v <= maximum)
        if not ok:
            raise argparse.ArgumentTypeError(f"expected {what} {rule}, got {v}")
        return v

    parse.__name__ = f"{kind.__name__} {rule}"  # argparse names the type in its own messages
    return parse


def folder(text: str) -> Path:
    """An argparse type for a folder: an empty name would be the current folder, not what was meant."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"expected a folder, got {text!r}")
    return Path(text)


# bounds a command can still answer in reasonable time; the same as the service's (adlrec.service.api)
worker_count = number(int, 0, maximum=256)
core_count = number(int, 1, maximum=4096)
tcp_port = number(int, 0, maximum=65535)
seconds = number(float, 0, exclusive=True, unit="seconds")
fraction = number(float, 0, maximum=1)
pos_float = number(float, 0, exclusive=True)


def store_args(
    p: argparse.ArgumentParser, experiment: str | None = "adlrec-profiles", what: str = "MLflow experiment"
) -> None:
    """--tracking-uri, --data-dir and, unless ``experiment`` is None (a command that uses none), --experiment."""
    p.add_argument(
        "--tracking-uri",
        default=None,
        help="MLflow tracking URI (default: $MLFLOW_TRACKING_URI, else sqlite in the data dir)",
    )
    if experiment is not None:
        p.add_argument("--experiment", default=None, help=f"{what} (default: {experiment})")
    p.add_argument(
        "--data-dir", type=folder, default=None, help="folder for embedded stores and generated data (default: .adlrec)"
    )


def settings_from(args: argparse.Namespace, **extra):
    from pydantic import ValidationError

    from adlrec.config import load_settings, settings_problem

    try:
        return load_settings(
            tracking_uri=args.tracking_uri,
            experiment=getattr(args, "experiment", None),
            data_dir=args.data_dir,
            **extra,
        )
    except ValidationError as exc:
        raise UsageError(settings_problem(exc)) from None


def stdout():
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


@contextlib.contextmanager
def job_output_to_stderr(active: bool = True) -> Iterator[None]:
    """Send what the job prints to stderr for the block, so that stdout carries only the command's JSON.

    A ``print`` in model.py (at import, in ``build_dataset``, in a DataLoader worker) or a program it runs
    would otherwise land before the JSON, and ``--json > image.json`` then ``profiles import image.json``
    fails on a file that is not JSON.  Python's ``sys.stdout`` is redirected, which forked workers
    inherit, and so is file descriptor 1 when stdout is a real file, for C code and child programs.
    """
    if not active or sys.stdout is None or sys.stderr is None:  # None: the stream was closed (`>&-`)
        yield
        return
    sys.stdout.flush()
    try:
        out_fd, err_fd = sys.stdout.fileno(), sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor (a test's capture)
        out_fd = err_fd = None
    saved = None
    if out_fd is not None and err_fd is not None:
        saved = os.dup(out_fd)
        os.dup2(err_fd, out_fd)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stderr.flush()
        if saved is not None:
            os.dup2(saved, out_fd)
            os.close(saved)


def tracker_from(args: argparse.Namespace):
    settings = settings_from(args)
    return settings, open_tracker(settings, args)


def open_tracker(settings, args: argparse.Namespace | None = None):
    """The settings' tracking store and experiment; a remote server that does not answer is an
    error now, not after MLflow's minutes of retries.  With the command's ``args``, a refusal of the
    store names the flag or variable that chose it."""
    from adlrec.tracking import Tracker, check_server

    origin = store_source(args) if args is not None else ""
    check_server(settings.resolved_tracking_uri, origin)
    if args is not None:
        store_exists(args, settings, reading=False)
    return Tracker(settings.resolved_tracking_uri, settings.experiment, settings.artifact_root, origin)


def store_origin(args: argparse.Namespace) -> str:
    """The flag or variable that chose the tracking store; "" for the default one (.adlrec/mlflow.db)."""
    if args.tracking_uri is not None:
        return "--tracking-uri"
    for name in ("ADLREC_TRACKING_URI", "MLFLOW_TRACKING_URI"):  # the order Settings reads them in
        if os.environ.get(name):
            return name
    if args.data_dir is not None:
        return "--data-dir"
    return "ADLREC_DATA_DIR" if "ADLREC_DATA_DIR" in os.environ else ""


def store_source(args: argparse.Namespace) -> str:
    """What chose the tracking store, for an error to name: the flag or variable, else that it is the default."""
    return store_origin(args) or "default: --data-dir or ADLREC_DATA_DIR chooses another"


def store_exists(args: argparse.Namespace, settings, *, reading: bool) -> bool:
    """Whether the settings' SQLite store is there, found without creating it (other URIs count as there);
    another program's SQLite database there is a :class:`UsageError` (``check_sqlite_store``).

    For a command that only ``reading``, a store a flag or variable names that is not there is a mistyped
    path, not an empty store: a :class:`UsageError`.  The default store before anything was logged is
    no mistake: False, and the command says there is nothing yet."""
    from adlrec.config import sqlite_file

    uri = settings.resolved_tracking_uri
    path = sqlite_file(uri)
    if path is None:
        return True
    if path.exists():
        from adlrec.tracking import check_sqlite_store

        check_sqlite_store(uri, store_source(args))
        return True
    origin = store_origin(args)
    if reading and origin:
        raise UsageError(
            f"no MLflow store at {uri} (set by {origin}): a command that only reads creates none; "
            "check the path, or log to it first (adlrec profile, profiles import, model fit)"
        )
    return False
