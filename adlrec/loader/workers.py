"""What every worker process does first: one BLAS/OpenMP thread, and optionally the allotted cores.

A loader's parallelism is its worker processes; each one starting as many intra-op threads as the
machine has cores oversubscribes a node shared by several jobs.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.context import BaseContext

import torch

__all__ = ["THREAD_ENV_VARS", "WorkerGate", "WorkerSetup", "can_pin"]

# Read by OpenMP, MKL, OpenBLAS and numexpr when they load: they cover libraries first imported in
# the worker; torch, already loaded when a worker forks, is set with torch.set_num_threads.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


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

    POLL_S = 0.5  # how often a held worker checks that its parent is still alive

    def __init__(self, workers: int, context: BaseContext) -> None:
        pipes = [context.Pipe(duplex=False) for _ in range(workers)]
        self.readers = [r for r, _ in pipes]
        self._writers: list[Connection] | None = [w for _, w in pipes]  # the parent's ends; not sent to workers
        self.opened = [False] * workers  # in the parent: which gates it has opened
        self.owner = os.getpid()  # the training process

    def __getstate__(self) -> dict[str, object]:
        return {"readers": self.readers, "_writers": None, "opened": self.opened, "owner": self.owner}

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
        """In the worker: return once the gate is open; exit at once if the training process has died.

        Exiting here matters: torch's watchdog is created after ``worker_init_fn`` returns, taking the
        parent pid it sees then, so a worker released after its parent's death would never notice it.
        Two checks, since the parent may have died before this worker got here (its parent pid is then
        already the reaper's): the parent pid changing while it waits, and the training process that
        made the gate (the worker's parent, or a zygote's or forkserver's) no longer running."""
        parent = os.getppid()
        reader = self.readers[worker_id]
        while True:
            if os.getppid() != parent or not _running(self.owner):
                os._exit(0)
            if reader.poll(self.POLL_S):
                break
        try:
            reader.recv_bytes()
        except EOFError:  # every writer closed without opening the gate: the parent is gone
            os._exit(0)
        if os.getppid() != parent:  # it died just after opening the gate
            os._exit(0)


def _watch_owner(owner: int) -> None:
    """In a worker whose parent is not the training process: exit once that process has gone.

    torch's watchdog ends a worker whose *parent* has gone.  A worker started by ``forkserver`` has
    the fork server as its parent, and holds the server's alive pipe open itself (the standard
    library passes it to every child), so the server outlives a killed training process and neither
    ever ends; a zygote's worker is covered by its zygote's exit, but this costs one idle thread.
    """

    def watch() -> None:
        while _running(owner):
            time.sleep(WorkerGate.POLL_S)
        os._exit(0)

    threading.Thread(target=watch, name="adlrec-owner-watch", daemon=True).start()


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (where ``/proc`` says; elsewhere, exists)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class WorkerSetup:
    """A picklable ``worker_init_fn``: limit threads, pin to ``cores`` where possible, run ``user``, then
    wait at ``gate`` (so all of a worker's own start-up is done before the loop lets it work)."""

    def __init__(
        self,
        cores: Sequence[int] | None = None,
        user: Callable[[int], None] | None = None,
        gate: WorkerGate | None = None,
    ) -> None:
        self.cores = tuple(cores) if cores is not None else None
        self.user = user
        self.gate = gate
        self.owner = os.getpid()  # the training process

    def __call__(self, worker_id: int) -> None:
        if os.getppid() != self.owner:
            _watch_owner(self.owner)
        for var in THREAD_ENV_VARS:
            os.environ[var] = "1"
        torch.set_num_threads(1)
        if self.cores and can_pin():
            os.sched_setaffinity(0, self.cores)
        if self.user is not None:
            self.user(worker_id)
        if self.gate is not None:
            self.gate.wait(worker_id)
