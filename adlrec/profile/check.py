"""Reading one profile JSON file from outside the store, checked field by field (``profiles import``).

A file may come from another machine, another version or a hand edit.  Everything in it is checked
before anything is stored: every field of the records it becomes has the type the record declares
(numbers finite, but for relative standard errors, which are infinite, or null in strict JSON, when
too few batches came to estimate them; ``bool`` never taken for a number, nor a string for one), and
the values are ones a sweep produces (rates > 0, sizes >= 0, shares in [0, 1]), so that a file that
passes can be keyed, logged, listed, exported and trained on without an error later.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from pathlib import Path
from typing import Any

from adlrec.job import param_key_problem
from adlrec.profile.library import measured_at
from adlrec.schemas import Profile

__all__ = ["profile_problem", "read_profile"]

# relative standard errors: infinite when too few batches came to estimate one (steady.py)
_ERRORS = frozenset({"rse", "ceiling_rse", "ceiling_end_rse"})


def read_profile(path: Path) -> Profile:
    """One profile from a JSON file: ``adlrec profile --json`` output, or a file ``profiles export`` wrote.

    Raises ``ValueError`` naming the file and what is wrong with it.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not UTF-8 text; expected one profile as JSON") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if not text.strip():
        raise ValueError(f"{path}: the file is empty; expected one profile as JSON (adlrec profile --json)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}); expected one profile as JSON") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply to be a profile") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object holding one profile, got a {type(doc).__name__}")
    for key, value in (("points", doc.get("points", [])), ("notes", doc.get("notes", []))):
        if not isinstance(value, list):  # from_dict would take a string's letters for a list
            raise ValueError(f"{path}: {key}: expected a list, got {_kind(value)}")
    try:
        profile = Profile.from_dict(doc)
    except KeyError as exc:
        raise ValueError(f"{path}: not a profile: the key {exc.args[0]!r} is missing") from None
    except (TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"{path}: not a profile: {exc}") from None
    problem = profile_problem(profile)
    if problem:
        raise ValueError(f"{path}: {problem}")
    return profile


def profile_problem(p: Profile) -> str:
    """What makes a parsed profile unusable, or an empty string."""
    problem = _type_problem(p, Profile, "profile")
    if problem:
        return problem
    for name in ("workload", "command", "created_at"):
        if not getattr(p, name).strip():
            return f"{name} is empty; expected a non-empty string"
    if p.device.kind not in ("cpu", "cuda", "emulate"):
        return f"device kind {p.device.kind!r}: expected cpu, cuda or emulate"
    if p.device.emulated != (p.device.step_ms is not None):
        return "device step_ms: expected a number of milliseconds for emulate, and none for cpu or cuda"
    if p.device.emulated and not 0 < p.device.step_ms <= _DAY_MS:
        return f"an emulated device needs 0 < step_ms <= {_DAY_MS} (a day), got {p.device.step_ms!r}"
    if p.batch_size < 1 or not p.budget_s > 0 or not 0 < p.rse_target < 1:
        return "batch_size >= 1, budget_s > 0 and 0 < rse_target < 1 expected"
    if p.hardware.logical_cores < 1:
        return f"hardware logical_cores {p.hardware.logical_cores}: expected a whole number >= 1"
    for key in p.params:  # a file written by hand: MLflow refused such a key at import, after its run began
        problem = param_key_problem(key)
        if problem:
            return f"params key {problem}"
    if not p.points:
        return "the profile has no points; expected one per worker count"
    workers = [q.workers for q in p.points]
    if any(w < 0 for w in workers) or len(set(workers)) != len(workers):
        return f"point workers {workers}: expected distinct whole numbers >= 0"
    problem = _value_problem(p)
    if problem:
        return problem
    try:
        measured_at(p)
    except ValueError:
        return f"created_at {p.created_at!r}: expected an ISO 8601 time"
    return ""


def _value_problem(p: Profile) -> str:
    """The first value no real sweep produces: a rate of 0 or less (``decompose`` refuses one during the
    sweep, and ``model fit`` divides by it), a negative size or time, a share outside [0, 1]."""
    b = p.baseline
    rules = [
        ("baseline.ceiling", b.ceiling, _POSITIVE),
        ("baseline.prep_rate", b.prep_rate, _POSITIVE),
        ("baseline.ceiling_end", b.ceiling_end, _POSITIVE),  # None: measured before the bookend
        *((f"baseline.{k}", getattr(b, k), _NON_NEGATIVE) for k in ("fetch_cold_s", "fetch_cached_s", "fetch_bytes")),
        ("hardware.memory_gb", p.hardware.memory_gb, _NON_NEGATIVE),
        *((f"hardware.gpus[{i}].memory_gb", g.memory_gb, _NON_NEGATIVE) for i, g in enumerate(p.hardware.gpus)),
    ]
    rules += [(f"params.{k}", v, _FINITE) for k, v in p.params.items() if isinstance(v, float)]
    for i, q in enumerate(p.points):
        for names, rule in _POINT_RULES:
            rules += [(f"points[{i}].{k} (workers={q.workers})", getattr(q, k), rule) for k in names]
    for where, value, (ok, expected) in rules:
        if value is not None and not ok(value):
            return f"profile.{where}: expected {expected}, got {value!r}"
    return ""


_DAY_MS = 86_400_000  # an emulated step longer than a day is a typo, not a device
_POSITIVE = (lambda v: v > 0, "a number > 0 (samples/s)")
_NON_NEGATIVE = (lambda v: v >= 0, "a number >= 0")
_SHARE = (lambda v: 0 <= v <= 1, "a share in [0, 1]")
_FINITE = (math.isfinite, "a finite number (JSON has no NaN or Infinity)")
_POINT_RULES = (
    (("throughput", "prep_rate"), _POSITIVE),
    (("stall_fraction", "prep_share", "fetch_share"), _SHARE),
    (
        ("batches", "seconds", "wait_fraction", "cpu_util", "worker_uss_mb", "worker_pss_mb", "main_rss_mb"),
        _NON_NEGATIVE,
    ),
)


def _type_problem(value: Any, hint: Any, where: str) -> str:
    """Whether ``value`` has the type ``hint`` (a record's annotation), recursively; the first mismatch."""
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        for f in dataclasses.fields(hint):
            problem = _type_problem(getattr(value, f.name), hints[f.name], f"{where}.{f.name}")
            if problem:
                return problem
        return ""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        problems = [_type_problem(value, a, where) for a in args]
        return "" if "" in problems else problems[0]
    if origin is tuple:
        if not isinstance(value, tuple):
            return f"{where}: expected a list, got {_kind(value)}"
        return next((pr for i, v in enumerate(value) if (pr := _type_problem(v, args[0], f"{where}[{i}]"))), "")
    if origin is dict:
        return "" if isinstance(value, dict) else f"{where}: expected an object, got {_kind(value)}"
    if hint is type(None):
        return "" if value is None else f"{where}: expected null, got {_kind(value)}"
    if hint is bool:
        return "" if isinstance(value, bool) else f"{where}: expected true or false, got {_kind(value)}"
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return "" if ok else f"{where}: expected a whole number, got {_kind(value)}"
    if hint is float:
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value)
        if where.rsplit(".", 1)[-1] in _ERRORS:
            ok = number and value >= 0
            return "" if ok else f"{where}: expected a number >= 0 (inf: not estimated), got {_kind(value)}"
        return "" if number and math.isfinite(value) else f"{where}: expected a finite number, got {_kind(value)}"
    if hint is str:
        return "" if isinstance(value, str) else f"{where}: expected a string, got {_kind(value)}"
    raise TypeError(f"no check for {hint!r} at {where}")  # a record field of a new type: add it above


def _kind(value: Any) -> str:
    """The value as the file wrote it, short: ``null``, ``true``, ``8.7``, ``a str '8'``, ``a list``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return f"a str {value[:40]!r}" + ("..." if len(value) > 40 else "")
    return f"a {type(value).__name__}"
