"""``even``: the seed's baseline, the worker budget split evenly across the jobs.

Water-filling: starting from each job's minimum, the job with the fewest workers gets the next
core (ties go to the earlier job in the request, so the remainder is deterministic), skipping jobs at
their maximum or whose next worker would not fit the memory budget.  Without bounds, job ``i`` of
``J`` gets ``B // J + (1 if i < B % J else 0)`` of the ``B`` worker cores.  It ignores the curves, so
it spends every core, and it ignores the hysteresis threshold.
"""

from __future__ import annotations

import heapq

from adlrec.allocate.common import build_plan, check_feasible
from adlrec.schemas import AllocationPlan, AllocationRequest

__all__ = ["even"]


def even(request: AllocationRequest) -> AllocationPlan:
    check_feasible(request)
    jobs = request.jobs
    workers = [j.min_workers for j in jobs]
    cores = request.worker_cores - sum(workers)
    mem = request.memory_mb - sum(w * j.mem_per_worker_mb for w, j in zip(workers, jobs, strict=True))
    heap = [(w, i) for i, w in enumerate(workers) if w < jobs[i].hi]
    heapq.heapify(heap)
    while heap and cores > 0:
        w, i = heapq.heappop(heap)
        need = jobs[i].mem_per_worker_mb
        if need > mem:
            continue  # memory only shrinks: this job can take no more
        workers[i] = w + 1
        cores -= 1
        mem -= need
        if w + 1 < jobs[i].hi:
            heapq.heappush(heap, (w + 1, i))
    return build_plan(request, "even", workers, ["an even share of the cores"] * len(jobs))
