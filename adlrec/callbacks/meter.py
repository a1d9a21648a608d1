"""Throughput and data-wait share of a running training loop, from timestamps it is handed.

The loop reports two moments per step: when its batch arrived (``fetched``) and when the step ended
(``done``).  The wait for data is the time from the previous step's end to the batch's arrival, or,
when ``done`` is handed the loader's own running total of time spent waiting for batches
(``waited``: ``ResizableLoader.waited_s``), that total's growth since the previous step: a framework's
own work between steps (Lightning's loop, other callbacks) is then not taken for a wait for data.
Figures are over a sliding window of recent steps.  No clock inside: the caller passes ``now``.
Thread-safe: the heartbeat thread reads a snapshot while the loop writes.

Each step may carry a *tag*, the loader's worker count that served its batch.  A change of tag
empties the window, and the first step after it is left out: it holds the switch between pools,
not the new count's pace.  So a window's figures always belong to one worker count, and a
measurement taken across a resize is never reported as a point of either count's curve.

:meth:`LoopMeter.pause` marks a stop of training between steps (validation, a checkpoint, an
epoch's end): the step after it is left out, as the first one is, so that the stop counts neither
as a step nor as a wait for data.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

__all__ = ["LoopMeter", "LoopStats"]


@dataclass(frozen=True)
class LoopStats:
    throughput: float  # samples/s over the window
    data_wait: float  # share of the window spent waiting for batches
    steps: int  # steps in the window
    samples_total: int  # samples consumed since the start
    tag: int | None = None  # the worker count every step in the window was served by, if told


class LoopMeter:
    def __init__(self, window: int = 50) -> None:
        if window < 2:
            raise ValueError("window must be >= 2")
        self._steps: deque[tuple[float, float, int]] = deque(maxlen=window)  # (duration, wait, samples)
        self._last_done: float | None = None
        self._fetched: float | None = None
        self._waited: float | None = None  # the loader's waiting total at the last done, if it keeps one
        self._total = 0
        self._tag: int | None = None
        self._lock = threading.Lock()

    def fetched(self, now: float) -> None:
        self._fetched = now

    def pause(self) -> None:
        """The loop stopped training since the last step (or stops within this one): the next ``done``
        only sets the origin again, as the first one does."""
        with self._lock:
            self._last_done = None
            self._fetched = None

    def done(self, now: float, samples: int, tag: int | None = None, waited: float | None = None) -> None:
        with self._lock:
            if tag != self._tag:
                self._steps.clear()  # another worker count: start a new window, without this step
                self._tag = tag
            elif self._last_done is not None:
                if waited is not None and self._waited is not None:
                    wait = waited - self._waited
                else:
                    fetched = self._fetched if self._fetched is not None else self._last_done
                    wait = min(fetched, now) - self._last_done
                duration = now - self._last_done
                self._steps.append((duration, min(max(0.0, wait), max(0.0, duration)), samples))
            self._last_done = now
            self._fetched = None
            self._waited = waited
            self._total += samples

    def stats(self) -> LoopStats | None:
        """None until two steps have been seen."""
        with self._lock:
            if not self._steps:
                return None
            seconds = sum(d for d, _, _ in self._steps)
            if seconds <= 0:
                return None
            return LoopStats(
                throughput=sum(s for _, _, s in self._steps) / seconds,
                data_wait=min(1.0, sum(w for _, w, _ in self._steps) / seconds),
                steps=len(self._steps),
                samples_total=self._total,
                tag=self._tag,
            )
