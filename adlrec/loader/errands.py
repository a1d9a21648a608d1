"""A loader's errands: work it does off the training loop's thread, in one thread that outlives them.

Stopping a drained pool (joining its workers) or a zygote must not hold up the next batch, so it runs
in another thread.  A thread made for each errand cost the loop its start: ``Thread.start`` waits
until the new thread runs, which on saturated cores is a scheduling delay, measured at 0.2-11 ms
(median 3.3) per drained pool on this project's 2-core machine, a third of a batch or more at batch
times of 7-15 ms.  :class:`Errands` starts its thread once, where the loop waits anyway (an epoch's
start, beside its workers' forks), and the loop only hands it errands afterwards.

A resize's new pool starts in a thread of its own (its forks are paced per thread), so the loop also
paid a thread start inside ``resize``.  :class:`Spare` threads are started ahead in the same way, each
waiting to run one pool's start; the errand thread starts a new spare when the loop takes one.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

__all__ = ["Errands", "Spare"]

log = logging.getLogger(__name__)


class Spare:
    """A thread started ahead of need, that runs one function when given it (and ends without, if retired)."""

    def __init__(self, name: str) -> None:
        self._job: Callable[[], Any] | None = None
        self._given = threading.Event()
        self.thread = threading.Thread(target=self._wait, name=name, daemon=True)

    def run(self, job: Callable[[], Any]) -> None:
        """Run ``job`` in this thread (once)."""
        self._job = job
        self._given.set()

    def retire(self) -> None:
        """End the thread without a job."""
        self._given.set()

    def _wait(self) -> None:
        self._given.wait()
        if self._job is not None:
            self._job()


class Errands:
    """Run errands one at a time, in order, in a daemon thread named ``name``.

    :meth:`ensure_thread` starts the thread (call it where a thread's start costs nothing); an errand
    submitted while no thread runs gets a thread of its own, as before (and runs in the caller's thread
    if no thread can start: out of processes).  An errand that raises is logged and the next one runs.
    """

    def __init__(self, name: str, spares: int = 0, spare_name: str = "") -> None:
        self.name = name
        self.spares_wanted = spares  # spare threads kept ready while the errand thread runs
        self.spare_name = spare_name
        self._spares: deque[Spare] = deque()
        self._cond = threading.Condition()
        self._queue: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._running = 0  # errands taken from the queue and not yet done
        self._thread: threading.Thread | None = None
        self._others: list[threading.Thread] = []  # errands that got a thread of their own
        self._closing = False

    def ensure_thread(self) -> bool:
        """Start the errands' thread if it is not running; whether it runs."""
        with self._cond:
            if self._thread is not None and self._thread.is_alive():
                return True
            self._closing = False
            thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
            try:
                thread.start()
            except RuntimeError as exc:  # "can't start new thread": out of processes
                log.warning("ResizableLoader: could not start its %s thread (%s)", self.name, exc)
                return False
            self._thread = thread
        while self.spare_count() < self.spares_wanted and self._add_spare():
            pass
        return True

    def spare_count(self) -> int:
        with self._cond:
            return len(self._spares)

    def take_spare(self) -> Spare | None:
        """A spare thread, running and waiting for its job, if one is ready; another is started off this thread."""
        with self._cond:
            if not self._spares:
                return None
            spare = self._spares.popleft()
        self.submit(self._add_spare)
        return spare

    def _add_spare(self) -> bool:
        spare = Spare(self.spare_name or self.name)
        try:
            spare.thread.start()
        except RuntimeError as exc:  # out of processes: the next pool starts its own thread, as before
            log.info("ResizableLoader: could not start a spare thread (%s)", exc)
            return False
        with self._cond:
            if self._closing or self._thread is None:  # closed meanwhile: not wanted
                spare.retire()
                return False
            self._spares.append(spare)
        return True

    def submit(self, errand: Callable[..., Any], *args: Any) -> None:
        """Run ``errand(*args)`` off this thread, after the errands submitted before it."""
        with self._cond:
            if self._thread is not None and self._thread.is_alive() and not self._closing:
                self._queue.append((errand, args))
                self._cond.notify_all()
                return
        thread = threading.Thread(target=self._run, args=(errand, args), name=self.name, daemon=True)
        try:
            thread.start()
        except RuntimeError:  # out of processes: do it here rather than not at all
            self._run(errand, args)
            return
        with self._cond:
            self._others = [t for t in self._others if t.is_alive()] + [thread]

    def busy(self) -> bool:
        """Whether an errand is waiting or running."""
        with self._cond:
            self._others = [t for t in self._others if t.is_alive()]
            return bool(self._queue or self._running or self._others)

    def join(self) -> None:
        """Wait until every errand submitted so far is done (called from an errand, return at once)."""
        with self._cond:
            if threading.current_thread() is self._thread:  # a finalizer run by an errand: it cannot wait for itself
                return
            self._cond.wait_for(lambda: not self._queue and not self._running)
            others, self._others = self._others, []
        for thread in others:
            thread.join()

    def close(self) -> None:
        """Finish the errands submitted so far, then stop the thread (:meth:`ensure_thread` starts another)."""
        with self._cond:
            self._closing = True
            thread = self._thread
            self._cond.notify_all()
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self.join()
        with self._cond:
            spares, self._spares = list(self._spares), deque()
        for spare in spares:
            spare.retire()
            spare.thread.join()

    def _serve(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._queue or self._closing)
                if not self._queue:  # closing, and nothing left
                    self._thread = None
                    return
                errand, args = self._queue.popleft()
                self._running += 1
            try:
                self._run(errand, args)
            finally:
                with self._cond:
                    self._running -= 1
                    self._cond.notify_all()

    @staticmethod
    def _run(errand: Callable[..., Any], args: tuple[Any, ...]) -> None:
        try:
            errand(*args)
        except Exception:  # a background thread logs what failed; the loader goes on
            log.exception("ResizableLoader: %s failed", getattr(errand, "__qualname__", errand))
