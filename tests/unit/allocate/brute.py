"""The reference optimum by enumerating every allocation (small instances only)."""

from __future__ import annotations

from itertools import product

from adlrec.allocate.common import penalised_values
from adlrec.schemas import AllocationRequest


def feasible(request: AllocationRequest, workers) -> bool:
    return (
        sum(workers) <= request.worker_cores
        and sum(w * j.mem_per_worker_mb for w, j in zip(workers, request.jobs, strict=True)) <= request.memory_mb
        and all(j.min_workers <= w <= j.hi and w % j.ranks == 0 for w, j in zip(workers, request.jobs, strict=True))
    )


def brute_force(request: AllocationRequest) -> float:
    """The best net value (objective minus hysteresis penalty) over every feasible allocation: a job of several
    ranks takes multiples of them."""
    values = [penalised_values(j, request) for j in request.jobs]
    ranges = [range(j.min_workers, j.hi + 1, j.ranks) for j in request.jobs]  # each rank the same count
    return max(sum(v[w] for v, w in zip(values, ws, strict=True)) for ws in product(*ranges) if feasible(request, ws))
