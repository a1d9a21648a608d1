"""``even`` (the seed's baseline) and ``proportional`` (Synergy's): the worker budget split by a fixed rule.

Both water-fill: starting from each job's minimum, the job with the lowest share so far gets the next
core (ties go to the earlier job in the request, so the remainder is deterministic), skipping jobs at
their maximum or whose next worker would not fit the memory budget.  ``even`` counts a job's share
as its workers: without bounds, job ``i`` of ``J`` gets ``B // J + (1 if i < B % J else 0)`` of the
``B`` worker cores.  ``proportional`` counts workers per GPU, so a job on 4 GPUs gets 4 times what a
job on 1 GPU gets (jobs with no GPU count as one).  Both ignore the curves, so they spend every core
a job can take, and they ignore the hysteresis threshold.  A job of several ranks
(``JobDemand.ranks``) takes one worker for each rank at a time, so each rank gets the same count.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from adlrec.allocate.common import build_plan, check_feasible
from adlrec.schemas import AllocationPlan, AllocationRequest, JobDemand

__all__ = ["even", "proportional"]


def even(request: AllocationRequest) -> AllocationPlan:
    return _water_fill(request, "even", lambda job, w: w, "an even share of the cores")


def proportional(request: AllocationRequest) -> AllocationPlan:
    # equal ratios divide to the same double (division is correctly rounded), so 2/4 and 1/2 tie
    return _water_fill(request, "proportional", lambda job, w: w / max(1, job.gpus), "a share of the cores by its GPUs")


def _water_fill(
    request: AllocationRequest, name: str, share: Callable[[JobDemand, int], object], note: str
) -> AllocationPlan:
    check_feasible(request)
    jobs = request.jobs
    workers = [j.min_workers for j in jobs]
    cores = request.worker_cores - sum(workers)
    mem = request.memory_mb - sum(w * j.mem_per_worker_mb for w, j in zip(workers, jobs, strict=True))
    heap = [(share(jobs[i], w), i) for i, w in enumerate(workers) if w + jobs[i].ranks <= jobs[i].hi]
    heapq.heapify(heap)
    while heap and cores > 0:
        _, i = heapq.heappop(heap)
        step = jobs[i].ranks  # one worker for each of its ranks: a worker past a multiple of them is wasted
        need = step * jobs[i].mem_per_worker_mb
        if step > cores or need > mem:
            continue  # cores and memory only shrink: this job can take no more
        workers[i] += step
        cores -= step
        mem -= need
        if workers[i] + step <= jobs[i].hi:
            heapq.heappush(heap, (share(jobs[i], workers[i]), i))
    return build_plan(request, name, workers, [note] * len(jobs))
