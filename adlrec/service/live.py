"""Jobs' live metrics, buffered in memory by heartbeats and written to MLflow in the background.

A heartbeat only appends to a bounded buffer (no MLflow call on the request path); the periodic
recompute job calls :meth:`LiveLog.flush`, which writes one batch per job into that job's run
(:class:`adlrec.tracking.LiveRuns`) and ends the runs of jobs that finished or expired.  Samples
still in the buffer when the process dies are lost; a full buffer drops the oldest and counts them.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from pathlib import Path
from typing import Any

__all__ = ["LiveLog"]

log = logging.getLogger("adlrec.service")


class LiveLog:
    def __init__(self, tracking_uri: str, artifact_root: Path | None, capacity: int = 100_000) -> None:
        self.tracking_uri = tracking_uri
        self.artifact_root = artifact_root
        self._samples: deque[Any] = deque(maxlen=capacity)
        self._ends: deque[tuple[str, str]] = deque(maxlen=capacity)
        self._steps: dict[str, int] = {}
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._runs: Any = None
        self.dropped = 0

    def record(self, job_id: str, node: str, at: float, metrics: dict[str, float | int | None]) -> None:
        values = {k: float(v) for k, v in metrics.items() if v is not None}
        if not values:
            return
        with self._lock:
            step = self._steps.get(job_id, 0)
            self._steps[job_id] = step + 1
            if len(self._samples) == self._samples.maxlen:
                self.dropped += 1
            self._samples.append((job_id, node, at, step, values))

    def end(self, job_id: str, status: str) -> None:
        """The job finished or expired: its run ends at the next flush (after its last samples)."""
        with self._lock:
            self._ends.append((job_id, status))
            self._steps.pop(job_id, None)

    def flush(self) -> int:
        """Write what is buffered; returns the number of metric values logged.  Raises on failure
        (the caller logs it); samples taken out of the buffer before a failure are lost."""
        with self._flush_lock:
            with self._lock:
                samples, self._samples = list(self._samples), deque(maxlen=self._samples.maxlen)
                ends, self._ends = list(self._ends), deque(maxlen=self._ends.maxlen)
            if not samples and not ends:
                return 0
            from adlrec.tracking import LiveRuns, LiveSample  # mlflow is heavy: import it only here

            if self._runs is None:
                self._runs = LiveRuns(self.tracking_uri, self.artifact_root)
            n = self._runs.log([LiveSample(j, node, at, step, m) for j, node, at, step, m in samples])
            for job_id, status in ends:
                self._runs.end(job_id, status)
            return n
