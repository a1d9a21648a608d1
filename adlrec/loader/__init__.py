"""A resizable, resumable loader: change a running epoch's DataLoader workers without losing a sample.

See docs/loader.md for the design and its guarantees.
"""

from __future__ import annotations

from adlrec.loader.order import EpochSampler, batches_of
from adlrec.loader.resizable import EpochIterator, ResizableLoader, handover_batches, warmup_leads
from adlrec.loader.workers import THREAD_ENV_VARS, WorkerGate, WorkerSetup, can_pin

__all__ = [
    "THREAD_ENV_VARS",
    "EpochIterator",
    "EpochSampler",
    "ResizableLoader",
    "WorkerGate",
    "WorkerSetup",
    "batches_of",
    "can_pin",
    "handover_batches",
    "warmup_leads",
]
