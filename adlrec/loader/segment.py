"""A segment: a run of an epoch's batches served by one inner ``DataLoader`` and its worker pool."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch.utils.data import DataLoader, Sampler

from adlrec.loader.pacing import ForkPacer
from adlrec.loader.workers import WorkerGate

__all__ = ["BatchRange", "InnerLoader", "Segment", "shutdown"]


class InnerLoader(DataLoader):
    """The ``DataLoader`` serving one segment, without torch's warning against more workers than cores.

    The worker count is the allocation service's decision, made knowing the cores; torch's advice
    (issued at construction and at every ``iter()``) is noise here, as it is in a profiling sweep.
    Overriding the check, rather than filtering warnings, is safe from the thread that starts a pool.
    """

    def check_worker_number_rationality(self) -> None:
        return None


class BatchRange(Sampler[list[int]]):
    """A batch sampler that hands out ``batches[start:stop]``, where ``stop`` may be lowered mid-way.

    The inner ``DataLoader`` pulls a batch from it only when it sends that batch to a worker (or, with
    no workers, loads it), so ``handed`` counts the batches already committed to this pool: a cut at
    ``handed`` or later loses and repeats nothing.  A pool starting in a thread pulls its first batches
    while the loop's thread may cut: the lock makes check-and-take and cut atomic.
    """

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.start = 0
        self.stop = 0
        self.handed = 0  # absolute index of the next batch to hand out
        self.lock = threading.Lock()

    def configure(self, batches: list[list[int]], start: int, stop: int) -> None:
        self.batches, self.start, self.stop, self.handed = batches, start, stop, start

    def __iter__(self) -> Iterator[list[int]]:
        while True:
            with self.lock:
                if self.handed >= self.stop:
                    return
                batch = self.batches[self.handed]
                self.handed += 1
            yield batch

    def cut(self, at: int | None = None, extra: int = 0) -> int:
        """Hand out nothing from ``at`` (default: what is handed out now, plus ``extra``) on; returns the cut."""
        with self.lock:
            at = min(self.stop, self.handed + extra if at is None else max(at, self.handed))
            self.stop = at
            return at

    def __len__(self) -> int:
        return max(0, self.stop - self.start)


@dataclass
class Segment:
    """One pool's share of an epoch: batches ``[start, range.stop)``, of which ``served`` went to the loop."""

    start: int
    workers: int
    range: BatchRange
    loader: DataLoader
    it: Iterator[Any] | None = None
    served: int = 0
    starter: threading.Thread | None = None  # starting the pool off the training loop's thread
    start_error: BaseException | None = None
    start_s: float | None = None  # how long starting the pool took
    # A resize's new pool: forked one worker per batch the loop takes, each worker held after its
    # setup until its turn.
    pacer: ForkPacer | None = None
    gate: WorkerGate | None = None
    opens: tuple[int, ...] = ()  # batches the loop has had when each worker's gate opens (absolute)

    def advance(self, consumed: int, fork: bool = True) -> None:
        """The loop has had ``consumed`` batches: one more fork (if ``fork``), and open the gates whose turn
        has come.  The loop grants a fork as it takes a batch, so that the fork overlaps its step rather
        than its wait for the next batch."""
        if self.pacer is not None and fork:
            self.pacer.allow()
        if self.gate is not None:
            for worker, at in enumerate(self.opens):
                if consumed >= at:
                    self.gate.open(worker)

    def open_all(self) -> None:
        """Let every worker start and work (the switch is here, or the pool is being stopped)."""
        if self.pacer is not None:
            self.pacer.allow_all()
        if self.gate is not None:
            self.gate.open_all()

    def launch(self, background: bool) -> None:
        """Create the inner iterator, which starts the workers; in a named daemon thread if ``background``."""
        if not background:
            self._start()
            return
        self.starter = threading.Thread(target=self._start, name="adlrec-loader-start", daemon=True)
        self.starter.start()

    def _start(self) -> None:
        t = time.perf_counter()
        try:
            self.it = iter(self.loader)
        except BaseException as exc:  # re-raised in the loop's thread by wait_started
            self.start_error = exc
        self.start_s = time.perf_counter() - t - (self.pacer.waited_s if self.pacer is not None else 0.0)

    def wait_started(self) -> None:
        if self.starter is not None:
            self.starter.join()
            self.starter = None
        if self.start_error is not None:
            raise self.start_error

    @property
    def stop(self) -> int:
        return self.range.stop


def shutdown(seg: Segment) -> None:
    """Stop ``seg``'s workers now and join them; idempotent.

    Uses torch's ``_shutdown_workers`` (what the iterator's ``__del__`` and exhaustion call) so that
    no pool's life depends on when the garbage collector runs.  Held workers are let go first, or
    torch would wait its 5 s join timeout for each of them.
    """
    seg.open_all()
    if seg.starter is not None:
        seg.starter.join()
        seg.starter = None
    it, seg.it = seg.it, None
    stop = getattr(it, "_shutdown_workers", None)
    if stop is not None:
        stop()
    if getattr(seg.loader, "_iterator", None) is it:
        seg.loader._iterator = None  # a persistent loader keeps its iterator: drop it too
