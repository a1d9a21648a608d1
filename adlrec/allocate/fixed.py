"""``fixed``: every job keeps the ``num_workers`` its script asked for; what users do today.

It ignores the node's core and memory budgets on purpose (``plan.cores_used`` can exceed the node's
cores): the simulator then shows what that oversubscription costs.  Only per-job bounds apply.
"""

from __future__ import annotations

from adlrec.allocate.common import build_plan
from adlrec.schemas import AllocationPlan, AllocationRequest

__all__ = ["fixed"]


def fixed(request: AllocationRequest) -> AllocationPlan:
    workers = [min(max(j.requested_workers, j.min_workers), j.hi) for j in request.jobs]
    used = sum(workers) + sum(j.main_cores for j in request.jobs)
    note = "as its script asked"
    if used > request.cores:
        note += f" (node oversubscribed: {used} processes on {request.cores} cores)"
    return build_plan(request, "fixed", workers, [note] * len(workers))
