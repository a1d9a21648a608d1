"""The ``profiles/`` folder: measured curves shipped with the project, written by the CLI.

Each file is one :class:`~adlrec.schemas.Profile` as JSON (hardware fingerprint and the exact
command that measured it included) plus the MLflow run it came from.  ``README.md`` in the folder is
an index generated with the files; neither is edited by hand.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol, TypeVar

from adlrec.schemas import ENOUGH_SHARE, Profile, json_text

__all__ = [
    "export_profiles",
    "file_name",
    "load_profiles",
    "measured_at",
    "newest_first",
    "newest_per_key",
    "profile_key",
    "write_index",
]

T = TypeVar("T")


class _Run(Protocol):
    run_id: str
    profile: Profile


def profile_key(p: Profile) -> str:
    """What makes two profiles the same measurement: workload, params, device and hardware."""
    raw = json.dumps([p.workload, p.params, p.batch_size, p.device.label, p.hardware.fingerprint], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:10]


def file_name(p: Profile) -> str:
    """The file a profile is exported to: workload, device and its key (the same measurement, the same name)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{p.workload}-{p.device.label.replace(':', '')}")
    return f"{slug}-{profile_key(p)}.json"


def export_profiles(runs: Sequence[_Run], out: Path, skipped: list[str] | None = None) -> list[Path]:
    """Write the newest measurement per :func:`profile_key` and the index.

    Newest by the profile's own ``created_at``, not by when its run was logged: ``profiles import``
    logs curves measured elsewhere, earlier or later, in any order.  Of two measured at the same time,
    the run first in ``runs`` (newest logged first) wins.  A run whose profile could not be imported
    (logged before the checks it fails) is not written, and neither is a file already in ``out`` that is
    not a profile indexed: each is named in ``skipped``.
    """
    from adlrec.profile.check import profile_problem

    skipped = [] if skipped is None else skipped
    usable = []
    for r in runs:
        problem = profile_problem(r.profile)
        if problem:
            skipped.append(f"run {r.run_id}: {problem}")
        else:
            usable.append(r)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for r in newest_per_key(usable, lambda r: r.profile).values():
        path = out / file_name(r.profile)
        path.write_text(json_text(r.profile.to_dict() | {"mlflow_run_id": r.run_id}) + "\n")
        written.append(path)
    written.append(write_index(out, skipped))
    return written


def newest_per_key(items: Iterable[T], profile_of: Callable[[T], Profile]) -> dict[str, T]:
    """The item whose profile was measured last, per :func:`profile_key`; of two measured at the same
    time, the first.  Keys keep the order in which they first appear."""
    newest: dict[str, T] = {}
    for item in items:
        key = profile_key(profile_of(item))
        if key not in newest or measured_at(profile_of(item)) > measured_at(profile_of(newest[key])):
            newest[key] = item
    return newest


def newest_first(items: Iterable[T], profile_of: Callable[[T], Profile]) -> list[T]:
    """The items, the newest measurement first (``created_at``, not when a run was logged: ``profiles
    import`` logs curves measured elsewhere in any order); one whose time does not parse comes last."""

    def when(item: T) -> datetime:
        try:
            return measured_at(profile_of(item))
        except ValueError:
            return datetime.min.replace(tzinfo=timezone.utc)

    return sorted(items, key=when, reverse=True)


def measured_at(p: Profile) -> datetime:
    """When the profile was measured (``created_at``; a time without a zone is read as UTC).

    Raises ``ValueError`` if ``created_at`` is not an ISO 8601 time.
    """
    text = p.created_at
    t = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)  # Python 3.10 lacks Z
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def write_index(out: Path, skipped: list[str] | None = None) -> Path:
    """(Re)write ``out/README.md`` from the profiles in ``out`` and the tables in ``out/published/``;
    a ``.json`` file there that is not a profile is left out of the index and named in ``skipped``."""
    profiles = load_profiles(out, [] if skipped is None else skipped)
    index = out / "README.md"
    index.write_text(_index(profiles) + _published_index(sorted((out / "published").glob("*.json"))))
    return index


def load_profiles(folder: Path, skipped: list[str] | None = None) -> list[Profile]:
    """Every profile JSON in ``folder``, sorted by file name, each checked as ``profiles import`` checks it.

    A file that is not a valid profile raises ``ValueError`` naming it and what is wrong; given
    ``skipped``, it is left out and that line appended instead.
    """
    from adlrec.profile.check import read_profile  # check reads this module's measured_at

    profiles = []
    for f in sorted(folder.glob("*.json")):
        try:
            profiles.append(read_profile(f))
        except ValueError as exc:
            if skipped is None:
                raise
            skipped.append(str(exc))
    return profiles


def _index(profiles: Iterable[Profile]) -> str:
    lines = [
        "# Measured profiles",
        "",
        "Written by `adlrec profiles export`; do not edit by hand. Each JSON file holds one curve, the",
        "hardware it was measured on and the exact command that measured it. Curves measured with",
        "`--device emulate:MS` replace the training step with a timed wait (EMULATED accelerator);",
        "their data loading is real.",
        "",
        f"| file | workload | device | params | best workers | best samples/s | {ENOUGH_SHARE:.0%} of best at | "
        "throughput by workers | hardware | command |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in sorted(profiles, key=file_name):
        params = ", ".join(f"{k}={v}" for k, v in sorted(p.params.items()))
        curve = " / ".join(f"{q.throughput:.0f}" for q in p.points)
        lines.append(
            f"| {file_name(p)} | {p.workload} | {p.device.title} | {params} | {p.best.workers} | "
            f"{p.best.throughput:,.1f} | {p.enough().workers} | {curve} | {p.hardware.summary} | `{p.command}` |"
        )
    return "\n".join(lines) + "\n"


def _published_index(files: Sequence[Path]) -> str:
    """The tables others published, kept in ``published/`` (read by ``adlrec trace generate --curves``)."""
    if not files:
        return ""
    lines = [
        "",
        "## Published curves (not measured here)",
        "",
        "Throughput-against-CPU tables that others measured and published, each with where it comes",
        "from; `adlrec trace generate --curves <name>` draws jobs from one (see docs/simulate.md).",
        "",
        "| file | name | models | source |",
        "|---|---|---|---|",
    ]
    for f in files:
        try:
            doc = json.loads(f.read_text())
            name, models, source = doc.get("name", ""), len(doc.get("models", {})), doc.get("source", "")
        except (OSError, ValueError, AttributeError) as exc:
            name, models, source = "", 0, f"unreadable: {exc}"
        lines.append(f"| published/{f.name} | {name} | {models} | {source} |")
    return "\n".join(lines) + "\n"
