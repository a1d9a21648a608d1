"""What every worker process does first: one BLAS/OpenMP thread, and optionally the allotted cores.

A loader's parallelism is its worker processes; each one starting as many intra-op threads as the
machine has cores oversubscribes a node shared by several jobs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import torch

__all__ = ["THREAD_ENV_VARS", "WorkerSetup", "can_pin"]

# Read by OpenMP, MKL, OpenBLAS and numexpr when they load: they cover libraries first imported in
# the worker; torch, already loaded when a worker forks, is set with torch.set_num_threads.
THREAD_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def can_pin() -> bool:
    """Whether this platform can pin processes to cores (Linux); elsewhere ``cores`` is a no-op."""
    return hasattr(os, "sched_setaffinity")


class WorkerSetup:
    """A picklable ``worker_init_fn``: limit threads, pin to ``cores`` where possible, then ``user``."""

    def __init__(self, cores: Sequence[int] | None = None, user: Callable[[int], None] | None = None) -> None:
        self.cores = tuple(cores) if cores is not None else None
        self.user = user

    def __call__(self, worker_id: int) -> None:
        for var in THREAD_ENV_VARS:
            os.environ[var] = "1"
        torch.set_num_threads(1)
        if self.cores and can_pin():
            os.sched_setaffinity(0, self.cores)
        if self.user is not None:
            self.user(worker_id)
