"""Curves for a node larger than the one a profile was measured on, from the profile's parameters.

The shipped profiles were measured on a small machine (2 cores, so ``w <= 4``), while a realistic node
has tens of cores.  Each job's curve on the node is *derived from measured profile parameters* with an
analytic pipeline model (ours; the seed publishes no model):

* ``C``: the compute ceiling, ``baseline.ceiling`` (training steps with data already on the device);
* ``P0``: the in-process loader rate, ``baseline.prep_rate`` (0 workers, loader alone);
* ``p``: the rate of one loader worker: the median of ``P(w) / w`` (each point's loader-alone rate)
  over the points where the workers and the draining main process fit the measuring machine's cores
  without contention (``1 <= w <= max(1, cores - 1)``);

and, for one rank (one GPU), ``T(0) = 1 / (1/C + 1/P0)`` (in-process loading does not overlap the
step) and ``T(w) = min(C, p * w)`` for ``w >= 1`` (workers overlap it; the slower side sets the rate).
A job on ``g`` GPUs runs ``g`` ranks, each with its own loader; ``W`` workers split as evenly as they
can (``W mod g`` ranks get one more), so the job's curve is the sum of its ranks' rates.  That treats
the ranks as independent.  In synchronous data-parallel training (DDP) every step waits for the
slowest rank, so with ``lockstep`` the job runs at ``g * rate(W // g)``: workers past a multiple of
``g`` add nothing.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Protocol

from adlrec.allocate.ranks import lockstep_curve
from adlrec.schemas import Profile

__all__ = ["PipelineParams", "RankModel", "job_curve", "pipeline_params", "rank_rate"]


class RankModel(Protocol):
    """What a job's curve is built from: one rank's rate by workers (``PipelineParams`` from a measured
    profile, or ``PublishedRank`` from a published table)."""

    @property
    def mem_per_worker_mb(self) -> int: ...

    def rate(self, workers: int) -> float: ...


@dataclass(frozen=True)
class PipelineParams:
    """The three rates that define a rank's curve, and the memory of one worker."""

    ceiling: float  # C: samples/s the step reaches when data is free
    serial_rate: float  # P0: samples/s of the loader in the training process (0 workers)
    worker_rate: float  # p: samples/s of one loader worker
    mem_per_worker_mb: int  # median measured unique memory per worker, whole MB rounded up (at least 1)

    def rate(self, workers: int) -> float:
        return rank_rate(self, workers)


def pipeline_params(profile: Profile) -> PipelineParams:
    """Fit the pipeline model's parameters to a measured profile."""
    b = profile.baseline
    limit = max(1, profile.hardware.logical_cores - 1)
    per_worker = [p.prep_rate / p.workers for p in profile.points if 1 <= p.workers <= limit and p.prep_rate > 0]
    if not per_worker:  # no uncontended point with workers: fall back to the training rate at the fewest workers
        with_workers = [p for p in profile.points if p.workers >= 1]
        if not with_workers:
            raise ValueError(f"profile {profile.workload!r} has no point with loader workers")
        first = min(with_workers, key=lambda p: p.workers)
        per_worker = [first.throughput / first.workers]
    mems = [p.worker_uss_mb for p in profile.points if p.workers >= 1]
    mem = max(1, math.ceil(statistics.median(mems))) if mems else 1
    if not (b.ceiling > 0 and b.prep_rate > 0):
        raise ValueError(f"profile {profile.workload!r} lacks a positive ceiling or in-process loader rate")
    return PipelineParams(b.ceiling, b.prep_rate, statistics.median(per_worker), mem)


def rank_rate(params: PipelineParams, workers: int) -> float:
    """One rank's samples/s with ``workers`` loader workers."""
    if workers == 0:
        return 1.0 / (1.0 / params.ceiling + 1.0 / params.serial_rate)
    return min(params.ceiling, params.worker_rate * workers)


def job_curve(params: RankModel, gpus: int, max_workers: int, lockstep: bool = False) -> tuple[float, ...]:
    """The job's samples/s against its total workers ``W = 0..max_workers`` over ``gpus`` ranks; with
    ``lockstep``, each step waits for the rank with the fewest workers."""
    if lockstep:  # the service's own model of a job whose ranks step together, up to max_workers
        steps = lockstep_curve([params.rate(q) for q in range(max_workers // gpus + 1)], gpus)
        return steps + steps[-1:] * (max_workers + 1 - len(steps))
    out = []
    for w in range(max_workers + 1):
        q, r = divmod(w, gpus)
        out.append((gpus - r) * params.rate(q) + r * params.rate(q + 1))
    return tuple(out)
