"""What every worker process does first: one BLAS/OpenMP thread, optionally the allotted cores, and a
watch on the training process (the worker ends when it does).

A loader's parallelism is its worker processes; each one starting as many intra-op threads as the
machine has cores oversubscribes a node shared by several jobs.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext

import numpy.random  # noqa: F401  (imported for the workers; see below)
import psutil
import torch

__all__ = ["OWNER_POLL_S", "THREAD_ENV_VARS", "WorkerGate", "WorkerSetup", "can_pin", "watch_owner"]

OWNER_POLL_S = 0.5  # how often a worker checks that its training process still runs

# Read by OpenMP, MKL, OpenBLAS and numexpr when they load: they cover libraries first imported in
# the worker; torch, already loaded when a worker forks, is set with torch.set_num_threads.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")

# numpy.random is imported above for the forked workers: torch's worker loop seeds numpy's global RNG
# in every worker, and numpy 2 imports numpy.random lazily, so in a training process that never used
# it each worker imported it itself, about two thirds of its start-up CPU (bench/worker_start.py).  At
# a resize that CPU comes from the cores the running pool's batches need.  Forked workers (and the
# zygote's) inherit the module instead.


def can_pin() -> bool:
    """Whether this platform can pin processes to cores (Linux); elsewhere ``cores`` is a no-op."""
    return hasattr(os, "sched_setaffinity")


class WorkerGate:
    """Holds each worker of a new pool, set up and idle, until the loop opens its gate.

    A pool torch starts gets ``prefetch_factor`` batches per worker at once and all its workers start
    on them together.  While an old pool still serves the loop, that work takes the cores from the
    old pool's batches, which the loop needs first.  Opening the gates one worker at a time, a few
    batches before the loop needs each one's first batch, staggers the new workers as a pool in steady
    state is and keeps the overlap short.

    One one-way pipe per worker (``context.Pipe``: inherited by fork, passed to spawn and forkserver
    children as they start): the gate is open once its pipe holds a byte.  A pipe costs the loop's
    thread tens of microseconds to make, where a ``multiprocessing`` event (two semaphores and a lock)
    cost it 1-5 ms at every resize, and opening a gate is one ``write``.
    """

    def __init__(self, workers: int, context: BaseContext) -> None:
        pipes = [context.Pipe(duplex=False) for _ in range(workers)]
        self.readers = [r for r, _ in pipes]
        self._writers: list[Connection] | None = [w for _, w in pipes]  # the parent's ends; not sent to workers
        self.opened = [False] * workers  # in the parent: which gates it has opened

    def __getstate__(self) -> dict[str, object]:
        return {"readers": self.readers, "_writers": None, "opened": self.opened}

    def open(self, worker_id: int) -> None:
        if not self.opened[worker_id]:
            self.opened[worker_id] = True
            if self._writers is not None:
                self._writers[worker_id].send_bytes(b"1")

    def open_all(self) -> None:
        for i in range(len(self.readers)):
            self.open(i)

    def close(self) -> None:
        """In the parent, once the pool's workers are stopped: release the pipes (idempotent)."""
        for conn in [*self.readers, *(self._writers or ())]:
            conn.close()
        self._writers = None

    def wait(self, worker_id: int) -> None:
        """In the worker: return once the gate is open.  (Should the training process die meanwhile, the
        worker's :func:`watch_owner` thread ends it.)"""
        try:
            self.readers[worker_id].recv_bytes()
        except EOFError:  # every writer closed without opening it: the parent is gone
            os._exit(0)


def watch_owner(owner: int) -> None:
    """In a worker: a daemon thread that ends this process once process ``owner`` (the training process)
    has gone.

    torch's watchdog is not enough.  It watches the worker's *parent*, and only from when
    ``worker_init_fn`` has returned, taking the parent pid it sees then: a worker held at a
    :class:`WorkerGate` (or in a long ``worker_init_fn``) when the training process dies would never
    notice.  And under ``forkserver`` the parent is the fork server, which every worker keeps alive by
    holding its alive pipe (the standard library passes it to each child), so after a killed training
    process neither would ever end.  One idle thread, polling every :data:`OWNER_POLL_S`.
    """

    def watch() -> None:
        while _running(owner):
            time.sleep(OWNER_POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="adlrec-owner-watch", daemon=True).start()


def renumber(worker_id: int, num_workers: int | None) -> int:
    """In a worker: make ``get_worker_info()`` say ``worker_id`` of ``num_workers`` (``None``: unchanged).

    torch's ``WorkerInfo`` is frozen (a frozen dataclass in recent torch, in older ones a class that
    refuses ``setattr`` once built), so the module's ``_worker_info`` is replaced with a copy.
    """
    from torch.utils.data._utils import worker as torch_worker

    info = torch_worker._worker_info
    if info is None:
        return worker_id
    changes = {"id": worker_id, "num_workers": info.num_workers if num_workers is None else num_workers}
    if dataclasses.is_dataclass(info):
        torch_worker._worker_info = dataclasses.replace(info, **changes)
    else:  # older torch
        keys = info._WorkerInfo__keys  # the fields it was built with
        torch_worker._worker_info = type(info)(**{k: getattr(info, k) for k in keys} | changes)
    return worker_id


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a zombie has ended; only its parent's wait is due)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


class WorkerSetup:
    """A picklable ``worker_init_fn``: watch the training process (:func:`watch_owner`), limit threads, pin
    to ``cores`` where possible, number the worker among the loader's, run ``user``, then wait at
    ``gate`` (so all of a worker's own start-up is done before the loop lets it work).

    A loader's workers may be several woven pools, each an inner ``DataLoader`` numbering its own
    workers from 0.  Worker ``i`` of a pool is numbered ``numbers[i]`` of ``num_workers`` (the loader
    gives each pool numbers no other serving worker has): in ``user``'s argument and in
    ``torch.utils.data.get_worker_info()``, as one ``DataLoader`` of ``num_workers`` would number it
    (after a drop, kept workers keep the numbers they started with; docs/loader.md, Not supported).
    """

    def __init__(
        self,
        cores: Sequence[int] | None = None,
        user: Callable[[int], None] | None = None,
        gate: WorkerGate | None = None,
        numbers: Sequence[int] | None = None,
        num_workers: int | None = None,
    ) -> None:
        self.cores = tuple(cores) if cores is not None else None
        self.user = user
        self.gate = gate
        self.numbers = tuple(numbers) if numbers is not None else None
        self.num_workers = num_workers
        self.owner = os.getpid()  # the training process

    def __call__(self, worker_id: int) -> None:
        watch_owner(self.owner)
        for var in THREAD_ENV_VARS:
            os.environ[var] = "1"
        torch.set_num_threads(1)
        if self.cores and can_pin():
            os.sched_setaffinity(0, self.cores)
        numbered = worker_id  # the pool's own number, which its gate knows the worker by
        if self.numbers is not None or self.num_workers is not None:
            numbered = renumber(worker_id if self.numbers is None else self.numbers[worker_id], self.num_workers)
        if self.user is not None:
            self.user(numbered)
        if self.gate is not None:
            self.gate.wait(worker_id)
