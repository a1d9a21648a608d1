"""The jobs that have not finished, held in memory: heartbeats land here and reach the store in batches.

A heartbeat is the hot path (every job, every few seconds), so it touches only memory: the job's
last report, its running mean at the reported worker count, and the answer read from the cached
current plan of its node.  :meth:`JobState.flush` writes everything heartbeats changed since the
last flush in one transaction; the service runs it every ``flush_s``, before each recompute, at a
finish and at shutdown.  A crash therefore loses at most the heartbeats of one flush interval
(their last-seen times and measured points); registrations, finishes, node changes and plans are
written through, synchronously.

Memory is the truth for the jobs it holds (active and expired ones, loaded at start): reads
through this class see a heartbeat at once.  Writes that change a job in both places (register,
finish, flush, new curves) are serialised by one lock, so a flush can never write a job's old state
over a newer registration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from adlrec.service.records import (
    ACTIVE,
    EXPIRED,
    FINISHED,
    Assignment,
    JobRecord,
    JobSpec,
    MeasuredPoint,
    NodeInfo,
    PlanRecord,
    Snapshot,
)
from adlrec.service.store import JobNotActive, JobStore, UnknownJob, assignment

__all__ = ["Beat", "JobState"]


@dataclass(frozen=True)
class Beat:
    """What a heartbeat did: the job after it, what it should run with, and whether it was revived."""

    job: JobRecord
    assignment: Assignment
    revived: bool  # it had expired: the caller asks for a recompute


@dataclass
class _Open:
    job: JobRecord
    points: dict[int, MeasuredPoint] = field(default_factory=dict)
    dirty: set[int] = field(default_factory=set)  # worker counts whose point changed since the last flush


class JobState:
    """Thread-safe; every method but :meth:`beat`, :meth:`assignment` and :meth:`snapshot_jobs` may
    touch the database."""

    def __init__(self, store: JobStore, clock: Callable[[], float], measure_alpha: float = 0.5) -> None:
        self.store = store
        self.clock = clock
        self.alpha = measure_alpha
        self._mem = threading.Lock()  # guards the dicts below; held for microseconds
        self._order = threading.Lock()  # serialises the writes that change memory and store together
        self._open: dict[str, _Open] = {}  # registration order
        self._dirty: set[str] = set()  # jobs changed by heartbeats or expiry since the last flush
        self._plans: dict[str, PlanRecord] = {}  # each node's current plan
        self._problems: dict[str, str] = {}  # why the last recompute made no plan for a node
        self._loaded_at = float("-inf")  # when load() read the store: no job is silent since before

    def load(self) -> None:
        """Read the open jobs and the current plans from the store (at start)."""
        with self._order:
            self._loaded_at = self.clock()
            opened = self.store.open_jobs()
            plans = self.store.latest_plans()
            with self._mem:
                self._open = {j.job_id: _Open(j, {p.workers: p for p in pts}) for j, pts in opened}
                self._dirty.clear()
                self._plans = plans

    # -- the hot path: memory only --------------------------------------------------------------
    def beat(self, job_id: str, throughput: float | None, workers: int | None, data_wait: float | None) -> Beat | None:
        """Record a heartbeat in memory; None when the job is not held (unknown or finished: ask
        :meth:`check_closed`).  A throughput > 0 with ``workers`` updates the running mean there."""
        now = self.clock()
        with self._mem:
            o = self._open.get(job_id)
            if o is None:
                return None
            old = o.job
            job = replace(
                old,
                status=ACTIVE,
                last_seen=now,
                reported_workers=workers if workers is not None else old.reported_workers,
                reported_throughput=throughput,
                data_wait=data_wait,
            )
            o.job = job
            if throughput is not None and throughput > 0 and workers is not None:
                # 0 samples/s means "nothing measured yet" (a job's first beat), not a curve point
                o.points[workers] = self._mean(o.points.get(workers), workers, throughput, data_wait)
                o.dirty.add(workers)
            self._dirty.add(job_id)
            plan = self._plans.get(job.spec.node)
        return Beat(job, assignment(job, plan), old.status == EXPIRED)

    def _mean(self, old: MeasuredPoint | None, workers: int, throughput: float, wait: float | None) -> MeasuredPoint:
        """The point with one more beat; a beat without a data-wait share leaves the wait's mean as it was
        (a missing share is unknown, not 0)."""
        if old is None:
            return MeasuredPoint(workers, throughput, 1, wait)
        a = self.alpha
        if wait is not None and old.data_wait is not None:
            wait = a * wait + (1 - a) * old.data_wait
        elif wait is None:
            wait = old.data_wait
        return MeasuredPoint(workers, a * throughput + (1 - a) * old.throughput, old.samples + 1, wait)

    def check_closed(self, job_id: str) -> None:
        """Raise UnknownJob or JobNotActive for a job :meth:`beat` does not hold (reads the store)."""
        try:
            job = self.store.job(job_id)
        except UnknownJob:
            raise UnknownJob(f"no job {job_id!r}: register it first") from None
        if job.status == FINISHED:
            raise JobNotActive(f"job {job_id!r} has finished; register it again to get workers")
        with self._order:  # not finished yet not held: only if another process wrote the store
            with self._mem:
                if job_id not in self._open:
                    self._open[job_id] = _Open(job, {p.workers: p for p in self.store.points(job_id)})

    def assignment(self, job: JobRecord) -> Assignment:
        with self._mem:
            plan = self._plans.get(job.spec.node)
        return assignment(job, plan)

    # -- writes through to the store ------------------------------------------------------------
    def register(self, spec: JobSpec, default_node: NodeInfo) -> tuple[JobRecord, bool]:
        with self._order:
            job, created = self.store.register(spec, default_node)
            now = self.clock()
            with self._mem:
                self._open.pop(job.job_id, None)  # to the end: registration order
                if now - job.last_seen > 1.0:  # the store kept it waiting (a lock): its silence starts now
                    job = replace(job, last_seen=now)
                    self._dirty.add(job.job_id)
                else:
                    self._dirty.discard(job.job_id)
                self._open[job.job_id] = _Open(job)
        return job, created

    def finish(self, job_id: str) -> JobRecord:
        with self._order:
            self._flush()  # its last heartbeats first
            job = self.store.finish(job_id)
            with self._mem:
                self._open.pop(job_id, None)
                self._dirty.discard(job_id)
        return job

    def update_curves(self, curves: dict[str, tuple[tuple[float, ...], str]]) -> None:
        with self._order:
            self.store.update_curves(curves)
            with self._mem:
                for job_id, (curve, source) in curves.items():
                    o = self._open.get(job_id)
                    if o is not None:
                        o.job = replace(o.job, spec=replace(o.job.spec, curve=tuple(curve), curve_source=source))

    def flush(self) -> int:
        """Write what heartbeats and expiry changed, in one transaction; returns the jobs written.
        On failure nothing is lost from memory: the next flush writes it again (the error propagates)."""
        with self._order:
            return self._flush()

    def _flush(self) -> int:
        with self._mem:
            ids, self._dirty = self._dirty, set()
            jobs, points = [], []
            for job_id in ids:
                o = self._open.get(job_id)
                if o is None:
                    continue
                jobs.append(o.job)
                points += [(job_id, o.points[w]) for w in o.dirty]
                o.dirty = set()
        try:
            self.store.write_beats(jobs, points)
        except BaseException:
            with self._mem:  # memory holds absolute values: marking them dirty again is enough
                for job_id, p in points:
                    o = self._open.get(job_id)
                    if o is not None:
                        o.dirty.add(p.workers)
                self._dirty |= {j.job_id for j in jobs if j.job_id in self._open}
            raise
        return len(jobs)

    # -- recompute ------------------------------------------------------------------------------
    def expire(self, ttl_s: float) -> list[str]:
        """Mark active jobs silent for longer than ``ttl_s`` expired (in memory; the next flush
        writes it); returns their ids.  Silence counts from the service's start at the earliest:
        while it was down, no job could reach it (a restart after more than ``ttl_s`` expired all)."""
        cutoff = self.clock() - ttl_s
        out = []
        with self._mem:
            for job_id, o in self._open.items():
                if o.job.status == ACTIVE and max(o.job.last_seen, self._loaded_at) < cutoff:
                    o.job = replace(o.job, status=EXPIRED)
                    self._dirty.add(job_id)
                    out.append(job_id)
        return out

    def snapshot(self) -> Snapshot:
        """What a recompute needs: active jobs, their points and the current plans from memory,
        the nodes from the store (read after the jobs, so every job's node is there)."""
        with self._mem:
            jobs = tuple(o.job for o in self._open.values() if o.job.status == ACTIVE)
            points = {
                job_id: {w: p.throughput for w, p in o.points.items()}
                for job_id, o in self._open.items()
                if o.job.status == ACTIVE and o.points
            }
            latest = dict(self._plans)
        nodes = {n.name: n for n in self.store.nodes()}
        return Snapshot(nodes=nodes, jobs=jobs, points=points, latest=latest)

    def plans_stored(self, plans: list[PlanRecord]) -> None:
        """New current plans (just stored): heartbeats answer with them from now on."""
        with self._mem:
            for p in plans:
                if p.plan_id > getattr(self._plans.get(p.node), "plan_id", 0):
                    self._plans[p.node] = p

    def set_problems(self, problems: dict[str, str]) -> None:
        """The last recompute's nodes without a plan, each with why (every other node has none)."""
        with self._mem:
            self._problems = dict(problems)

    def forget_problem(self, node: str) -> None:
        """The node's budgets changed: its last problem no longer holds (the next recompute says)."""
        with self._mem:
            self._problems.pop(node, None)

    def problem(self, node: str) -> str | None:
        with self._mem:
            return self._problems.get(node)

    # -- reads: memory over the store -----------------------------------------------------------
    def job(self, job_id: str) -> JobRecord:
        with self._mem:
            o = self._open.get(job_id)
            if o is not None:
                return o.job
        return self.store.job(job_id)

    def jobs(self, status: str | None = None, node: str | None = None) -> list[JobRecord]:
        """In registration order.  Jobs held in memory take their state from it."""
        with self._mem:
            held = {job_id: o.job for job_id, o in self._open.items()}
        if status in (ACTIVE, EXPIRED):  # only open jobs: memory holds them all
            return [j for j in held.values() if j.status == status and (node is None or j.spec.node == node)]
        stored = self.store.jobs(status=status, node=node)
        out = [held.get(j.job_id, j) for j in stored]
        return [j for j in out if status is None or j.status == status]

    def points(self, job_id: str) -> list[MeasuredPoint]:
        with self._mem:
            o = self._open.get(job_id)
            if o is not None:
                return [o.points[w] for w in sorted(o.points)]
        return self.store.points(job_id)

    def current_plans(self) -> dict[str, PlanRecord]:
        """Each node's current plan, the one heartbeats are answered from (memory: no store read)."""
        with self._mem:
            return dict(self._plans)

    def active_count(self, node: str) -> int:
        with self._mem:
            return sum(1 for o in self._open.values() if o.job.status == ACTIVE and o.job.spec.node == node)

    def counts(self) -> dict[str, int]:
        """Jobs per status (memory for the open ones, the store for finished) and stored plans."""
        return self.store.counts() | self.held_counts()

    def held_counts(self) -> dict[str, int]:
        """Open jobs per status, from memory alone (it answers while the store is down)."""
        with self._mem:
            held = [o.job.status for o in self._open.values()]
        return {ACTIVE: held.count(ACTIVE), EXPIRED: held.count(EXPIRED)}
