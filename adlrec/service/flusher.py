"""The write-behind thread: every ``every_s`` it writes buffered heartbeats to the store and hands
buffered live samples to the MLflow writer; at stop it does both one last time and waits for the
writer.  A failure is counted; heartbeats that could not be written stay in memory and go with the
next flush.  A store that stays down fails every flush (every second by default): the first failure
is logged with its traceback, the same failure again only once every ``repeat_s`` (one line, how many
times and since when), and the first flush that works again says how long writing failed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from adlrec.errors import first_line
from adlrec.service.live import LiveCounts, LiveLog
from adlrec.service.metrics import Metrics
from adlrec.service.state import JobState
from adlrec.words import count

__all__ = ["WriteBehind"]

log = logging.getLogger("adlrec.service")


@dataclass
class _Streak:
    """Flushes failing the same way: ``what`` failed, since ``since``, last logged at ``logged``, ``count`` times."""

    what: str
    since: float
    logged: float
    count: int = 1


class WriteBehind:
    def __init__(
        self,
        state: JobState,
        metrics: Metrics,
        live: LiveLog | None = None,
        every_s: float = 1.0,
        repeat_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.state, self.metrics, self.live, self.every_s = state, metrics, live, every_s
        self.repeat_s, self.clock = repeat_s, clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing: _Streak | None = None  # the store's flushes failing since, if they are

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="adlrec-write-behind", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread, write what is left, and let the live writer finish."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
        self.flush_store()
        if self.live is not None:
            try:
                self._count_live(self.live.close())
            except Exception:
                self.metrics.inc("adlrec_live_log_failures_total")
                log.exception("stopping the live-metrics writer failed; samples not yet written are lost")

    def _loop(self) -> None:
        while not self._stop.wait(self.every_s):
            self.flush_store()
            self.flush_live()

    def flush_store(self) -> None:
        t0 = time.perf_counter()
        try:
            n = self.state.flush()
        except Exception as exc:
            self.metrics.inc("adlrec_store_flush_failures_total")
            self._failed(exc)
            return
        if self._failing is not None:
            streak, self._failing = self._failing, None
            log.info(
                "writing heartbeats to the store works again, after %s over %.0f s",
                count(streak.count, "failed flush"),
                self.clock() - streak.since,
            )
        self.metrics.inc("adlrec_store_flushes_total")
        self.metrics.inc("adlrec_store_flushed_jobs_total", n)
        self.metrics.set("adlrec_store_flush_seconds_last", time.perf_counter() - t0)

    def _failed(self, exc: Exception) -> None:
        """Log a failed flush: with its traceback the first time, then the same failure once per ``repeat_s``."""
        now = self.clock()
        what = f"{type(exc).__name__}: {first_line(exc)}"
        streak = self._failing
        if streak is None or streak.what != what:
            self._failing = _Streak(what, now, now)
            log.exception("writing heartbeats to the store failed; they stay in memory for the next flush")
            return
        streak.count += 1
        if now - streak.logged >= self.repeat_s:
            streak.logged = now
            log.warning(
                "writing heartbeats to the store still fails (%d flushes over %.0f s): %s; they stay in memory",
                streak.count,
                now - streak.since,
                what,
            )

    def flush_live(self) -> None:
        if self.live is None:
            return
        try:
            self._count_live(self.live.flush())
        except Exception:
            self.metrics.inc("adlrec_live_log_failures_total")
            log.exception("handing live metrics to their writer failed; those samples are lost")

    def _count_live(self, c: LiveCounts) -> None:
        self.metrics.inc("adlrec_live_metrics_logged_total", c.logged)
        self.metrics.inc("adlrec_live_log_failures_total", c.failures)
        self.metrics.inc("adlrec_live_samples_dropped_total", c.dropped)
