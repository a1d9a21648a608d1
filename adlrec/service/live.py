"""Jobs' live metrics: buffered in memory by heartbeats, written to MLflow by a separate process.

A heartbeat only appends to a bounded buffer (no MLflow call on the request path).  Each
:meth:`LiveLog.flush` hands what is buffered to a writer process, which logs one batch per job into
that job's run (:class:`adlrec.tracking.LiveRuns`) about every ``period_s`` and ends the runs of
jobs that finished or expired (with their last samples, at its next tick).  A process, not a thread:
logging to MLflow costs milliseconds of CPU per job and batch, which in a thread would hold the
service's GIL for seconds at a time; the writer also runs at the lowest CPU priority, so under load
it uses what the service leaves.

Each write of a job is one point per metric: the mean over the heartbeats since its last write (see
:func:`mean_sample`), plus ``heartbeats``, their number.  The writer is paced, never a burst: each
job is written once per ``period_s`` at its own phase
(spread over the period by a hash of its id), so about ``1/period_s`` of the jobs are written each
second.  It starts with the service (the first flush, even an empty one), so the spawn and the
MLflow import happen before the load, and it finds the jobs' running runs with one search then.
Samples not yet written when the writer dies are lost (at most about ``period_s`` of them).  When
only the service dies, even by SIGKILL, the writer writes what it holds and stops, or is ended after
``ORPHAN_GRACE_S`` (:mod:`adlrec.service.lifeline`); what the service had not yet handed over (about
a second's) is lost.  The writer logs its failures with their traceback and reports counts back
(values logged, failed writes, samples dropped from full buffers).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
import zlib
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adlrec.service.lifeline import ignore_interrupts, watch_parent

__all__ = ["LiveCounts", "LiveLog"]

log = logging.getLogger("adlrec.service")

ORPHAN_GRACE_S = 5.0  # a writer whose service died writes what it holds for at most this, then exits

_Sample = tuple[str, str, float, int, dict[str, float]]  # job id, node, at, step, metrics


@dataclass(frozen=True)
class LiveCounts:
    """What the writer reported since the last flush."""

    logged: int = 0  # metric values written
    failures: int = 0  # writes that raised (logged by the writer)
    dropped: int = 0  # samples dropped because a buffer was full


class LiveLog:
    def __init__(
        self, tracking_uri: str, artifact_root: Path | None, capacity: int = 100_000, period_s: float = 30.0
    ) -> None:
        self.tracking_uri = tracking_uri
        self.artifact_root = artifact_root
        self.capacity = capacity
        self.period_s = period_s
        self._samples: deque[_Sample] = deque(maxlen=capacity)
        self._ends: deque[tuple[str, str]] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._dropped = 0
        self._proc: Any = None
        self._inbox: Any = None
        self._outbox: Any = None

    def record(
        self, job_id: str, node: str, at: float, metrics: dict[str, float | int | None], registered_at: float
    ) -> None:
        """Buffer one heartbeat's metrics.  Its step is whole seconds since the job registered, so a
        job's steps keep growing across service restarts (a counter here would start again at 0)."""
        values = {k: float(v) for k, v in metrics.items() if v is not None}
        if not values:
            return
        step = max(0, int(at - registered_at))
        with self._lock:
            if len(self._samples) == self._samples.maxlen:
                self._dropped += 1
            self._samples.append((job_id, node, at, step, values))

    def end(self, job_id: str, status: str) -> None:
        """The job finished or expired: its run ends with the next write (after its last samples)."""
        with self._lock:
            self._ends.append((job_id, status))

    def flush(self) -> LiveCounts:
        """Hand what is buffered to the writer (started by the first call, even with nothing to hand
        over: the service's first flush comes a second after it starts); returns what it reported."""
        with self._flush_lock:
            with self._lock:
                samples, self._samples = list(self._samples), deque(maxlen=self.capacity)
                ends, self._ends = list(self._ends), deque(maxlen=self.capacity)
                dropped, self._dropped = self._dropped, 0
            before = LiveCounts()
            if self._proc is not None and not self._proc.is_alive():
                # killed (the OOM killer, an operator): a new one, or the queue to it would grow forever
                last = self._collect(0)
                before = LiveCounts(last.logged, last.failures + 1, last.dropped)
                log.error(
                    "the live-metrics writer died (exit code %s); starting a new one: what it had not yet "
                    "written is lost",
                    self._proc.exitcode,
                )
                self._inbox.cancel_join_thread()  # its pipe may be full: never wait for it at exit
                self._proc = None
            if self._proc is None:
                self._start()
            if samples or ends:
                self._inbox.put((samples, ends))
            now = self._collect(dropped)
            return LiveCounts(before.logged + now.logged, before.failures + now.failures, before.dropped + now.dropped)

    def close(self, timeout_s: float = 300.0) -> LiveCounts:
        """Flush, let the writer write everything, and stop it; returns its last counts."""
        counts = self.flush()
        with self._flush_lock:
            if self._proc is None:
                return counts
            self._inbox.put(None)
            self._proc.join(timeout_s)
            if self._proc.is_alive():
                log.error("the live-metrics writer did not finish within %.0f s; stopping it", timeout_s)
                self._proc.kill()  # it ignores SIGTERM (lifeline.ignore_interrupts)
                self._proc.join(10)
            last = self._collect(0)
            self._proc = None
        return LiveCounts(counts.logged + last.logged, counts.failures + last.failures, counts.dropped + last.dropped)

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # never fork a process that runs threads
        self._inbox, self._outbox = ctx.Queue(), ctx.Queue()
        self._proc = ctx.Process(
            target=_write,
            args=(
                self.tracking_uri,
                self.artifact_root,
                self._inbox,
                self._outbox,
                self.period_s,
                self.capacity,
                os.getpid(),
            ),
            name="adlrec-live-writer",
            daemon=True,
        )
        self._proc.start()

    def _collect(self, dropped: int) -> LiveCounts:
        logged = failures = 0
        while self._outbox is not None:
            try:
                n, f, d = self._outbox.get_nowait()
            except queue.Empty:
                break
            logged, failures, dropped = logged + n, failures + f, dropped + d
        return LiveCounts(logged, failures, dropped)


def _sqlite_wal() -> None:
    """In the writer process only: SQLite connections (MLflow's store) use WAL with synchronous=NORMAL,
    so a commit appends to the WAL without an fsync (one per checkpoint instead of several per
    transaction).  A power cut can
    lose the last commits, like the samples not yet written; the database stays consistent."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    @event.listens_for(Engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        if type(dbapi_conn).__module__.startswith("sqlite3"):
            cur = dbapi_conn.cursor()
            try:
                cur.execute("PRAGMA journal_mode=WAL")
                cur.execute("PRAGMA synchronous=NORMAL")
            except Exception:
                log.warning("could not switch the MLflow SQLite store to WAL", exc_info=True)
            finally:
                cur.close()


def mean_sample(batch: list[_Sample]) -> _Sample:
    """One point for a job's heartbeats since its last write: each metric's mean over the heartbeats
    that reported it, ``heartbeats`` their number, at the last one's time and step.

    MLflow's store spends CPU on every value it logs; logging each heartbeat of 1,000 jobs beating
    every second kept the writer busy for a whole load run and still fell behind (docs/service.md)."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for _, _, _, _, metrics in batch:
        for k, v in metrics.items():
            sums[k] = sums.get(k, 0.0) + v
            counts[k] = counts.get(k, 0) + 1
    job_id, node, at, step, _ = batch[-1]
    return job_id, node, at, step, {k: sums[k] / counts[k] for k in sums} | {"heartbeats": float(len(batch))}


def _phase(job_id: str) -> float:
    """Where in the period a job's writes fall, in [0, 1): stable across restarts, spread evenly."""
    return zlib.crc32(job_id.encode()) / 2**32


def _write(
    tracking_uri: str,
    artifact_root: Path | None,
    inbox: Any,
    outbox: Any,
    period_s: float,
    cap: int,
    parent_pid: int | None = None,
) -> None:
    """The writer process: hold samples per job, write each job once per ``period_s`` at its own
    phase (a job that ended: at the next tick), everything on None, then stop.  Once ``parent_pid``
    (the service) is gone, as on None: write everything and stop, within ``ORPHAN_GRACE_S``."""
    ignore_interrupts()  # a Ctrl-C stops the service, which stops this writer once it has written
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    orphaned = threading.Event()
    if parent_pid is not None:  # first (and not niced): the service may die during the imports below
        watch_parent(parent_pid, "the live-metrics writer", on_orphan=orphaned.set, grace_s=ORPHAN_GRACE_S)
    try:
        os.nice(19)
    except OSError:
        pass
    if tracking_uri.startswith("sqlite:"):
        _sqlite_wal()
    from adlrec.tracking import LiveRuns, LiveSample  # mlflow is heavy: import it only here

    def connect() -> Any:
        try:
            return LiveRuns(tracking_uri, artifact_root)  # one search finds the jobs' running runs
        except Exception:
            log.exception("connecting to MLflow for live metrics failed; retrying at the next write")
            outbox.put((0, 1, 0))
            return None

    runs = connect()  # at start, before any load: the import, the connection, the run index
    tick = max(0.05, min(1.0, period_s / 10))
    pending: dict[str, list[_Sample]] = {}  # job id -> samples not yet written
    due: dict[str, float] = {}  # job id -> when its samples are next written
    ends: dict[str, str] = {}  # job id -> how it ended (finished, expired)
    held = dropped = 0
    stop = False
    while not stop:
        items = []
        try:
            items.append(inbox.get(timeout=tick))
            while True:  # catch up with everything already sent
                items.append(inbox.get_nowait())
        except queue.Empty:
            pass
        if orphaned.is_set():  # the service died: nobody will send None
            stop = True
        now = time.monotonic()
        for item in items:
            if item is None:
                stop = True
                continue
            new, new_ends = item
            for sample in new:
                if held >= cap:
                    dropped += 1
                    continue
                job_id = sample[0]
                if job_id not in due:
                    due[job_id] = now + period_s * _phase(job_id)
                pending.setdefault(job_id, []).append(sample)
                held += 1
            for job_id, status in new_ends:
                ends[job_id] = status
        todo = [j for j in set(pending) | set(ends) if stop or j in ends or due.get(j, now) <= now]
        if not todo:
            if dropped:
                outbox.put((0, 0, dropped))
                dropped = 0
            continue
        runs = runs or connect()
        n = failures = 0
        if runs is None:  # connect() logged why and counted the failure
            lost = sum(len(pending.pop(j, [])) for j in todo)
            held -= lost
            for j in todo:
                due[j] = now + period_s
                ends.pop(j, None)
            log.error("%d live sample(s) of %d job(s) lost: no connection to MLflow", lost, len(todo))
            outbox.put((0, 0, dropped))
            dropped = 0
            continue
        for job_id in todo:
            batch = pending.pop(job_id, [])
            held -= len(batch)
            status = ends.pop(job_id, None)
            if status is None:
                due[job_id] = now + period_s
            else:
                due.pop(job_id, None)
            try:
                if batch:
                    n += runs.log_job(job_id, [LiveSample(*mean_sample(batch))])
                if status is not None:
                    runs.end(job_id, status)
            except Exception:
                failures += 1
                log.exception("logging live metrics of job %s to MLflow failed; %d sample(s) lost", job_id, len(batch))
        outbox.put((n, failures, dropped))
        dropped = 0
