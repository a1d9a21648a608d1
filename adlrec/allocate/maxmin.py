"""``maxmin``: max-min fairness of normalised throughput ``T_j(w) / T_j(max)``, then leftovers by gain.

Phase 1 finds the highest level ``L`` such that every job can reach ``min(L, its best reachable
share)`` at once within the core and memory budgets, giving each job the fewest workers that reach it
(a job of several ranks, ``JobDemand.ranks``: the fewest multiples of them), by a binary search over the
levels the curves take (a higher level never needs fewer workers, so feasibility is monotone).  Phase 2 spends the cores left over one at a time by objective gain, as
``greedy`` does.  The hysteresis threshold applies only in phase 2, which never takes a job below the
share phase 1 gave it: fairness comes first.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from itertools import accumulate

from adlrec.allocate.common import build_plan, check_feasible, penalised_values
from adlrec.allocate.greedy import fill_by_gain
from adlrec.schemas import AllocationPlan, AllocationRequest, JobDemand

__all__ = ["maxmin"]


def _shares(job: JobDemand) -> list[float]:
    """Running maximum of the normalised curve over the counts ``min_workers..hi`` a job of its ranks may have
    (multiples of them: index ``i`` is ``min_workers + i * ranks``)."""
    peak = job.peak
    norm = [t / peak if peak > 0 else 1.0 for t in job.curve[job.min_workers : job.hi + 1 : job.ranks]]
    return list(accumulate(norm, max))


def _at_least(job: JobDemand, values: list[float], share: float) -> list[float]:
    """``values`` with every count whose share of the peak is below ``share`` ruled out (-inf).

    Phase 2 must not trade a job's fair share for the hysteresis: without this, keeping a current count
    past the fair one (say 3 workers at 89% of the peak, where 2 reach 100%) can look like a gain.
    """
    peak = job.peak
    return [
        v if (t / peak if peak > 0 else 1.0) >= share else -math.inf for v, t in zip(values, job.curve, strict=True)
    ]


def maxmin(request: AllocationRequest) -> AllocationPlan:
    check_feasible(request)
    jobs = request.jobs
    prefix = [_shares(j) for j in jobs]

    def need(level: float) -> list[int]:
        return [j.min_workers + j.ranks * bisect_left(p, min(level, p[-1])) for j, p in zip(jobs, prefix, strict=True)]

    def fits(workers: list[int]) -> bool:
        mem = sum(w * j.mem_per_worker_mb for w, j in zip(workers, jobs, strict=True))
        return sum(workers) <= request.worker_cores and mem <= request.memory_mb

    levels = sorted({x for p in prefix for x in p})
    lo, hi = 0, len(levels) - 1  # levels[lo] is feasible once checked; find the last feasible
    best = [j.min_workers for j in jobs]
    while lo <= hi:
        mid = (lo + hi) // 2
        w = need(levels[mid])
        if fits(w):
            best, lo = w, mid + 1
        else:
            hi = mid - 1
    level = min((p[(w - j.min_workers) // j.ranks] for j, p, w in zip(jobs, prefix, best, strict=True)), default=1.0)
    values = [
        _at_least(j, penalised_values(j, request), p[(w - j.min_workers) // j.ranks])
        for j, p, w in zip(jobs, prefix, best, strict=True)
    ]
    workers = fill_by_gain(request, list(best), values)
    notes = [f"fair level {level:.0%} of peak, then gain" for _ in jobs]
    return build_plan(request, "maxmin", workers, notes)
