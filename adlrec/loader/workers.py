"""What every worker process does first: one BLAS/OpenMP thread, and optionally the allotted cores.

A loader's parallelism is its worker processes; each one starting as many intra-op threads as the
machine has cores oversubscribes a node shared by several jobs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
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
    state is and keeps the overlap short.  One ``multiprocessing`` event per worker: picklable for
    spawn and forkserver, and opening a gate costs the loop one semaphore release.
    """

    POLL_S = 0.5  # how often a held worker checks that its parent is still alive

    def __init__(self, workers: int, context: BaseContext) -> None:
        self.events = [context.Event() for _ in range(workers)]
        self.opened = [False] * workers  # in the parent: which gates it has opened

    def open(self, worker_id: int) -> None:
        if not self.opened[worker_id]:
            self.opened[worker_id] = True
            self.events[worker_id].set()

    def open_all(self) -> None:
        for i in range(len(self.events)):
            self.open(i)

    def wait(self, worker_id: int) -> None:
        """In the worker: return once the gate is open, or once the parent has died (torch's watchdog then ends us)."""
        parent = os.getppid()
        while not self.events[worker_id].wait(self.POLL_S):
            if os.getppid() != parent:
                return


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

    def __call__(self, worker_id: int) -> None:
        for var in THREAD_ENV_VARS:
            os.environ[var] = "1"
        torch.set_num_threads(1)
        if self.cores and can_pin():
            os.sched_setaffinity(0, self.cores)
        if self.user is not None:
            self.user(worker_id)
        if self.gate is not None:
            self.gate.wait(worker_id)
