"""Curves published by others, as tables of throughput per GPU against CPUs per GPU.

The measured profiles in ``profiles/`` come from a small machine with an emulated accelerator; a
published table (``profiles/published/*.json``, each naming its source) gives the simulator curves
measured on GPU servers by someone else, so a policy can be judged on a workload we did not make.

A table gives, per model, throughput normalised to a reference at CPUs-per-GPU grid points ``c``
(e.g. Synergy's 1, 2, 3, 4, 5, 6, 9, 12, 24), plus the batch size and iteration time at the reference
(``batch / iter_time`` samples/s = 1.0).  One of a rank's ``c`` CPUs runs its training process, so
``w`` loader workers per rank is the point ``c = w + 1``; between grid points the rate is linear, past
the last one it stays flat.  Memory per worker is not part of these tables (0: not modelled).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from adlrec.errors import UsageError

__all__ = ["PublishedRank", "load_published", "published_files"]


@dataclass(frozen=True)
class PublishedRank:
    """One model's per-rank rate from a published table; the same interface as ``PipelineParams``."""

    name: str  # "<table>:<model>", the name a trace uses
    task: str  # the model's task class (image, language, speech, ...)
    cpus: tuple[float, ...]  # the grid: CPUs per GPU, increasing, the first >= 1
    normalised: tuple[float, ...]  # throughput at each grid point, 1.0 = the reference
    reference_rate: float  # samples/s at 1.0: batch / iteration time
    share: float = 1.0  # how often a generated trace draws it, relative to the table's other models
    mem_per_worker_mb: int = 0  # not in the tables: memory is not modelled

    def rate(self, workers: int) -> float:
        """One rank's samples/s with ``workers`` loader workers (``workers + 1`` CPUs)."""
        c = workers + 1.0
        xs, ys = self.cpus, self.normalised
        if c <= xs[0]:
            return ys[0] * self.reference_rate
        for x0, x1, y0, y1 in zip(xs, xs[1:], ys, ys[1:], strict=False):
            if c <= x1:
                return (y0 + (c - x0) / (x1 - x0) * (y1 - y0)) * self.reference_rate
        return ys[-1] * self.reference_rate

    def workers_to_peak(self) -> int:
        """The fewest workers per rank at which the table reaches its maximum."""
        peak = max(self.normalised)
        first = next(x for x, y in zip(self.cpus, self.normalised, strict=True) if y >= peak)
        return max(0, math.ceil(first) - 1)


def published_files(folder: Path) -> list[Path]:
    """The published tables kept beside measured profiles: ``folder/published/*.json``, by name."""
    return sorted((folder / "published").glob("*.json"))


def load_published(path: Path) -> list[tuple[str, PublishedRank]]:
    """The table's models as ``(name, rank)`` pairs, named ``<table>:<model>``, in the file's order.

    Raises :class:`UsageError` naming the file and field for anything malformed."""
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise UsageError(f"cannot read published curves {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"published curves {path}: not JSON ({exc})") from None
    where = f"published curves {path}"
    if not isinstance(doc, Mapping):
        raise UsageError(f"{where}: expected a JSON object")
    table = doc.get("name")
    if not isinstance(table, str) or not table or ":" in table:
        raise UsageError(f"{where}, field name: expected a non-empty name without ':', got {table!r}")
    cpus = _numbers(doc.get("cpus_per_gpu"), f"{where}, field cpus_per_gpu")
    if cpus[0] < 1 or any(b <= a for a, b in zip(cpus, cpus[1:], strict=False)):
        raise UsageError(f"{where}, field cpus_per_gpu: expected increasing values >= 1, got {list(cpus)}")
    models = doc.get("models")
    if not isinstance(models, Mapping) or not models:
        raise UsageError(f"{where}, field models: expected an object of models")
    shares = doc.get("task_share", {})
    if not isinstance(shares, Mapping):
        raise UsageError(f"{where}, field task_share: expected an object of task -> share")
    per_task: dict[str, int] = {}
    parsed = []
    for model, m in models.items():
        at = f"{where}, model {model!r}"
        if not isinstance(m, Mapping):
            raise UsageError(f"{at}: expected an object")
        task = m.get("task")
        if not isinstance(task, str) or not task:
            raise UsageError(f"{at}, field task: expected a task name, got {task!r}")
        values = _numbers(m.get("normalised"), f"{at}, field normalised")
        if len(values) != len(cpus) or min(values) < 0 or max(values) <= 0:
            raise UsageError(
                f"{at}, field normalised: expected {len(cpus)} values >= 0 (one per cpus_per_gpu), not all 0"
            )
        batch, step = m.get("batch"), m.get("iter_time_s")
        if not _positive(batch) or not _positive(step):
            raise UsageError(f"{at}: expected batch > 0 and iter_time_s > 0, got {batch!r} and {step!r}")
        per_task[task] = per_task.get(task, 0) + 1
        parsed.append((model, task, values, float(batch) / float(step)))
    out = []
    for model, task, values, rate in parsed:
        share = shares.get(task) if shares else 1.0
        if not _positive(share):
            raise UsageError(f"{where}, field task_share: expected a share > 0 for {task!r}, got {share!r}")
        name = f"{table}:{model}"
        out.append((name, PublishedRank(name, task, cpus, values, rate, float(share) / per_task[task])))
    return out


def _numbers(value: object, where: str) -> tuple[float, ...]:
    if not isinstance(value, Sequence) or isinstance(value, str) or not value or not all(_finite(v) for v in value):
        raise UsageError(f"{where}: expected a non-empty list of numbers, got {value!r}")
    return tuple(float(v) for v in value)


def _finite(v: object) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _positive(v: object) -> bool:
    return _finite(v) and float(v) > 0  # type: ignore[arg-type]
