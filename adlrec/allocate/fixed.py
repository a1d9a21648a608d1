"""``fixed``: every job keeps the ``num_workers`` its script asked for; what users do today.

It ignores the node's core and memory budgets on purpose (``plan.cores_used`` can exceed the node's
cores, ``plan.memory_used_mb`` its memory; the reason says so): the simulator then shows what the
core oversubscription costs (it models no cost for memory: swapping or the OOM killer are beyond it).
Only per-job bounds apply.
"""

from __future__ import annotations

from adlrec.allocate.common import build_plan
from adlrec.schemas import AllocationPlan, AllocationRequest

__all__ = ["fixed"]


def fixed(request: AllocationRequest) -> AllocationPlan:
    # a job of ranks: its max_workers rounded down to a multiple of them (min_workers and requested_workers are)
    workers = [min(max(j.requested_workers, j.min_workers), j.hi - j.hi % j.ranks) for j in request.jobs]
    used = sum(workers) + sum(j.main_cores for j in request.jobs)
    note = "as its script asked"
    over = []
    if used > request.cores:
        over.append(f"{used} processes on {request.cores} cores")
    mem = sum(w * j.mem_per_worker_mb for w, j in zip(workers, request.jobs, strict=True))
    if mem > request.memory_mb:
        over.append(f"workers need {mem} MB of {request.memory_mb} MB")
    if over:
        note += f" (node oversubscribed: {'; '.join(over)})"
    return build_plan(request, "fixed", workers, [note] * len(workers))
