"""``greedy``: the seed's marginal-gain allocation.

From each job's minimum, the next core goes to the job whose next worker adds the most objective
value (minus any hysteresis switching cost), until no worker adds value or the cores run out.  One
worker costs one core, so this is gain per core.  It is optimal when every curve is concave and
memory does not bind; a curve that gains little from its first worker and much from its second (or a
switching cost) can trap it, which ``optimal`` avoids.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

from adlrec.allocate.common import build_plan, check_feasible, penalised_values
from adlrec.schemas import AllocationPlan, AllocationRequest

__all__ = ["fill_by_gain", "greedy"]


def fill_by_gain(request: AllocationRequest, workers: list[int], values: Sequence[Sequence[float]]) -> list[int]:
    """Add workers one at a time, best single-step gain first (ties: earlier job); returns ``workers``."""
    jobs = request.jobs
    cores = request.worker_cores - sum(workers)
    mem = request.memory_mb - sum(w * j.mem_per_worker_mb for w, j in zip(workers, jobs, strict=True))
    heap = [(-(values[i][w + 1] - values[i][w]), i) for i, w in enumerate(workers) if w < jobs[i].hi]
    heapq.heapify(heap)
    while heap and cores > 0:
        neg_gain, i = heapq.heappop(heap)
        if -neg_gain <= 0:
            break
        need = jobs[i].mem_per_worker_mb
        if need > mem:
            continue  # memory only shrinks: this job can take no more
        workers[i] += 1
        cores -= 1
        mem -= need
        w = workers[i]
        if w < jobs[i].hi:
            heapq.heappush(heap, (-(values[i][w + 1] - values[i][w]), i))
    return workers


def greedy(request: AllocationRequest) -> AllocationPlan:
    check_feasible(request)
    values = [penalised_values(j, request) for j in request.jobs]
    workers = fill_by_gain(request, [j.min_workers for j in request.jobs], values)
    return build_plan(request, "greedy", workers, ["marginal gain per core"] * len(workers))
