"""The CSV trace format (docs/simulate.md), the catalogue of profiles a trace names, and trace -> jobs.

A trace is a CSV file with a header; lines starting with ``#`` are comments.  Required columns:
``job_id,arrival_s,work_samples,profile,gpus,requested_workers``; optional: ``weight``.  Every
mistake is a :class:`~adlrec.errors.UsageError` naming the line and column and what was expected.
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from adlrec.errors import UsageError
from adlrec.profile.check import read_profile
from adlrec.profile.library import profile_key
from adlrec.schemas import MAX_WORKERS, Profile
from adlrec.simulate.curves import RankModel, job_curve, pipeline_params
from adlrec.simulate.published import PublishedRank, load_published, published_files
from adlrec.simulate.records import Node, TraceJob
from adlrec.words import count

__all__ = [
    "OPTIONAL_COLUMNS",
    "REQUIRED_COLUMNS",
    "ProfileCatalog",
    "TraceRow",
    "build_jobs",
    "format_trace",
    "parse_trace",
    "profile_catalog",
    "profile_files",
    "profile_name",
    "rank_model",
    "read_trace",
    "trace_hash",
]

Curves = Profile | PublishedRank  # what a trace's profile column may name

REQUIRED_COLUMNS = ("job_id", "arrival_s", "work_samples", "profile", "gpus", "requested_workers")
OPTIONAL_COLUMNS = ("weight",)


@dataclass(frozen=True)
class TraceRow:
    """One line of a trace file."""

    job_id: str
    arrival_s: float  # seconds from the start of the trace
    work_samples: float  # samples to train on
    profile: str  # a profile in the catalogue: file name, workload@device, or profile key
    gpus: int  # GPUs (ranks) the job holds
    requested_workers: int  # num_workers its script sets, per rank
    weight: float = 1.0  # priority under the weighted objective
    line: int = field(default=0, compare=False)  # where it was read from (0: not from a file)


def profile_name(p: Profile) -> str:
    """The name a generated trace uses for a profile: ``workload@device``."""
    return f"{p.workload}@{p.device.label}"


def profile_files(folder: Path) -> list[tuple[str, Profile]]:
    """Every profile in ``folder`` with its file stem (the name generated traces use), by file name.

    A file that is not a valid profile raises ``ValueError`` naming it (:func:`read_profile`).
    """
    return [(f.stem, read_profile(f)) for f in sorted(folder.glob("*.json"))]


def rank_model(curves: Curves) -> RankModel:
    """A rank's rate by workers: fitted to a measured profile, or a published table as it is."""
    return curves if isinstance(curves, PublishedRank) else pipeline_params(curves)


class ProfileCatalog(dict[str, Curves]):
    """Names a trace may use, each for one profile; ``ambiguous`` holds the names several profiles share
    (name -> their file stems), which a trace cannot use."""

    def __init__(self, names: Mapping[str, Curves] = (), ambiguous: Mapping[str, Sequence[str]] = ()) -> None:
        super().__init__(names)
        self.ambiguous: dict[str, tuple[str, ...]] = {k: tuple(v) for k, v in dict(ambiguous).items()}


def profile_catalog(folder: Path) -> ProfileCatalog:
    """Every profile in ``folder`` under each name a trace may use for it, and every published model.

    Names: the file name, its stem, ``workload@device`` and the 10-character profile key.  A name that
    two profiles share (``workload@device`` for two parameter sets) is dropped, and kept in
    ``ambiguous`` with the file stems that share it: use one of those.  Published tables
    (``folder/published/*.json``) add ``<table>:<model>`` names.
    """
    names: dict[str, Curves] = {}
    holders: dict[str, list[tuple[str, Profile]]] = {}  # name -> the files whose profile it names
    for stem, p in profile_files(folder):
        for name in dict.fromkeys((f"{stem}.json", stem, profile_name(p), profile_key(p))):
            names.setdefault(name, p)
            holders.setdefault(name, []).append((stem, p))
    ambiguous = {  # names of two different profiles (not of two copies of one)
        name: sorted(stem for stem, _ in held)
        for name, held in holders.items()
        if any(p != held[0][1] for _, p in held)
    }
    for path in published_files(folder):
        published = load_published(path)
        names.update(published)
        for name in published:
            ambiguous.pop(name, None)
    return ProfileCatalog({k: v for k, v in names.items() if k not in ambiguous}, ambiguous)


_PLAIN = {int: re.compile(r"[+-]?[0-9]+"), float: re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")}


def _number(kind: type, check: Callable[[float], bool], expected: str):
    def parse(text: str):
        if not _PLAIN[kind].fullmatch(text):  # no Python-only spellings: 1_0, inf, nan, 0x10
            return None, expected
        try:
            v = kind(text)
        except ValueError:
            return None, expected
        if isinstance(v, float) and not math.isfinite(v):
            return None, expected
        return (v, "") if check(v) else (None, expected)

    return parse


_PARSERS = {
    "arrival_s": _number(float, lambda v: v >= 0, "a number of seconds >= 0"),
    "work_samples": _number(float, lambda v: v > 0, "a number of samples > 0"),
    "gpus": _number(int, lambda v: v >= 1, "a whole number of GPUs >= 1"),
    # the project's bound on num_workers (profile --max-workers, trace generate --num-workers); `fixed`
    # gives a job this many per rank, and its curve reaches that count
    "requested_workers": _number(int, lambda v: 0 <= v <= MAX_WORKERS, f"a whole number of workers 0..{MAX_WORKERS}"),
    "weight": _number(float, lambda v: v >= 0, "a weight >= 0"),
}


def parse_trace(text: str, source: str = "trace") -> list[TraceRow]:
    """Parse a trace's text; ``source`` names it in error messages."""
    header: list[str] | None = None
    rows: list[TraceRow] = []
    first_line: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        try:
            cells = [c.strip() for c in next(csv.reader([raw]))]
        except csv.Error as exc:  # a cell past the csv module's field limit: not a trace, most likely
            raise UsageError(f"{source} line {n}: not a CSV line ({exc}); expected comma-separated fields") from None
        if header is None:
            missing = [c for c in REQUIRED_COLUMNS if c not in cells]
            unknown = [c for c in cells if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS]
            repeated = sorted({c for c in cells if cells.count(c) > 1})
            if missing or unknown or repeated:
                wrong = "; ".join(
                    f"{what} {', '.join(repr(c) for c in cols)}"
                    for what, cols in (("missing", missing), ("unknown", unknown), ("repeated", repeated))
                    if cols
                )
                raise UsageError(
                    f"{source} line {n}: {wrong}; expected a header with columns {','.join(REQUIRED_COLUMNS)} "
                    f"(optional: {','.join(OPTIONAL_COLUMNS)}), got {raw.strip()!r}"
                )
            header = cells
            continue
        if len(cells) != len(header):
            raise UsageError(f"{source} line {n}: expected {len(header)} fields ({','.join(header)}), got {len(cells)}")
        values: dict[str, object] = {}
        for col, cell in zip(header, cells, strict=True):
            if col in OPTIONAL_COLUMNS and not cell:  # a spreadsheet's blank cell: the column's default
                continue
            if col in _PARSERS:
                v, expected = _PARSERS[col](cell)
                if v is None:
                    raise UsageError(f"{source} line {n}, column {col}: expected {expected}, got {cell!r}")
                values[col] = v
            elif not cell:
                raise UsageError(f"{source} line {n}, column {col}: expected a non-empty value")
            else:
                values[col] = cell
        job_id = str(values["job_id"])
        if job_id in first_line:
            raise UsageError(
                f"{source} line {n}, column job_id: expected a unique id, {job_id!r} is already on line "
                f"{first_line[job_id]}"
            )
        first_line[job_id] = n
        rows.append(TraceRow(**values, line=n))  # type: ignore[arg-type]
    if header is None:
        raise UsageError(f"{source}: empty; expected a header line {','.join(REQUIRED_COLUMNS)}")
    if not rows:
        raise UsageError(f"{source}: no jobs after the header")
    return rows


def read_trace(path: Path) -> tuple[list[TraceRow], str]:
    """The rows of a trace file and the hash of its bytes."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read trace {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8-sig")  # a byte-order mark (spreadsheets' "CSV UTF-8") is dropped
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UsageError(f"{path} line {line}: expected UTF-8 text, got byte 0x{data[exc.start]:02x}") from None
    return parse_trace(text, source=str(path)), trace_hash(text)


def trace_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def format_trace(rows: Iterable[TraceRow], comments: Sequence[str] = ()) -> str:
    """A trace's CSV text; ``comments`` go first, each as a ``#`` line."""
    lines = [f"# {c}" for c in comments]
    lines.append(",".join(REQUIRED_COLUMNS + OPTIONAL_COLUMNS))
    for r in rows:
        lines.append(
            f"{r.job_id},{r.arrival_s:.1f},{r.work_samples:.0f},{r.profile},{r.gpus},{r.requested_workers},{r.weight:g}"
        )
    return "\n".join(lines) + "\n"


def build_jobs(
    rows: Sequence[TraceRow], catalog: Mapping[str, Curves], node: Node, source: str = "trace", lockstep: bool = False
) -> list[TraceJob]:
    """Each row as a job with its curve on ``node`` (derived from its profile, see curves.py, or
    read from a published table, see published.py); ``lockstep``: a multi-GPU job's ranks step
    together (:func:`~adlrec.simulate.curves.job_curve`)."""
    jobs = []
    for r in rows:
        profile = catalog.get(r.profile)
        shared = getattr(catalog, "ambiguous", {}).get(r.profile)
        if profile is None and shared:
            raise UsageError(
                f"{source} line {r.line}, column profile: {r.profile!r} names {len(shared)} profiles "
                f"({', '.join(shared)}); expected one of those file stems"
            )
        if profile is None:
            known = sorted(k for k in catalog if "@" in k or ":" in k)
            hint = f"e.g. a file stem, or one of {', '.join(known)}" if known else "the profiles folder has no profiles"
            raise UsageError(f"{source} line {r.line}, column profile: no profile named {r.profile!r} ({hint})")
        if r.gpus > node.gpus:
            raise UsageError(
                f"{source} line {r.line}, column gpus: the node has {count(node.gpus, 'GPU')}, the job asks {r.gpus}"
            )
        try:
            params = rank_model(profile)
        except ValueError as exc:
            raise UsageError(f"{source} line {r.line}, column profile: {exc}") from None
        curve = job_curve(params, r.gpus, node.cores, lockstep)
        # `fixed` gives a job the workers its script asks for even past the node's cores, and a policy
        # never gives more than the curve's last index: stopping the curve at the cores would quietly
        # cut such a job's workers and hide the oversubscription.  No budgeted policy can give more than
        # the cores, so the points past them repeat the last one (the job's peak on this node stays).
        curve += curve[-1:] * max(0, r.requested_workers * r.gpus - node.cores)
        jobs.append(
            TraceJob(
                job_id=r.job_id,
                arrival_s=r.arrival_s,
                work_samples=r.work_samples,
                curve=curve,
                gpus=r.gpus,
                requested_workers=r.requested_workers,
                mem_per_worker_mb=params.mem_per_worker_mb,
                weight=r.weight,
                profile=r.profile,
                ranks=r.gpus if lockstep else 1,
            )
        )
    return jobs
