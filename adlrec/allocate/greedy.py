"""``greedy``: the seed's marginal-gain allocation.

From each job's minimum, the next core goes to the job whose next worker adds the most objective
value (minus any hysteresis switching cost), until no worker adds value or the cores run out.  One
worker costs one core, so this is gain per core; a job of several ranks (``JobDemand.ranks``) takes one
worker for each rank at a time.  It is optimal when every curve is concave and
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
    """Add workers one step at a time, best gain per core first (ties: earlier job); returns ``workers``.

    A job's step is its ``ranks``: one worker for each of its ranks, which step together (a worker past a
    multiple of them is worth nothing, so one at a time would stop such a job at its first)."""
    jobs = request.jobs
    cores = request.worker_cores - sum(workers)
    mem = request.memory_mb - sum(w * j.mem_per_worker_mb for w, j in zip(workers, jobs, strict=True))

    def entry(i: int) -> tuple[float, int] | None:
        w, step = workers[i], jobs[i].ranks
        if w + step > jobs[i].hi:
            return None
        return (-(values[i][w + step] - values[i][w]) / step, i)

    heap = [e for e in map(entry, range(len(jobs))) if e is not None]
    heapq.heapify(heap)
    while heap and cores > 0:
        neg_gain, i = heapq.heappop(heap)
        if -neg_gain <= 0:
            break
        step = jobs[i].ranks
        need = step * jobs[i].mem_per_worker_mb
        if step > cores or need > mem:
            continue  # cores and memory only shrink: this job can take no more
        workers[i] += step
        cores -= step
        mem -= need
        e = entry(i)
        if e is not None:
            heapq.heappush(heap, e)
    return workers


def greedy(request: AllocationRequest) -> AllocationPlan:
    check_feasible(request)
    values = [penalised_values(j, request) for j in request.jobs]
    workers = fill_by_gain(request, [j.min_workers for j in request.jobs], values)
    return build_plan(request, "greedy", workers, ["marginal gain per core"] * len(workers))
