"""What a job reveals in a short probe, and the same features read off a full profile.

The probe measures the compute ceiling, the loader alone in-process and with one and two workers,
and the fetch cost; it never trains with workers.  A full profile contains every one of those
measurements too (its baseline and the loader-alone rate at each worker count), so the throughput
model trains on profiles and predicts from probes with one feature definition.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from adlrec.errors import AdlrecError
from adlrec.schemas import Profile

__all__ = ["FEATURE_COLUMNS", "ProbeError", "ProbeFeatures", "features_from_profile"]


class ProbeError(AdlrecError):
    """Probe measurements that a throughput model cannot use."""


@dataclass(frozen=True)
class ProbeFeatures:
    ceiling: float  # samples/s of training on one batch already on the device, no loader
    prep_rate_0: float  # samples/s of the loader alone, in-process (0 workers)
    prep_rate_1: float  # samples/s of the loader alone with 1 worker
    prep_rate_2: float  # samples/s of the loader alone with 2 workers
    fetch_extra_s: float  # extra seconds per sample that cold storage adds over cached reads
    batch_size: int
    cores: int  # logical cores of the node
    device_kind: str  # "cpu" (training competes with workers for cores), "cuda" or "emulate"

    def __post_init__(self) -> None:
        for name in ("ceiling", "prep_rate_0", "prep_rate_1", "prep_rate_2"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
                raise ProbeError(f"probe input {name}={v!r}: expected a finite rate in samples/s > 0")
        if not isinstance(self.fetch_extra_s, (int, float)) or not (0 <= self.fetch_extra_s < 60):
            raise ProbeError(
                f"probe input fetch_extra_s={self.fetch_extra_s!r}: expected seconds per sample, 0 <= s < 60"
            )
        for name in ("batch_size", "cores"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ProbeError(f"probe input {name}={v!r}: expected a whole number >= 1")
        if self.device_kind not in ("cpu", "cuda", "emulate"):
            raise ProbeError(f"probe input device_kind={self.device_kind!r}: expected cpu, cuda or emulate")

    @property
    def compute_on_cpu(self) -> bool:
        return self.device_kind == "cpu"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProbeFeatures:
        missing = [f.name for f in fields(cls) if f.name not in d]
        if missing:
            raise ProbeError(f"probe input is missing {', '.join(missing)}")
        values = {}
        for f in fields(cls):
            v = d[f.name]
            try:
                values[f.name] = _whole(v) if f.type == "int" else str(v) if f.type == "str" else float(v)
            except (TypeError, ValueError):
                values[f.name] = v  # not a number (None, "fast", a batch of 32.5): __post_init__ names it
        return cls(**values)


FEATURE_COLUMNS = tuple(f.name for f in fields(ProbeFeatures))


def _whole(v: Any) -> int:
    f = float(v)
    if not f.is_integer():
        raise ValueError(f"{v!r} is not a whole number")
    return int(f)


def features_from_profile(profile: Profile) -> ProbeFeatures:
    """The probe's features as measured inside a full profile (needs worker counts 0, 1 and 2)."""
    by_w = {p.workers: p for p in profile.points}
    missing = [w for w in (0, 1, 2) if w not in by_w]
    if missing:
        raise ProbeError(f"profile of {profile.workload} has no points at workers={missing}; sweep to at least 2")
    return ProbeFeatures(
        ceiling=profile.baseline.ceiling,
        prep_rate_0=by_w[0].prep_rate,
        prep_rate_1=by_w[1].prep_rate,
        prep_rate_2=by_w[2].prep_rate,
        fetch_extra_s=profile.baseline.fetch_extra_s,
        batch_size=profile.batch_size,
        cores=profile.hardware.logical_cores,
        device_kind=profile.device.kind,
    )
