"""What both adapters share: building the controller from user-facing arguments."""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from typing import Any

from adlrec.callbacks.controller import Controller, ServiceLike

__all__ = ["batch_samples", "make_controller"]


def make_controller(
    *,
    url: str | None,
    node: str | None,
    token: str | None,
    client: ServiceLike | None,
    interval_s: float,
    probe: dict[str, Any] | None,
    curve: Sequence[float] | None,
    registration: dict[str, Any],
) -> Controller:
    if (probe is None) == (curve is None):
        raise ValueError(
            "give exactly one of probe= (the features `adlrec predict model.py --json` prints under 'probe') "
            "or curve= (samples/s at 0, 1, 2, ... workers)"
        )
    if not interval_s > 0:
        raise ValueError(f"interval_s must be > 0, got {interval_s!r}")
    if client is None:
        from adlrec.client import ServiceClient

        url = url or os.environ.get("ADLREC_SERVICE_URL", "http://127.0.0.1:8470")
        client = ServiceClient(url, token=token or os.environ.get("ADLREC_SERVICE_TOKEN"))
    fields = dict(registration)
    fields["probe" if probe is not None else "curve"] = dict(probe) if probe is not None else list(curve)
    return Controller(client, node or socket.gethostname(), interval_s=interval_s, registration=fields)


def batch_samples(batch: Any) -> int:
    """Samples in a batch: the length of its first tensor (or of the batch itself)."""
    first = batch
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    if isinstance(first, dict) and first:
        first = next(iter(first.values()))
    shape = getattr(first, "shape", None)
    if shape:
        return int(shape[0])
    try:
        return len(batch)
    except TypeError:
        return 1
