"""What every policy shares: the feasibility check, the hysteresis-penalised values, building the plan."""

from __future__ import annotations

from collections.abc import Sequence

from adlrec.allocate.objectives import full_value, job_values
from adlrec.schemas import AllocationPlan, AllocationRequest, JobDemand
from adlrec.words import count

__all__ = ["InfeasibleRequest", "build_plan", "check_feasible", "penalised_values", "penalty"]


class InfeasibleRequest(ValueError):
    """No plan can satisfy the request: the main processes or the minimum workers do not fit."""


def check_feasible(request: AllocationRequest) -> None:
    """Raise :class:`InfeasibleRequest` unless every job's ``min_workers`` fit the core and memory budgets."""
    budget = request.worker_cores
    need = sum(j.min_workers for j in request.jobs)
    if need > budget:
        mains = sum(j.main_cores for j in request.jobs)
        raise InfeasibleRequest(
            f"{count(request.cores, 'core')} cannot hold the jobs' {count(mains, 'main process')} "
            f"and {count(need, 'minimum worker')}"
        )
    mem = sum(j.min_workers * j.mem_per_worker_mb for j in request.jobs)
    if mem > request.memory_mb:
        raise InfeasibleRequest(f"minimum workers need {mem} MB, only {request.memory_mb} MB available")


def penalty(job: JobDemand, request: AllocationRequest) -> float:
    """The switching cost of changing this job's worker count (0 for a new job)."""
    if job.current_workers is None or request.threshold == 0:
        return 0.0
    return request.threshold * full_value(job, request.objective)


def penalised_values(job: JobDemand, request: AllocationRequest) -> list[float]:
    """Objective value at each worker count, minus the switching cost wherever ``w != current_workers``.

    Optimising these values (instead of filtering a plan afterwards) keeps every constraint intact:
    a job keeps its count unless moving gains at least ``threshold x`` its full-speed value (on an exact tie
    the fewest workers win, as in docs/simulate.md).
    """
    v = job_values(job, request.objective)
    pen = penalty(job, request)
    if pen == 0:
        return v
    return [x if w == job.current_workers else x - pen for w, x in enumerate(v)]


def build_plan(
    request: AllocationRequest, policy: str, workers: Sequence[int], notes: Sequence[str] | None = None
) -> AllocationPlan:
    """The plan for one worker count per job (in request order), with a short reason for each."""
    obj = request.objective
    values = [job_values(j, obj) for j in request.jobs]
    paid = sum(penalty(j, request) for j, w in zip(request.jobs, workers, strict=True) if w != j.current_workers)
    reasons = {}
    for i, (j, w) in enumerate(zip(request.jobs, workers, strict=True)):
        if j.current_workers is None or j.current_workers == w:
            what = count(w, "worker")
            per_rank = f"{w // j.ranks} per rank"
        else:
            what = f"{j.current_workers} -> {count(w, 'worker')}"
            per_rank = f"{j.current_workers // j.ranks} -> {w // j.ranks} per rank"
        if j.ranks > 1:  # the service tells each rank its share: say it, as users read the reason per rank
            what = f"{what} ({per_rank}, {j.ranks} ranks)"
        if j.peak > 0:
            reason = f"{what}, {j.curve[w] / j.peak:.0%} of its peak"
        else:
            reason = f"{what}; its curve is zero at every count (no throughput predicted)"
        note = notes[i] if notes else ""
        reasons[j.job_id] = f"{reason}; {note}" if note else reason
    return AllocationPlan(
        policy=policy,
        workers={j.job_id: int(w) for j, w in zip(request.jobs, workers, strict=True)},
        throughput={j.job_id: float(j.curve[w]) for j, w in zip(request.jobs, workers, strict=True)},
        objective=float(sum(v[w] for v, w in zip(values, workers, strict=True))),
        penalty=float(paid),
        cores_used=int(sum(workers) + sum(j.main_cores for j in request.jobs)),
        memory_used_mb=int(sum(w * j.mem_per_worker_mb for j, w in zip(request.jobs, workers, strict=True))),
        reasons=reasons,
    )
