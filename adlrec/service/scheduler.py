"""When the service recomputes: every interval, and shortly after a job registers or finishes.

:meth:`Recomputer.recompute` is the one place that runs a recompute: expire silent jobs, flush the
heartbeats, take a snapshot (from memory: :class:`~adlrec.service.state.JobState`), call the pure
:func:`~adlrec.service.recompute.compute_plans`, store the plans that changed.  An APScheduler ``BackgroundScheduler`` runs it every ``interval_s`` and, debounced, after
register/finish.  A failure in the background is logged with its traceback and counted, never
swallowed silently; the next run tries again.

Once started, the recomputer runs ``compute_plans`` in a process of its own (spawned at start, kept
warm; until that process is up, in the service's).  In a thread, a recompute of many jobs holds the service's GIL for most of its second or so,
and the event loop, which must take its turns at the same GIL, falls behind the heartbeats: their
latency grows by hundreds of ms for every recompute.  Only the snapshot and the outcomes cross the
process boundary.  If that process dies, the recompute runs in the service's process, the failure is
logged and counted (``adlrec_recompute_process_failures_total``), and a new process is started.
That process runs at a lower CPU priority (``RECOMPUTE_NICE``): on busy cores it yields them to the
event loop.  It exits within about a second once the service is gone, even killed by SIGKILL
(:mod:`adlrec.service.lifeline`; a recompute only computes, the service's process stores the plans).
"""

from __future__ import annotations

import datetime as dt
import logging
import multiprocessing
import os
import threading
import time
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, JobSubmissionEvent
from apscheduler.schedulers.background import BackgroundScheduler

from adlrec.service.lifeline import init_child
from adlrec.service.live import LiveLog
from adlrec.service.metrics import Metrics
from adlrec.service.predictor import Predictor
from adlrec.service.recompute import compute_plans
from adlrec.service.records import ACTIVE, NodeOutcome, PlanRecord, Snapshot
from adlrec.service.state import JobState

__all__ = ["Recomputer", "RecomputeConfig"]

log = logging.getLogger("adlrec.service")

# niceness the recompute process adds to its own: a recompute is background work, and on busy cores it
# yields to the service's event loop (a plan a little later costs nothing; a heartbeat held up is the latency tail)
RECOMPUTE_NICE = 10
_SKIPPED = "maximum number of running instances reached"  # APScheduler's words for a run it skipped
_PERIODIC = "adlrec-recompute"  # APScheduler's id of the interval job
_DEBOUNCED = "adlrec-debounced"  # and of the one a register/finish asks for
_WHAT = {_PERIODIC: "interval", _DEBOUNCED: "register/finish"}  # job id -> trigger


class _SkipsSaidOnce(logging.Filter):
    """Drops APScheduler's WARNING for each run it skips because the last one still runs: at an interval
    shorter than a recompute it came at every tick.  :class:`Recomputer` says it once and counts the skips."""

    def filter(self, record: logging.LogRecord) -> bool:
        return _SKIPPED not in record.getMessage()


@dataclass(frozen=True)
class RecomputeConfig:
    policy: str  # a name in adlrec.allocate.POLICIES
    objective: str  # busy_gpus | throughput | weighted
    threshold: float  # hysteresis share
    ttl_s: float  # silence after which a job expires
    interval_s: float  # seconds between periodic recomputes
    debounce_s: float  # delay of the recompute a register/finish asks for


class Recomputer:
    def __init__(
        self,
        state: JobState,
        predictor: Predictor,
        config: RecomputeConfig,
        metrics: Metrics,
        live: LiveLog | None = None,
        own_process: bool = True,
    ) -> None:
        self.state = state
        self.store = state.store
        self.live = live
        self.predictor = predictor
        self.config = config
        self.metrics = metrics
        self._lock = threading.Lock()  # one recompute at a time, whoever asked
        self._scheduler: BackgroundScheduler | None = None
        self.own_process = own_process  # once started, compute plans in a process of their own
        self._pool: ProcessPoolExecutor | None = None
        self._warm: Future | None = None  # done once the pool's process has started and imported
        self._said_skipped: set[str] = set()  # the triggers whose skipped runs were logged

    def recompute(self, trigger: str = "manual") -> list[PlanRecord]:
        """Expire silent jobs, plan every node, store the changed plans; returns them."""
        c = self.config
        with self._lock:
            t0 = time.perf_counter()
            expired = self.state.expire(c.ttl_s)
            if expired:
                self.metrics.inc("adlrec_jobs_expired_total", len(expired))
                log.info("expired %d silent job(s): %s", len(expired), ", ".join(expired[:10]))
                if self.live is not None:
                    for job_id in expired:
                        self.live.end(job_id, "expired")
            self.state.flush()  # the expiries and the heartbeats so far, before plans that follow from them
            outcomes = self._compute(self.state.snapshot())
            for o in outcomes:
                if o.error:
                    self.metrics.inc("adlrec_infeasible_total")
                    if o.plan is None:  # its jobs could not be made a request
                        log.warning("node %s: no plan: %s", o.node, o.error)
                    else:
                        log.warning("node %s: no plan fits (%s): every job gets its minimum workers", o.node, o.error)
            self.state.set_problems({o.node: o.error for o in outcomes if o.error})  # GET /nodes shows them
            stored = self.store.add_plans(outcomes)
            self.state.plans_stored(stored)
            self.metrics.set("adlrec_recompute_seconds_last", time.perf_counter() - t0)
        self.metrics.inc("adlrec_recomputes_total", trigger=trigger)
        self.metrics.inc("adlrec_plans_stored_total", len(stored))
        for p in stored:
            log.info("plan %d for node %s: %s", p.plan_id, p.node, p.plan.workers)
        return stored

    def _compute(self, snapshot: Snapshot) -> list[NodeOutcome]:
        c = self.config
        args = (snapshot, c.policy, c.objective, c.threshold)
        pool = self._pool
        if pool is None or self._warm is None or not self._warm.done():
            return compute_plans(*args)  # not started, or still starting: the first plans do not wait for it
        try:
            return pool.submit(compute_plans, *args).result()
        except BrokenProcessPool:
            self.metrics.inc("adlrec_recompute_process_failures_total")
            log.exception("the recompute process died; computing in the service's process and starting a new one")
            self._pool, self._warm = _start_pool()
            pool.shutdown(wait=False)
            return compute_plans(*args)

    def refresh_model(self) -> None:
        """Follow the registry alias; when the model changed, predict the active jobs' curves again."""
        if not self.predictor.refresh():
            return
        from adlrec.predict.features import ProbeFeatures

        curves = {}
        for job in self.state.jobs(status=ACTIVE):
            if job.spec.features is None:
                continue  # an explicit curve stays
            curves[job.job_id] = self.predictor.predict(
                ProbeFeatures.from_dict(job.spec.features), len(job.spec.curve) - 1
            )
        if curves:
            self.state.update_curves(curves)
            log.info("predicted %d active job curve(s) again with %s", len(curves), self.predictor.info.source)

    # -- background ---------------------------------------------------------------------------
    def start(self) -> None:
        if self.own_process:
            self._pool, self._warm = _start_pool()
        sched = BackgroundScheduler(daemon=True, job_defaults={"coalesce": True, "max_instances": 1})
        apscheduler_log = logging.getLogger("apscheduler.scheduler")
        if not any(isinstance(f, _SkipsSaidOnce) for f in apscheduler_log.filters):
            apscheduler_log.addFilter(_SkipsSaidOnce())
        sched.add_listener(self._skipped, EVENT_JOB_MAX_INSTANCES)
        sched.add_job(
            self._tick,
            "interval",
            seconds=self.config.interval_s,
            id=_PERIODIC,
            name="adlrec periodic recompute",
            next_run_time=dt.datetime.now(dt.timezone.utc),
        )
        sched.start()
        self._scheduler = sched

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
        if self._pool is not None:
            with self._lock:  # after a recompute that a request started
                pool, self._pool = self._pool, None
            pool.shutdown(wait=True)

    def poke(self, trigger: str) -> None:
        """Ask for a recompute ``debounce_s`` from now; asks that arrive meanwhile join it, and one made while
        a recompute runs is planned right after it."""
        sched = self._scheduler
        if sched is None:
            return
        if sched.get_job(_DEBOUNCED) is not None:
            return
        when = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=self.config.debounce_s)
        try:
            sched.add_job(
                self._run,
                "date",
                run_date=when,
                args=[trigger],
                id=_DEBOUNCED,
                name="adlrec debounced recompute",
                replace_existing=False,
                # Due while the last one still runs, it waits for the recompute lock and plans what came
                # meanwhile; with APScheduler's default of 1 it was skipped, leaving that to the next tick.
                max_instances=2,
            )
        except Exception:  # another thread added it between the check and here: it will run
            log.debug("debounced recompute already pending", exc_info=True)

    def _skipped(self, event: JobSubmissionEvent) -> None:
        """A run APScheduler skipped, since the one before it still ran: counted, and said once per trigger."""
        trigger = _WHAT.get(event.job_id, event.job_id)
        self.metrics.inc("adlrec_recomputes_skipped_total", trigger=trigger)
        if trigger in self._said_skipped:
            return
        self._said_skipped.add(trigger)
        log.warning(
            "a recompute (%s) came due while the one before it still ran, and was skipped: such skips are "
            "counted in adlrec_recomputes_skipped_total, not logged again (a recompute slower than --interval, "
            "%g s here, skips a tick every time)",
            trigger,
            self.config.interval_s,
        )

    def _tick(self) -> None:
        try:
            self.refresh_model()
        except Exception:
            log.exception("refreshing the throughput model failed; keeping %s", self.predictor.info.source)
        self._run("interval")

    def _run(self, trigger: str) -> None:
        try:
            self.recompute(trigger)
        except Exception:
            self.metrics.inc("adlrec_recompute_failures_total")
            log.exception("recompute (%s) failed; the next one tries again", trigger)


def _start_pool() -> tuple[ProcessPoolExecutor, Future]:
    """One spawned process for ``compute_plans`` (never fork a process that runs threads), started
    now, and a future done once it has (its interpreter and imports load while the service starts;
    until then recomputes run in the service's process)."""
    pool = ProcessPoolExecutor(
        max_workers=1,
        mp_context=multiprocessing.get_context("spawn"),
        # in lifeline.py, whose imports are light: the child ignores a terminal's Ctrl-C before it imports
        # the service's modules, which takes it seconds (compute_plans, with the first task)
        initializer=init_child,
        initargs=(os.getpid(), "the recompute process", RECOMPUTE_NICE),
    )
    return pool, pool.submit(_ready)


def _ready() -> bool:
    return True
