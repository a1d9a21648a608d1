"""A pool: one inner ``DataLoader`` and its workers, serving the batches the epoch's schedule gives it."""

from __future__ import annotations

import errno

# A pool's queues import ``multiprocessing.synchronize`` the first time one is made, which may be in a
# resize's start thread while the process is out of files: that import then failed (EMFILE reading its
# source), and a second start thread, finding it half made, raised an ImportError the loader does not
# take for a start failure, so it reached the training loop.  Imported here, with the loader, instead.
import multiprocessing.synchronize  # noqa: F401
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from torch.utils.data import DataLoader, Sampler, _utils
from torch.utils.data.dataloader import _MultiProcessingDataLoaderIter

from adlrec.loader.errands import Spare
from adlrec.loader.pacing import ForkPacer
from adlrec.loader.schedule import Schedule
from adlrec.loader.workers import WorkerGate
from adlrec.loader.zygote import Zygote

__all__ = ["BatchRange", "InnerLoader", "Pool", "shutdown"]


class InnerLoader(DataLoader):
    """The ``DataLoader`` of one pool, without torch's warning against more workers than cores.

    The worker count is the allocation service's decision, made knowing the cores; torch's advice
    (issued at construction and at every ``iter()``) is noise here, as it is in a profiling sweep.
    Overriding the check, rather than filtering warnings, is safe from the thread that starts a pool.
    """

    def check_worker_number_rationality(self) -> None:
        return None

    def _get_iterator(self) -> Any:
        return PoolIterator(self) if self.num_workers > 0 else super()._get_iterator()


DEATH_SEEN_S = 2.0  # how long a pipe reset by a worker waits for that worker's exit to show


class PoolIterator(_MultiProcessingDataLoaderIter):
    """Torch's worker iterator, safe to collect after a start that failed (out of files or processes),
    and naming a worker that died while its batch was being received.

    Torch sets ``_shutdown`` part-way through ``__init__``; a start failing before that left an object
    whose ``__del__`` raised ``AttributeError`` to stderr.  Until ``__init__`` sets it there is nothing
    to shut down, which the class default says.
    """

    _shutdown = True

    def __init__(self, loader: DataLoader) -> None:
        try:
            super().__init__(loader)
        except BaseException:
            self._stop_half_made()
            raise

    def _try_get_data(self, timeout: float = _utils.MP_STATUS_CHECK_INTERVAL) -> tuple[bool, Any]:
        """Torch's, but a worker killed while the loop received its batch is named, as torch names
        one it finds dead.  A batch's tensors come through the worker's own socket: killed then, the
        worker closes it before the kernel shows it exited, so torch's check (``is_alive``) right
        after the reset still saw it alive and let ``ConnectionResetError`` through (seen under load
        in CI).  Here the reset waits up to ``DEATH_SEEN_S`` for a worker's exit to show."""
        try:
            return super()._try_get_data(timeout)
        except (ConnectionError, EOFError) as exc:
            dead = self._dead_workers(DEATH_SEEN_S)
            if not dead:
                raise
            raise RuntimeError(
                f"DataLoader worker (pid(s) {', '.join(str(w.pid) for w in dead)}) exited unexpectedly"
            ) from exc

    def _dead_workers(self, wait_s: float) -> list[Any]:
        """The workers still counted on that have exited (each marked so), looking for up to ``wait_s``."""
        deadline = time.monotonic() + wait_s
        while True:
            dead = [(i, w) for i, w in enumerate(self._workers) if self._workers_status[i] and not w.is_alive()]
            if dead or time.monotonic() >= deadline:
                for i, _ in dead:
                    self._mark_worker_as_unavailable(i)
                return [w for _, w in dead]
            time.sleep(0.01)

    def _stop_half_made(self) -> None:
        """A start that failed part-way: stop the workers it did start now, not when (or where) the
        garbage collector finds this object; torch's own shutdown assumes a finished __init__."""
        self._shutdown = True
        if getattr(self, "_worker_pids_set", False):
            _utils.signal_handling._remove_worker_pids(id(self))
            self._worker_pids_set = False
        workers = getattr(self, "_workers", [])
        for w in workers:
            if w.is_alive():
                w.terminate()
        for w in workers:
            w.join(timeout=_utils.MP_STATUS_CHECK_INTERVAL)
        for q in getattr(self, "_index_queues", []):
            q.cancel_join_thread()
            q.close()


class BatchRange(Sampler[list[int]]):
    """A pool's batch sampler: hands out, in position order, the batches the schedule gives its pool.

    The inner ``DataLoader`` pulls a batch from it only when it sends that batch to a worker (or, with
    no workers, loads it), so ``cursor`` (one past the last position handed out) bounds what is
    committed to this pool: a schedule rewritten from the largest cursor of the pools that handed
    anything out loses and repeats nothing.
    A pool starting in a thread pulls its first batches while the loop's thread may rewrite: the
    schedule's lock makes find-and-take and rewrite atomic.  Once it finds nothing more it is done
    for the epoch (torch does not ask a finished sampler again), so a rewrite never gives it more.
    """

    def __init__(self, pool_id: int) -> None:
        self.pool_id = pool_id
        self.batches: list[list[int]] = []
        self.schedule: Schedule | None = None
        self.cursor = 0  # the next position to look from
        self.handed = 0  # batches handed out this epoch
        self.exhausted = False

    def configure(self, batches: list[list[int]], schedule: Schedule, start: int) -> None:
        self.batches, self.schedule, self.cursor, self.exhausted = batches, schedule, start, False
        self.handed = 0

    def __iter__(self) -> Iterator[list[int]]:
        schedule = self.schedule
        assert schedule is not None, "configure() first"
        while True:
            with schedule.lock:
                position = schedule.next_for(self.pool_id, self.cursor)
                if position is None:
                    self.exhausted = True
                    return
                self.cursor = position + 1
                self.handed += 1
                batch = self.batches[position]
            yield batch

    def __len__(self) -> int:
        return self.schedule.count_for(self.pool_id) if self.schedule is not None else 0


@dataclass(eq=False)
class Pool:
    """One inner loader and its workers."""

    id: int
    start: int  # the position it was opened at (its workers' seeds derive from it)
    workers: int
    range: BatchRange
    loader: DataLoader
    it: Iterator[Any] | None = None
    starter: threading.Thread | None = None  # starting the pool off the training loop's thread
    start_error: BaseException | None = None
    start_s: float | None = None  # how long starting the pool took
    # A resize's new pool: forked one worker per batch the loop takes, each worker held after its
    # setup until its turn.
    pacer: ForkPacer | None = None
    gate: WorkerGate | None = None
    opens: tuple[int, ...] = ()  # batches the loop has had when each worker's gate opens (absolute)
    zygote: Zygote | None = None  # the zygote that forked its workers, if one did
    extra_forks: int = 0  # forks its start made besides its workers' (the zygote's own, once): in start_s
    numbers: tuple[int, ...] = ()  # its workers' numbers among the loader's (WorkerSetup)

    def advance(self, consumed: int, fork: bool = True) -> None:
        """The loop has had ``consumed`` batches: one more fork (if ``fork``), and open the gates whose turn
        has come.  The loop grants a fork as it takes a batch, so that the fork overlaps its step rather
        than its wait for the next batch."""
        if self.pacer is not None and fork:
            self.pacer.allow_at(consumed)  # pools of one resize share the pacer: one fork per batch in all
        if self.gate is not None:
            for worker, at in enumerate(self.opens):
                if consumed >= at:
                    self.gate.open(worker)

    def open_all(self) -> None:
        """Let every worker start and work (the switch is here, or the pool is being stopped).  Only this
        pool's starts: other pools of the same resize share its pacer and stay paced."""
        # (the serving pool's, at every batch: once its start thread is done, nothing is left to let go)
        if self.pacer is not None and self.starter is not None and self.starter.is_alive():
            self.pacer.release(self.starter)
            if self.zygote is not None:
                self.zygote.wake()  # its thread may wait for another pool's turn to fork the zygote
        if self.gate is not None:
            self.gate.open_all()

    def launch(self, background: bool, spare: Spare | None = None) -> None:
        """Create the inner iterator, which starts the workers; in a named daemon thread if ``background``
        (``spare``'s, already running, if given: starting one costs the caller a wait for a core)."""
        if not background:
            self._start()
            return
        if spare is not None:
            self.starter = spare.thread
            spare.run(self._start)
            return
        starter = threading.Thread(target=self._start, name="adlrec-loader-start", daemon=True)
        try:
            starter.start()
        except RuntimeError as exc:  # "can't start new thread": out of processes, as a fork would be
            self.start_error = OSError(errno.EAGAIN, f"cannot start the pool's starting thread: {exc}")
            return
        self.starter = starter

    def _start(self) -> None:
        t = time.perf_counter()
        try:
            self.it = iter(self.loader)
        except RuntimeError as exc:  # torch's threads (queue feeders, pin memory): out of processes
            self.start_error = OSError(errno.EAGAIN, str(exc)) if "can't start new thread" in str(exc) else exc
        except KeyboardInterrupt:
            # ^C while the loop's own thread starts a pool (an epoch's start: only the main thread gets it):
            # the user's, now.  Kept for the pool's first batch, it came too late: the epoch's other pools,
            # whose batches came first, had lost their workers to the same ^C, and the loop raised "DataLoader
            # worker exited unexpectedly" instead.
            raise
        except BaseException as exc:  # re-raised in the loop's thread by wait_started
            self.start_error = exc
        self.start_s = time.perf_counter() - t - (self.pacer.waited_s if self.pacer is not None else 0.0)

    def wait_started(self) -> None:
        if self.starter is not None:
            self.starter.join()
            self.starter = None
        if self.start_error is not None:
            raise self.start_error


def shutdown(pool: Pool) -> None:
    """Stop ``pool``'s workers now and join them; idempotent.

    Uses torch's ``_shutdown_workers`` (what the iterator's ``__del__`` and exhaustion call) so that
    no pool's life depends on when the garbage collector runs.  Held workers are let go first, or
    torch would wait its 5 s join timeout for each of them.  A pool stopped while its starting thread
    still waits for turns forks no more workers (its next turn raises :class:`StartCancelled`).
    """
    if pool.pacer is not None and pool.starter is not None and pool.starter.is_alive():
        pool.pacer.cancel(pool.starter)  # stopped before it started: fork no more of its workers
    pool.open_all()
    if pool.starter is not None:
        pool.starter.join()
        pool.starter = None
    pool.start_error = None  # its traceback holds torch's half-made iterator, whose workers then stop
    it, pool.it = pool.it, None
    if it is None:  # a pool kept between epochs: its loader holds the iterator
        it = getattr(pool.loader, "_iterator", None)
    stop = getattr(it, "_shutdown_workers", None)
    if stop is not None:
        stop()
    if getattr(pool.loader, "_iterator", None) is it:
        pool.loader._iterator = None  # a persistent loader keeps its iterator: drop it too
    if pool.gate is not None:
        pool.gate.close()
