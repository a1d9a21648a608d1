"""Jobs' live metrics: buffered in memory by heartbeats, written to MLflow by a separate process.

A heartbeat only appends to a bounded buffer (no MLflow call on the request path).  Each
:meth:`LiveLog.flush` hands what is buffered to a writer process, which logs one batch per job into
that job's run (:class:`adlrec.tracking.LiveRuns`) at most every ``period_s`` and ends the runs of
jobs that finished or expired.  A process, not a thread: logging to MLflow costs milliseconds of
CPU per job and batch, which in a thread would hold the service's GIL for seconds at a time; the
writer also runs at the lowest CPU priority, so under load it uses what the service leaves.
Samples not yet written when the service dies are lost; the writer logs its failures with their
traceback and reports counts back (values logged, failed writes, samples dropped from full buffers).
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["LiveCounts", "LiveLog"]

log = logging.getLogger("adlrec.service")

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
        self._steps: dict[str, int] = {}
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._dropped = 0
        self._proc: Any = None
        self._inbox: Any = None
        self._outbox: Any = None

    def record(self, job_id: str, node: str, at: float, metrics: dict[str, float | int | None]) -> None:
        values = {k: float(v) for k, v in metrics.items() if v is not None}
        if not values:
            return
        with self._lock:
            step = self._steps.get(job_id, 0)
            self._steps[job_id] = step + 1
            if len(self._samples) == self._samples.maxlen:
                self._dropped += 1
            self._samples.append((job_id, node, at, step, values))

    def end(self, job_id: str, status: str) -> None:
        """The job finished or expired: its run ends with the next write (after its last samples)."""
        with self._lock:
            self._ends.append((job_id, status))
            self._steps.pop(job_id, None)

    def flush(self) -> LiveCounts:
        """Hand what is buffered to the writer (started on first use); returns what it reported."""
        with self._flush_lock:
            with self._lock:
                samples, self._samples = list(self._samples), deque(maxlen=self.capacity)
                ends, self._ends = list(self._ends), deque(maxlen=self.capacity)
                dropped, self._dropped = self._dropped, 0
            if samples or ends:
                if self._proc is None:
                    self._start()
                self._inbox.put((samples, ends))
            return self._collect(dropped)

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
                self._proc.terminate()
                self._proc.join(10)
            last = self._collect(0)
            self._proc = None
        return LiveCounts(counts.logged + last.logged, counts.failures + last.failures, counts.dropped + last.dropped)

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # never fork a process that runs threads
        self._inbox, self._outbox = ctx.Queue(), ctx.Queue()
        self._proc = ctx.Process(
            target=_write,
            args=(self.tracking_uri, self.artifact_root, self._inbox, self._outbox, self.period_s, self.capacity),
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


def _write(tracking_uri: str, artifact_root: Path | None, inbox: Any, outbox: Any, period_s: float, cap: int) -> None:
    """The writer process: collect batches, write them at most every ``period_s``, stop on None."""
    try:
        os.nice(19)
    except OSError:
        pass
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from adlrec.tracking import LiveRuns, LiveSample  # mlflow is heavy: import it only here

    runs = None
    samples: deque[_Sample] = deque(maxlen=cap)
    ends: list[tuple[str, str]] = []
    dropped, last, stop = 0, float("-inf"), False
    while not stop:
        due = last + period_s
        try:
            item = inbox.get(timeout=max(0.0, due - time.monotonic()) if samples or ends else None)
        except queue.Empty:
            item = ()
        if item is None:
            stop = True
        elif item:
            new, new_ends = item
            dropped += max(0, len(samples) + len(new) - cap)
            samples.extend(new)
            ends += new_ends
        if not (samples or ends) or not (stop or time.monotonic() >= due):
            continue
        last = time.monotonic()
        batch, batch_ends, samples, ends = list(samples), ends, deque(maxlen=cap), []
        try:
            runs = runs or LiveRuns(tracking_uri, artifact_root)
            n = runs.log([LiveSample(*s) for s in batch])
            for job_id, status in batch_ends:
                runs.end(job_id, status)
            outbox.put((n, 0, dropped))
        except Exception:
            log.exception("logging live metrics to MLflow failed; %d sample(s) lost", len(batch))
            outbox.put((0, 1, dropped))
        dropped = 0
