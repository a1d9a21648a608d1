"""Frozen, typed records passed between adlrec's layers.

Each record converts to and from plain JSON-able dicts (``to_dict`` / ``from_dict``) so that the same
shape is logged to MLflow, exported to ``profiles/`` and (later) served over HTTP.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = [
    "Baseline",
    "DeviceSpec",
    "GpuInfo",
    "Hardware",
    "Profile",
    "ProfilePoint",
]


@dataclass(frozen=True)
class DeviceSpec:
    """Where the training step runs: ``cpu``, ``cuda`` or an emulated accelerator."""

    kind: str  # "cpu" | "cuda" | "emulate"
    step_ms: float | None = None  # only for "emulate": the timed wait that replaces a training step

    @property
    def emulated(self) -> bool:
        return self.kind == "emulate"

    @property
    def label(self) -> str:
        if self.emulated:
            return f"emulate:{self.step_ms:g}"
        return self.kind

    @property
    def title(self) -> str:
        """Human wording, used wherever a curve is shown, so emulation is never mistaken for a GPU."""
        if self.emulated:
            return f"EMULATED accelerator ({self.step_ms:g} ms/step)"
        return self.kind.upper()


@dataclass(frozen=True)
class GpuInfo:
    name: str
    memory_gb: float


@dataclass(frozen=True)
class Hardware:
    """A fingerprint of the machine a profile was measured on."""

    cpu_model: str
    logical_cores: int
    physical_cores: int | None
    memory_gb: float
    gpus: tuple[GpuInfo, ...]
    torch_version: str
    platform: str
    hostname: str
    gpu_note: str = ""  # why no GPU was found (e.g. NVML library not found), empty otherwise

    @property
    def fingerprint(self) -> str:
        """Stable short id of the hardware that shapes a curve (not the hostname or versions)."""
        key = json.dumps([self.cpu_model, self.logical_cores, round(self.memory_gb), [g.name for g in self.gpus]])
        return hashlib.sha256(key.encode()).hexdigest()[:12]

    @property
    def summary(self) -> str:
        gpus = ", ".join(f"{g.name} ({g.memory_gb:.0f} GB)" for g in self.gpus) or "no GPU"
        return f"{self.cpu_model}, {self.logical_cores} logical cores, {self.memory_gb:.0f} GB RAM, {gpus}"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["fingerprint"] = self.fingerprint
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Hardware:
        d = {k: v for k, v in d.items() if k in _field_names(cls)}
        d["gpus"] = tuple(GpuInfo(**g) for g in d.get("gpus", ()))
        return cls(**d)


@dataclass(frozen=True)
class Baseline:
    """Job-level measurements of the differential decomposition (one per profile)."""

    ceiling: float  # samples/s of training steps on one batch already on the device, no loader
    ceiling_rse: float
    prep_rate: float  # samples/s of the loader alone in-process (0 workers) over cached data
    fetch_cold_s: float  # seconds per sample to read its raw bytes with the page cache dropped
    fetch_cached_s: float  # seconds per sample to read the same bytes from the page cache
    fetch_bytes: float  # mean raw bytes per sample
    fetch_method: str  # how "cold" was obtained, e.g. "posix_fadvise(DONTNEED)", or why not measured

    @property
    def fetch_extra_s(self) -> float:
        """Extra seconds per sample that cold storage adds over cached data (never negative)."""
        return max(0.0, self.fetch_cold_s - self.fetch_cached_s)


@dataclass(frozen=True)
class ProfilePoint:
    """Steady-state measurements at one worker count."""

    workers: int
    throughput: float  # samples/s, training with the loader (page cache warm)
    rse: float  # relative standard error of ``throughput``
    batches: int  # batches in the measurement window (warm-up excluded)
    seconds: float  # length of the measurement window
    stable: bool  # rse reached the target before the budget ran out
    wait_fraction: float  # share of the window the training loop spent blocked on the loader
    stall_fraction: float  # 1 - throughput / ceiling, clipped to [0, 1]
    prep_share: float  # share of step time stalled on preprocessing
    fetch_share: float  # share of step time cold fetch would add (estimated, see docs/profiling.md)
    prep_rate: float  # samples/s of the loader alone at this worker count
    cpu_util: float  # CPU seconds of the job's processes / (window x logical cores)
    worker_uss_mb: float  # mean unique memory per worker process (0 with no workers)
    worker_pss_mb: float  # mean proportional memory per worker process
    main_rss_mb: float  # resident memory of the training process


@dataclass(frozen=True)
class Profile:
    """One profiled curve: a workload on a device and hardware, throughput against workers."""

    workload: str
    source_hash: str
    params: dict[str, Any]
    batch_size: int
    device: DeviceSpec
    hardware: Hardware
    baseline: Baseline
    points: tuple[ProfilePoint, ...]
    budget_s: float
    rse_target: float
    command: str
    created_at: str  # ISO 8601, UTC
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def best(self) -> ProfilePoint:
        return max(self.points, key=lambda p: p.throughput)

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "source_hash": self.source_hash,
            "params": dict(self.params),
            "batch_size": self.batch_size,
            "device": asdict(self.device) | {"label": self.device.label, "emulated": self.device.emulated},
            "hardware": self.hardware.to_dict(),
            "baseline": asdict(self.baseline),
            "points": [asdict(p) for p in self.points],
            "budget_s": self.budget_s,
            "rse_target": self.rse_target,
            "command": self.command,
            "created_at": self.created_at,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Profile:
        dev = d["device"]
        return cls(
            workload=d["workload"],
            source_hash=d["source_hash"],
            params=dict(d["params"]),
            batch_size=int(d["batch_size"]),
            device=DeviceSpec(kind=dev["kind"], step_ms=dev.get("step_ms")),
            hardware=Hardware.from_dict(d["hardware"]),
            baseline=Baseline(**{k: v for k, v in d["baseline"].items() if k in _field_names(Baseline)}),
            points=tuple(
                ProfilePoint(**{k: v for k, v in p.items() if k in _field_names(ProfilePoint)}) for p in d["points"]
            ),
            budget_s=float(d["budget_s"]),
            rse_target=float(d["rse_target"]),
            command=d["command"],
            created_at=d["created_at"],
            notes=tuple(d.get("notes", ())),
        )


def _field_names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}
