"""Apply the service's worker plans to running training jobs.

``ADLLoop`` serves a plain PyTorch loop; ``ADLCallback`` a Lightning ``Trainer`` (lightning is
imported only when ``ADLCallback`` is first used).  Both are thin adapters over :class:`Controller`.
"""

from __future__ import annotations

from typing import Any

from adlrec.callbacks._build import batch_samples, check_arguments
from adlrec.callbacks.controller import Controller
from adlrec.callbacks.loop import ADLLoop

__all__ = ["ADLCallback", "ADLLoop", "Controller", "batch_samples", "check_arguments"]


def __getattr__(name: str) -> Any:
    if name == "ADLCallback":
        from adlrec.callbacks.lightning import ADLCallback

        return ADLCallback
    raise AttributeError(f"module 'adlrec.callbacks' has no attribute {name!r}")
