"""The service's decision, as pure functions: a store snapshot in, one outcome per node out.

No clock, no database, no network: the scheduler reads a :class:`Snapshot`, calls
:func:`compute_plans`, and stores the outcomes that changed.
"""

from __future__ import annotations

from collections.abc import Mapping

from adlrec.allocate import POLICIES, InfeasibleRequest, lockstep_curve
from adlrec.allocate.common import build_plan
from adlrec.schemas import AllocationPlan, AllocationRequest, JobDemand
from adlrec.service.records import JobRecord, NodeInfo, NodeOutcome, PlanRecord, Snapshot

__all__ = ["compute_plans", "effective_curve", "job_demand", "minimum_plan", "node_request"]


def effective_curve(predicted: tuple[float, ...], measured: Mapping[int, float]) -> tuple[float, ...]:
    """The predicted curve with every measured point put in its place (learning online)."""
    return tuple(float(measured.get(w, t)) for w, t in enumerate(predicted))


def job_demand(job: JobRecord, measured: Mapping[int, float], planned: int | None) -> JobDemand:
    """The allocator's view of one job; it runs with what it reported, else what its plan said.

    A job of several ranks registers, measures and reports one rank's figures; the allocator sees the
    whole job: its curve over total workers (:func:`~adlrec.allocate.lockstep_curve`) and every bound
    times its ranks.  ``planned`` is already a total (a plan's count)."""
    s = job.spec
    r = s.ranks
    curve = effective_curve(s.curve, measured)
    current = r * job.reported_workers if job.reported_workers is not None else planned
    return JobDemand(
        job_id=s.job_id,
        curve=curve if r == 1 else lockstep_curve(curve, r),
        gpus=s.gpus,
        weight=s.weight,
        min_workers=r * s.min_workers,
        max_workers=None if s.max_workers is None else r * s.max_workers,
        mem_per_worker_mb=s.mem_per_worker_mb,
        current_workers=current,
        requested_workers=r * s.requested_workers,
        main_cores=s.main_cores,
        ranks=r,  # every policy gives it multiples of its ranks: each rank the same count, no core left idle
    )


def node_request(
    node: NodeInfo,
    jobs: tuple[JobRecord, ...],
    points: Mapping[str, Mapping[int, float]],
    latest: PlanRecord | None,
    objective: str,
    threshold: float,
) -> AllocationRequest:
    """The allocation request for one node: its budgets and its active jobs in registration order."""
    planned = latest.plan.workers if latest is not None else {}
    return AllocationRequest(
        cores=node.cores,
        memory_mb=node.memory_mb,
        jobs=tuple(job_demand(j, points.get(j.job_id, {}), planned.get(j.job_id)) for j in jobs),
        objective=objective,
        threshold=threshold,
    )


def compute_plans(snapshot: Snapshot, policy: str, objective: str, threshold: float) -> list[NodeOutcome]:
    """One outcome per node that has active jobs or a current plan, sorted by node name.

    A plan is marked ``changed`` when its worker counts (or its set of jobs) differ from the node's
    current plan, so a steady node does not grow its history and clients apply each plan once.
    A node whose last job left gets an empty plan, which releases its workers.  A node no plan fits (its
    main processes and minimum workers need more cores or memory than it has) gets :func:`minimum_plan`, and
    its outcome says why in ``error``.
    """
    run = POLICIES[policy]
    by_node: dict[str, list[JobRecord]] = {}
    for job in snapshot.jobs:
        by_node.setdefault(job.spec.node, []).append(job)
    names = sorted(set(by_node) | {n for n, p in snapshot.latest.items() if p.plan.workers})
    out = []
    for name in names:
        node = snapshot.nodes[name]
        latest = snapshot.latest.get(name)
        try:
            request = node_request(node, tuple(by_node.get(name, ())), snapshot.points, latest, objective, threshold)
        except ValueError as exc:  # a record the allocator refuses: report it, keep the other nodes going
            out.append(NodeOutcome(name, None, None, changed=False, error=str(exc)))
            continue
        error = ""
        try:
            plan = run(request)
        except InfeasibleRequest as exc:
            error = str(exc)
            plan = minimum_plan(request)
        changed = latest is None or latest.plan.workers != plan.workers
        out.append(NodeOutcome(name, request, plan, changed=changed, error=error))
    return out


def minimum_plan(request: AllocationRequest) -> AllocationPlan:
    """Every job at its minimum workers: the least a node no plan fits can be asked for (the node's
    ``problem`` says why none fits).

    Keeping the node's last plan instead left a job that came since it (the one that made the node overfull)
    with the workers its script asked for, 8 say: the oversubscription at its worst."""
    note = "no plan fits the node, so every job gets its minimum"
    return build_plan(request, "minimum", [j.min_workers for j in request.jobs], [note] * len(request.jobs))
