"""The discrete-event replay of a trace on one node under one policy; reads no clock.

Events are arrivals, completions and a periodic tick every ``interval_s``; the policy re-decides at
each.  Between events every rate is constant, so the replay jumps from event to event exactly.

* **Admission**: jobs queue in arrival order and start, first come first served, when the node has
  the GPUs they ask for (no backfilling: a large job at the head blocks smaller ones behind it).
* **Decision**: the running jobs, in start order, become an :class:`AllocationRequest` (curve, GPUs,
  memory per worker, current workers, ``num_workers x ranks`` as the requested count, one main core
  per rank).  The policy sees the true curves: prediction error is not modelled here.
* **Resize cost**: a running job whose worker count changes makes no progress for ``resize_s``
  seconds (charged once per change; a job's first count, at its start, is free: every policy pays
  the same start-up).
* **Contention**: see :mod:`adlrec.simulate.contention`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from adlrec.schemas import AllocationPlan, AllocationRequest, JobDemand
from adlrec.simulate.contention import cpu_share, effective_throughput, saturation_workers
from adlrec.simulate.records import JobResult, Node, SimConfig, SimResult, TraceJob
from adlrec.words import count

__all__ = ["MAX_INTERVALS", "SimulationError", "check_trace", "simulate"]

_EPS = 1e-9
MAX_INTERVALS = 100_000  # decision intervals one replay may run through (69 days at the default 60 s)


class SimulationError(ValueError):
    """The trace cannot be replayed on this node (a job that can never start or never progress)."""


@dataclass
class _Running:
    job: TraceJob
    start_s: float
    remaining: float  # samples still to train on
    workers: int | None = None  # None until the first decision
    stall_s: float = 0.0  # resize time still to serve before progress resumes
    resizes: int = 0
    worker_seconds: float = 0.0
    rate: float = 0.0  # samples/s while not stalled, under the current contention


def simulate(
    trace: Sequence[TraceJob],
    policy: Callable[[AllocationRequest], AllocationPlan],
    node: Node,
    config: SimConfig | None = None,
    name: str = "",
    max_intervals: int = MAX_INTERVALS,
) -> SimResult:
    """Replay ``trace`` on ``node``, deciding with ``policy``; ``name`` labels the result.

    A job that cannot end within ``max_intervals`` decision intervals even at full speed raises
    :class:`SimulationError` before replaying; a replay that runs through ``max_intervals`` plus ten
    times the intervals the whole trace needs at full speed raises it there (a mistyped
    ``work_samples`` would otherwise replay for hours)."""
    config = config or SimConfig()
    check_trace(trace, node, config, max_intervals)
    order = {j.job_id: i for i, j in enumerate(trace)}
    limit = max_intervals + 10 * math.ceil(_ideal_s(trace, node) / config.interval_s)
    pending = deque(sorted(trace, key=lambda j: (j.arrival_s, order[j.job_id])))
    queue: deque[TraceJob] = deque()
    running: list[_Running] = []
    done: dict[str, JobResult] = {}
    t0 = pending[0].arrival_s if pending else 0.0
    t = t0
    next_tick = t0 + config.interval_s
    free_gpus = node.gpus
    decisions = resizes = 0
    busy_gpu_s = held_gpu_s = active_s = samples = share_s = 0.0
    stuck = ticks = 0
    redecide = True

    while pending or queue or running:
        while pending and pending[0].arrival_s <= t + _EPS:
            queue.append(pending.popleft())
            redecide = True
        while queue and queue[0].gpus <= free_gpus:
            job = queue.popleft()
            free_gpus -= job.gpus
            running.append(_Running(job, start_s=t, remaining=job.work_samples))
            redecide = True
        if redecide and running:
            resizes += _decide(running, policy, node, config)
            decisions += 1
            redecide = False
        share = _rates(running, node, config)

        events = [pending[0].arrival_s] if pending else []
        if running:
            events.append(next_tick)
        for r in running:
            if r.rate > 0:
                events.append(t + r.stall_s + r.remaining / r.rate)
        t_next = max(min(events), t)

        dt = t_next - t
        for r in running:
            stalled = min(r.stall_s, dt)
            r.stall_s -= stalled
            work = r.rate * (dt - stalled)
            r.remaining -= work
            r.worker_seconds += r.workers * dt
            busy_gpu_s += r.job.gpus * (work / r.job.peak)
            held_gpu_s += r.job.gpus * dt
            samples += work
        if running:
            active_s += dt
            share_s += share * dt
        progressed = dt > 0 and any(r.rate > 0 for r in running)
        t = t_next

        finished = [r for r in running if _done(r, t)]
        for r in finished:
            running.remove(r)
            free_gpus += r.job.gpus
            span = t - r.start_s
            done[r.job.job_id] = JobResult(
                job_id=r.job.job_id,
                arrival_s=r.job.arrival_s,
                start_s=r.start_s,
                finish_s=t,
                resizes=r.resizes,
                gpus=r.job.gpus,
                mean_workers=r.worker_seconds / span if span > 0 else float(r.workers or 0),
            )
            redecide = True
        if t >= next_tick - _EPS:
            redecide = True
            ticks += 1
            if ticks > limit:
                ids = ", ".join(r.job.job_id for r in running)
                raise SimulationError(
                    f"under policy {name or 'given'}, jobs {ids} still run after {limit:,} intervals of "
                    f"{config.interval_s:g} s ({_days(limit * config.interval_s)}); expected a trace that "
                    "ends sooner (less work_samples, or a longer --interval)"
                )
            next_tick += config.interval_s
            if next_tick <= t + _EPS:  # past several ticks at once (the node sat idle): jump, do not step
                next_tick += config.interval_s * math.floor((t + _EPS - next_tick) / config.interval_s)
                while next_tick <= t + _EPS:  # the floor's rounding: at most a step or two
                    next_tick += config.interval_s
        stuck = 0 if (progressed or finished or not running) else stuck + 1
        if stuck > 3 and not pending:
            ids = ", ".join(r.job.job_id for r in running)
            raise SimulationError(f"jobs {ids} make no progress under policy {name or 'given'}")

    jobs = tuple(done[j.job_id] for j in trace)
    makespan = max((j.finish_s for j in jobs), default=t0) - t0
    return SimResult(
        policy=name,
        jobs=jobs,
        makespan_s=makespan,
        active_s=active_s,
        busy_gpu_fraction=busy_gpu_s / (node.gpus * makespan) if makespan > 0 else 0.0,
        aggregate_throughput=busy_gpu_s / held_gpu_s if held_gpu_s > 0 else 0.0,
        samples_per_s=samples / active_s if active_s > 0 else 0.0,
        decisions=decisions,
        resizes=resizes,
        mean_cpu_share=share_s / active_s if active_s > 0 else 1.0,
    )


def check_trace(trace: Sequence[TraceJob], node: Node, config: SimConfig, max_intervals: int = MAX_INTERVALS) -> None:
    """Raise :class:`SimulationError` for a trace :func:`simulate` refuses before replaying (a job larger
    than the node, a repeated id, a job too long or arriving too late); the CLI calls it before it
    opens an MLflow store, so such a trace stores nothing."""
    for j in trace:
        if j.gpus > node.gpus:
            raise SimulationError(f"job {j.job_id!r} asks for {count(j.gpus, 'GPU')}; the node has {node.gpus}")
    if len({j.job_id for j in trace}) != len(trace):
        raise SimulationError("job ids in a trace must be unique")
    _check_length(trace, config, max_intervals)


def _ideal_s(trace: Sequence[TraceJob], node: Node) -> float:
    """A lower bound on the replay's length: every job at full speed from its arrival, and the GPUs
    busy all the time."""
    if not trace:
        return 0.0
    t0 = min(j.arrival_s for j in trace)
    last = max(j.arrival_s - t0 + j.work_samples / j.peak for j in trace)
    return max(last, sum(j.gpus * j.work_samples / j.peak for j in trace) / node.gpus)


def _check_length(trace: Sequence[TraceJob], config: SimConfig, max_intervals: int) -> None:
    """Refuse, before replaying, a job that cannot end within ``max_intervals`` intervals even at full
    speed, or that arrives so late that adding an interval to its time changes nothing (the clock
    would never pass it)."""
    step = min(config.interval_s, config.resize_s or config.interval_s)  # the shortest span the clock must add
    for j in trace:
        if j.arrival_s + step == j.arrival_s:
            raise SimulationError(
                f"job {j.job_id!r} arrives at {j.arrival_s:g} s, where adding {step:g} s to a time "
                "changes nothing; expected a smaller arrival_s"
            )
        least = j.work_samples / j.peak  # seconds at full speed
        if least / config.interval_s > max_intervals:
            raise SimulationError(
                f"job {j.job_id!r} needs at least {_days(least)} at full speed ({j.work_samples:g} samples at "
                f"{j.peak:g}/s), more than {max_intervals:,} intervals of {config.interval_s:g} s; expected "
                "less work_samples, or a longer --interval"
            )


def _done(r: _Running, t: float) -> bool:
    """Whether ``r`` has finished at ``t``: no work left, or so little that the time it takes is below
    the clock's resolution at ``t`` (at large times, e.g. arrivals as Unix milliseconds, the step to
    its completion rounds to zero and it would otherwise never complete)."""
    if r.remaining <= _EPS * r.job.work_samples:
        return True
    return r.rate > 0 and r.stall_s <= 0 and t + r.remaining / r.rate <= t


def _days(seconds: float) -> str:
    days = seconds / 86400
    return f"{days:,.1f} days" if days < 1e6 else f"{days:.3g} days"


def _decide(
    running: list[_Running], policy: Callable[[AllocationRequest], AllocationPlan], node: Node, config: SimConfig
) -> int:
    """Ask the policy, apply its plan, charge resize costs; returns how many jobs changed."""
    request = AllocationRequest(
        cores=node.cores,
        memory_mb=node.memory_mb,
        jobs=tuple(
            JobDemand(
                job_id=r.job.job_id,
                curve=r.job.curve,
                gpus=r.job.gpus,
                weight=r.job.weight,
                mem_per_worker_mb=r.job.mem_per_worker_mb,
                current_workers=r.workers,
                requested_workers=r.job.requested_workers * r.job.gpus,
                main_cores=r.job.main_cores,
                ranks=r.job.ranks,
            )
            for r in running
        ),
        objective=config.objective,
        threshold=config.threshold,
    )
    plan = policy(request)
    changed = 0
    for r in running:
        w = plan.workers[r.job.job_id]
        if r.workers is not None and w != r.workers:
            r.stall_s += config.resize_s
            r.resizes += 1
            changed += 1
        r.workers = w
    return changed


def _rates(running: list[_Running], node: Node, config: SimConfig) -> float:
    """Set every running job's rate under the current contention; returns the CPU share."""
    workers = [r.workers or 0 for r in running]
    mains = [r.job.main_cores for r in running]
    sat = [saturation_workers(r.job.curve) for r in running] if config.contention == "busy" else None
    share = cpu_share(node.cores, workers, mains, sat)
    for r, w in zip(running, workers, strict=True):
        r.rate = effective_throughput(r.job.curve, w, share, config.main_cpu)
    return share
