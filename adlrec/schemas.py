"""Frozen, typed records passed between adlrec's layers.

Each record converts to and from plain JSON-able dicts (``to_dict`` / ``from_dict``) so that the same
shape is logged to MLflow, exported to ``profiles/`` and (later) served over HTTP.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from dataclasses import asdict, dataclass, field, fields
from typing import Any

__all__ = [
    "AllocationPlan",
    "AllocationRequest",
    "Baseline",
    "DeviceSpec",
    "ENOUGH_SHARE",
    "GpuInfo",
    "Hardware",
    "JobDemand",
    "MAX_WORKERS",
    "OBJECTIVES",
    "Profile",
    "ProfilePoint",
    "json_text",
]


# What share of a curve's best throughput counts as reaching it (Profile.enough): one minus the
# relative error each point is measured to by default (Settings.rse_target), so the points within it
# of the best cannot be told apart from it.
ENOUGH_SHARE = 0.95

# the most DataLoader workers the service plans for one loader (one rank's): its API's bound
MAX_WORKERS = 256


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
    # the ceiling measured again after the last point: a machine whose speed changed during the sweep
    # shows here (None in profiles from before this check)
    ceiling_end: float | None = None
    ceiling_end_rse: float | None = None

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

    def enough(self, share: float = ENOUGH_SHARE) -> ProfilePoint:
        """The fewest workers that reach ``share`` of the best throughput.

        On a plateau the best point is often a few percent of noise above its neighbours (an H200's
        curves in profiles/ peak at 14 workers where 2 reach 99.7% of it): this is the count worth
        giving a job, the best is only where the noise happened to land.
        """
        target = share * self.best.throughput
        return min((p for p in self.points if p.throughput >= target), key=lambda p: p.workers)

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
        """The profile ``to_dict`` (or its JSON) describes.  Values are taken as they are, not converted, so
        that a checker (``adlrec.profile.check``) sees a wrongly typed field; an error that JSON holds as null
        (:func:`json_text`) reads back as ``inf``, not estimated."""
        dev = d["device"]
        baseline = {k: v for k, v in d["baseline"].items() if k in _field_names(Baseline)}
        if "ceiling_rse" in baseline and baseline["ceiling_rse"] is None:
            baseline["ceiling_rse"] = math.inf
        if baseline.get("ceiling_end") is not None and baseline.get("ceiling_end_rse", 0) is None:
            baseline["ceiling_end_rse"] = math.inf
        return cls(
            workload=d["workload"],
            source_hash=d["source_hash"],
            params=dict(d["params"]),
            batch_size=d["batch_size"],
            device=DeviceSpec(kind=dev["kind"], step_ms=dev.get("step_ms")),
            hardware=Hardware.from_dict(d["hardware"]),
            baseline=Baseline(**baseline),
            points=tuple(
                ProfilePoint(
                    **{k: v for k, v in p.items() if k in _field_names(ProfilePoint)}
                    | ({"rse": math.inf} if "rse" in p and p["rse"] is None else {})
                )
                for p in d["points"]
            ),
            budget_s=d["budget_s"],
            rse_target=d["rse_target"],
            command=d["command"],
            created_at=d["created_at"],
            notes=tuple(d.get("notes", ())),
        )


def _field_names(cls: type) -> set[str]:
    return {f.name for f in fields(cls)}


def json_text(doc: Any, indent: int | None = 2) -> str:
    """``doc`` as strict JSON: a non-finite number (an error not estimated, ``inf``) becomes null, since
    ``Infinity`` and ``NaN`` are not JSON and other readers refuse them."""

    def finite(v: Any) -> Any:
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, dict):
            return {k: finite(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [finite(x) for x in v]
        return v

    return json.dumps(finite(doc), indent=indent, allow_nan=False)


# -- allocation: what the allocator is asked and what it answers ------------------------------
OBJECTIVES = ("busy_gpus", "throughput", "weighted")


def _whole_numbers(record: Any, what: str, *fields: str) -> None:
    """Raise ``ValueError`` naming the first of ``fields`` that is neither None nor a whole number (an int,
    not a bool; ``8.0`` is refused too, since a plan is in whole workers, cores and MB)."""
    for name in fields:
        value = getattr(record, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
            raise ValueError(f"{what}: {name} must be a whole number, got {value!r}")


@dataclass(frozen=True)
class JobDemand:
    """One running job as the allocator sees it: its predicted curve, its needs and its bounds."""

    job_id: str
    curve: tuple[float, ...]  # predicted samples/s T(w) with w loader workers, for w = 0..len(curve)-1
    gpus: int = 1  # accelerators the job holds (the busy-GPUs objective weighs its throughput by this)
    weight: float = 1.0  # priority under the "weighted" objective
    min_workers: int = 0  # fewest loader workers the job may get
    max_workers: int | None = None  # most loader workers; None: the curve's last index
    mem_per_worker_mb: int = 0  # whole MB of memory each loader worker holds (copy-on-read pages included)
    current_workers: int | None = None  # workers it runs with now; None: a new job (no switching cost)
    requested_workers: int = 8  # what its script asked for (num_workers x ranks); used by the `fixed` policy
    main_cores: int = 1  # cores its main (training) processes need: one per rank, not available to workers
    # processes that step together, each with its own loader (a DDP job's ranks on this node): its curve is
    # over their total workers, and every policy gives it a multiple of this (each rank the same count)
    ranks: int = 1

    def __post_init__(self) -> None:
        _whole_numbers(
            self,
            f"job {self.job_id!r}",
            "gpus",
            "min_workers",
            "max_workers",
            "mem_per_worker_mb",
            "current_workers",
            "requested_workers",
            "main_cores",
            "ranks",
        )
        if self.ranks < 1:
            raise ValueError(f"job {self.job_id!r}: ranks must be >= 1, got {self.ranks}")
        for name in ("min_workers", "requested_workers"):  # totals over the ranks, each rank the same count
            if getattr(self, name) % self.ranks:
                raise ValueError(
                    f"job {self.job_id!r}: {name} ({getattr(self, name)}) must be a multiple of ranks "
                    f"({self.ranks}): it counts the workers of all its ranks, each rank the same"
                )
        if not self.curve:
            raise ValueError(f"job {self.job_id!r}: curve must have at least the w=0 point")
        if any(not (t >= 0 and t < float("inf")) for t in self.curve):
            raise ValueError(f"job {self.job_id!r}: curve values must be finite and >= 0")
        for name in ("gpus", "mem_per_worker_mb", "main_cores", "requested_workers"):
            if getattr(self, name) < 0:
                raise ValueError(f"job {self.job_id!r}: {name} must be >= 0, got {getattr(self, name)}")
        if not (self.weight >= 0 and math.isfinite(self.weight)):  # NaN passed a `< 0` check into every objective
            raise ValueError(f"job {self.job_id!r}: weight must be a finite number >= 0, got {self.weight}")
        if not 0 <= self.min_workers <= self.hi <= len(self.curve) - 1:
            raise ValueError(
                f"job {self.job_id!r}: need 0 <= min_workers ({self.min_workers}) <= max_workers ({self.hi}) "
                f"<= len(curve) - 1 ({len(self.curve) - 1})"
            )
        if self.current_workers is not None and self.current_workers < 0:
            raise ValueError(f"job {self.job_id!r}: current_workers must be >= 0, got {self.current_workers}")

    @property
    def hi(self) -> int:
        """The effective upper bound on workers."""
        return len(self.curve) - 1 if self.max_workers is None else self.max_workers

    @property
    def peak(self) -> float:
        """T(max): the highest predicted throughput at any worker count."""
        return max(self.curve)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"curve": list(self.curve)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> JobDemand:
        d = {k: v for k, v in d.items() if k in _field_names(cls)}
        return cls(**(d | {"curve": tuple(float(t) for t in d["curve"])}))


@dataclass(frozen=True)
class AllocationRequest:
    """A snapshot of one node for the allocator: its budgets, its jobs, and what to optimise."""

    cores: int  # logical cores of the node; every job's main_cores come off this before workers
    memory_mb: int  # whole MB of memory available to loader workers (main processes already excluded)
    jobs: tuple[JobDemand, ...]  # the jobs running on the node, in a stable order (ties go to earlier jobs)
    objective: str = "busy_gpus"  # one of OBJECTIVES: busy_gpus | throughput | weighted
    threshold: float = 0.0  # hysteresis: a change must gain this fraction of the job's full-speed value

    def __post_init__(self) -> None:
        _whole_numbers(self, "request", "cores", "memory_mb")
        for name in ("cores", "memory_mb"):
            if getattr(self, name) < 0:
                raise ValueError(f"request: {name} must be >= 0, got {getattr(self, name)}")
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")
        if not (self.threshold >= 0 and math.isfinite(self.threshold)):
            raise ValueError(
                f"threshold must be a finite number >= 0 (a fraction of a job's full-speed value), got {self.threshold}"
            )
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ValueError("job ids must be unique")

    @property
    def worker_cores(self) -> int:
        """The core budget for loader workers: node cores minus every job's main processes."""
        return self.cores - sum(j.main_cores for j in self.jobs)

    def to_dict(self) -> dict[str, Any]:
        return {
            "cores": self.cores,
            "memory_mb": self.memory_mb,
            "jobs": [j.to_dict() for j in self.jobs],
            "objective": self.objective,
            "threshold": self.threshold,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AllocationRequest:
        return cls(  # cores and memory as stored: the record refuses a fraction rather than truncate it
            cores=d["cores"],
            memory_mb=d["memory_mb"],
            jobs=tuple(JobDemand.from_dict(j) for j in d["jobs"]),
            objective=d.get("objective", "busy_gpus"),
            threshold=float(d.get("threshold", 0.0)),
        )


@dataclass(frozen=True)
class AllocationPlan:
    """The allocator's answer: workers per job (keyed by job id, in the request's order) and why."""

    policy: str  # the policy that made it: fixed | even | greedy | optimal | maxmin
    workers: dict[str, int]  # loader workers per job id
    throughput: dict[str, float]  # predicted samples/s per job id at its workers (no contention)
    objective: float  # the request's objective at this plan (without the hysteresis penalty)
    penalty: float  # hysteresis cost paid: threshold x full-speed value, summed over jobs that change
    cores_used: int  # workers plus main processes of all jobs; above the node's cores means oversubscribed
    memory_used_mb: int  # memory of all workers
    reasons: dict[str, str]  # one short human sentence per job id

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AllocationPlan:
        d = {k: v for k, v in d.items() if k in _field_names(cls)}
        return cls(
            policy=d["policy"],
            workers={k: int(v) for k, v in d["workers"].items()},
            throughput={k: float(v) for k, v in d["throughput"].items()},
            objective=float(d["objective"]),
            penalty=float(d["penalty"]),
            cores_used=int(d["cores_used"]),
            memory_used_mb=int(d["memory_used_mb"]),
            reasons=dict(d["reasons"]),
        )
