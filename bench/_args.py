"""What the benches share about their command lines: --help with each option's default; a value out of
range stops the bench with argparse's one-line error naming the flag and what it expects, before
anything starts (not a traceback minutes later); Ctrl-C is one line and exit code 130."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit


class _Parser(argparse.ArgumentParser):
    """Each option's --help line ends with its default (none for a flag, or an option whose default is
    None: its help says what that means), as the docstrings' usage lines state them."""

    def add_argument(self, *args, **kwargs) -> argparse.Action:  # type: ignore[override]
        action = super().add_argument(*args, **kwargs)
        default = action.default
        shows = default is not None and default is not argparse.SUPPRESS and not isinstance(default, bool)
        if action.option_strings and shows and action.help != argparse.SUPPRESS:  # 0 too, which == False
            shown = " ".join(map(str, default)) if isinstance(default, list) else str(default)
            action.help = f"{action.help or ''} (default: {shown.replace('%', '%%')})".lstrip()
        return action


def parser(doc: str, whole: bool = False) -> argparse.ArgumentParser:
    """The bench's parser: its docstring's first paragraph (or all of it) as the description, written as
    it is, and each option's default in --help."""
    return _Parser(
        description=doc if whole else doc.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )


def interruptible(main: Callable[[], int]) -> int:
    """``main()``, where Ctrl-C ends the bench with one line and exit code 130, not a traceback.

    What it started stops as the interrupt unwinds (its ``with`` and ``finally`` blocks) and by the
    signal, which a terminal sends to the whole process group: its workers and services too."""
    try:
        return main()
    except KeyboardInterrupt:
        print(f"{Path(sys.argv[0]).name}: interrupted; what it had not printed yet is lost", file=sys.stderr)
        return 130


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def at_least(ap: argparse.ArgumentParser, args: argparse.Namespace, **minimums: float) -> None:
    """``ap.error`` for the first option below its minimum (NaN too); an option left None is not checked."""
    for name, minimum in minimums.items():
        value = getattr(args, name)
        if value is not None and not value >= minimum:
            kind = "a whole number" if isinstance(value, int) else "a number"
            ap.error(f"{flag(name)}: expected {kind} >= {minimum:g}, got {value}")


def above(ap: argparse.ArgumentParser, args: argparse.Namespace, **bounds: float) -> None:
    """``ap.error`` for the first option not above its bound (NaN too)."""
    for name, bound in bounds.items():
        value = getattr(args, name)
        if not value > bound:
            ap.error(f"{flag(name)}: expected a number > {bound:g}, got {value}")


def sample_costs(ap: argparse.ArgumentParser, text: str, name: str = "--sample-ms") -> list[tuple[str, float, float]]:
    """``1.5,0.2+4`` as (the value as typed, CPU ms, IO ms) per sample cost, each a number >= 0."""
    out = []
    for sample in text.split(","):
        cpu, _, io = sample.partition("+")
        try:
            cpu_ms, io_ms = float(cpu), float(io or 0)
        except ValueError:
            cpu_ms = io_ms = float("nan")
        if not (cpu_ms >= 0 and io_ms >= 0):
            ap.error(
                f"{name}: expected CPU ms or CPU+IO ms (numbers >= 0), comma-separated, like 1.5,0.2+4; got {text!r}"
            )
        out.append((sample, cpu_ms, io_ms))
    return out


def worker_changes(ap: argparse.ArgumentParser, text: str, name: str = "--changes") -> list[tuple[int, ...]]:
    """``1:2,2:4:2`` as worker-count paths, each of two or more counts >= 0."""
    try:
        changes = [tuple(int(x) for x in c.split(":")) for c in text.split(",")]
    except ValueError:
        ap.error(f"{name}: expected worker counts like 1:2,2:4:2, got {text!r}")
    if any(len(c) < 2 or min(c) < 0 for c in changes):
        ap.error(f"{name}: each change needs two or more worker counts >= 0, got {text!r}")
    return changes


def service_url(ap: argparse.ArgumentParser, text: str, name: str = "--url") -> str:
    """An http(s) address with a host and, if any, a port from 1 to 65535 (else httpx's traceback, or
    two minutes of waiting for a /health that no such address answers)."""
    try:
        parts = urlsplit(text)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname) and parts.port != 0
    except ValueError:  # a port that is not a number, or past 65535
        ok = False
    if not ok:
        ap.error(f"{name}: expected the service's http(s) address, e.g. http://127.0.0.1:8470, got {text!r}")
    return text
