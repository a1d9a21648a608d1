"""The ``profiles/`` folder: measured curves shipped with the project, written by the CLI.

Each file is one :class:`~adlrec.schemas.Profile` as JSON (hardware fingerprint and the exact
command that measured it included) plus the MLflow run it came from.  ``README.md`` in the folder is
an index generated with the files; neither is edited by hand.  :func:`read_profile` reads one such
file, or what ``adlrec profile --json`` printed on a machine without the store, for
``adlrec profiles import``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Protocol

from adlrec.schemas import ENOUGH_SHARE, Profile

__all__ = ["export_profiles", "load_profiles", "profile_key", "read_profile", "write_index"]


class _Run(Protocol):
    run_id: str
    profile: Profile


def profile_key(p: Profile) -> str:
    """What makes two profiles the same measurement: workload, params, device and hardware."""
    raw = json.dumps([p.workload, p.params, p.batch_size, p.device.label, p.hardware.fingerprint], sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:10]


def _file_name(p: Profile) -> str:
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{p.workload}-{p.device.label.replace(':', '')}")
    return f"{slug}-{profile_key(p)}.json"


def export_profiles(runs: Sequence[_Run], out: Path) -> list[Path]:
    """Write the newest measurement per :func:`profile_key` and the index.

    Newest by the profile's own ``created_at``, not by when its run was logged: ``profiles import``
    logs curves measured elsewhere, earlier or later, in any order.  Of two measured at the same time,
    the run first in ``runs`` (newest logged first) wins.
    """
    out.mkdir(parents=True, exist_ok=True)
    newest: dict[str, _Run] = {}
    for r in runs:
        key = profile_key(r.profile)
        if key not in newest or _measured(r.profile) > _measured(newest[key].profile):
            newest[key] = r
    written = []
    for r in newest.values():
        path = out / _file_name(r.profile)
        path.write_text(json.dumps(r.profile.to_dict() | {"mlflow_run_id": r.run_id}, indent=2) + "\n")
        written.append(path)
    written.append(write_index(out))
    return written


def _measured(p: Profile) -> datetime:
    t = datetime.fromisoformat(p.created_at)
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def write_index(out: Path) -> Path:
    """(Re)write ``out/README.md`` from the profiles in ``out`` and the tables in ``out/published/``."""
    index = out / "README.md"
    index.write_text(_index(load_profiles(out)) + _published_index(sorted((out / "published").glob("*.json"))))
    return index


def load_profiles(folder: Path) -> list[Profile]:
    """Every profile JSON in ``folder``, sorted by file name."""
    return [Profile.from_dict(json.loads(f.read_text())) for f in sorted(folder.glob("*.json"))]


def read_profile(path: Path) -> Profile:
    """One profile from a JSON file: ``adlrec profile --json`` output, or a file ``profiles export`` wrote.

    Raises ``ValueError`` naming the file and what is wrong with it (unreadable, not JSON, a key
    missing, a value out of range), so that a caller can check every file before storing any.
    """
    try:
        text = path.read_text()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if not text.strip():
        raise ValueError(f"{path}: the file is empty; expected one profile as JSON (adlrec profile --json)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}); expected one profile as JSON") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object holding one profile, got a {type(doc).__name__}")
    try:
        profile = Profile.from_dict(doc)
    except KeyError as exc:
        raise ValueError(f"{path}: not a profile: the key {exc.args[0]!r} is missing") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a profile: {exc}") from None
    problem = _profile_problem(profile)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return profile


def _profile_problem(p: Profile) -> str:
    """What makes a parsed profile unusable, or an empty string."""
    if p.device.kind not in ("cpu", "cuda", "emulate"):
        return f"device kind {p.device.kind!r}: expected cpu, cuda or emulate"
    if p.device.emulated and not (isinstance(p.device.step_ms, (int, float)) and p.device.step_ms > 0):
        return f"an emulated device needs step_ms > 0, got {p.device.step_ms!r}"
    if not p.points:
        return "the profile has no points; expected one per worker count"
    workers = [q.workers for q in p.points]
    if any(not isinstance(w, int) or w < 0 for w in workers) or len(set(workers)) != len(workers):
        return f"point workers {workers}: expected distinct whole numbers >= 0"
    bad = [q.workers for q in p.points if not (math.isfinite(q.throughput) and q.throughput >= 0)]
    if bad:
        return f"throughput at workers={bad}: expected a finite number >= 0"
    if not (isinstance(p.hardware.logical_cores, int) and p.hardware.logical_cores >= 1):
        return f"hardware logical_cores {p.hardware.logical_cores!r}: expected a whole number >= 1"
    try:
        datetime.fromisoformat(p.created_at)
    except (TypeError, ValueError):
        return f"created_at {p.created_at!r}: expected an ISO 8601 time"
    return ""


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
    for p in sorted(profiles, key=_file_name):
        params = ", ".join(f"{k}={v}" for k, v in sorted(p.params.items()))
        curve = " / ".join(f"{q.throughput:.0f}" for q in p.points)
        lines.append(
            f"| {_file_name(p)} | {p.workload} | {p.device.title} | {params} | {p.best.workers} | "
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
