"""The ``adlrec`` command line: one module per command group, assembled here.

Every mistake in the user's input ends in one line on stderr and exit code 2; an interrupt ends
with 130 and nothing logged; a closed pipe on stdout (``| head``) ends quietly with 141.  Heavy
imports (torch, mlflow) happen inside the commands, so ``adlrec --help`` is instant.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from adlrec import __version__
from adlrec.cli import model, profile, serve, simulate, status
from adlrec.errors import AdlrecError

__all__ = ["main"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="adlrec",
        description="Profile, predict and allocate DataLoader workers for training jobs that share a node.",
    )
    parser.add_argument("--version", action="version", version=f"adlrec {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in (profile, model, simulate, serve, status):
        group.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    args.argv = argv
    try:
        return args.handler(args)
    except AdlrecError as exc:
        print(f"adlrec: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("adlrec: interrupted; nothing was logged for the unfinished work", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of stdout went away (`adlrec profiles list | head`): not an error to report.
        # Point stdout at /dev/null so that flushing it at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # as a process killed by SIGPIPE, which is what a shell pipeline expects
