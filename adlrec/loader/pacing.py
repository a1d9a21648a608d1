"""Forking a new pool's workers one at a time, when the training loop lets it.

``os.fork`` holds the GIL for the whole fork, and forking a process with torch loaded takes
milliseconds to tens of milliseconds (page tables in proportion to its memory).  Torch's
``_MultiProcessingDataLoaderIter.__init__`` forks all its workers in one loop, so even a pool
started from a thread stops the training loop's thread for ``workers x fork``.  A
:class:`PacedForkContext` is a fork context whose processes wait for a permit in ``start()``; the
loop grants one per batch it takes, so each batch is held up by at most one fork.  Only ``fork``
is paced: its ``Process`` objects are never pickled, and with spawn or forkserver the parent's
side of a start is cheap (the cost is in the child).
"""

from __future__ import annotations

import math
import threading
import time
from multiprocessing.context import BaseContext

__all__ = ["ForkPacer", "paced"]


class ForkPacer:
    """Permits to fork, granted by the loop's thread and taken by the thread starting a pool."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._allowed: float = 0
        self._started = 0
        self.waited_s = 0.0  # time spent waiting for permits, not starting anything

    @property
    def started(self) -> int:
        """Permits taken: processes started or starting."""
        return self._started

    def allow(self, n: int = 1) -> None:
        with self._cond:
            self._allowed += n
            self._cond.notify_all()

    def allow_all(self) -> None:
        with self._cond:
            self._allowed = math.inf
            self._cond.notify_all()

    def turn(self) -> None:
        """Block until a permit is free, then take it."""
        t = time.perf_counter()
        with self._cond:
            self._cond.wait_for(lambda: self._started < self._allowed)
            self._started += 1
        self.waited_s += time.perf_counter() - t


try:  # POSIX only
    from multiprocessing.context import ForkContext, ForkProcess
except ImportError:  # pragma: no cover - Windows has no fork
    ForkContext = ForkProcess = None  # type: ignore[assignment,misc]


if ForkContext is not None:

    class PacedForkProcess(ForkProcess):  # type: ignore[misc,valid-type]
        pacer: ForkPacer | None = None

        def start(self) -> None:
            if self.pacer is not None:
                self.pacer.turn()
            super().start()

    class PacedForkContext(ForkContext):  # type: ignore[misc,valid-type]
        """The fork context, with every process started only on a permit from ``pacer``."""

        def __init__(self, pacer: ForkPacer) -> None:
            self.pacer = pacer

        def Process(self, *args: object, **kwargs: object) -> PacedForkProcess:  # noqa: N802 - the context API's name
            proc = PacedForkProcess(*args, **kwargs)  # type: ignore[arg-type]
            proc.pacer = self.pacer
            return proc


def paced(context: BaseContext, pacer: ForkPacer) -> BaseContext | None:
    """``context`` with its forks paced by ``pacer``; ``None`` when it does not fork (nothing to pace)."""
    if ForkContext is None or context.get_start_method() != "fork":
        return None
    return PacedForkContext(pacer)
