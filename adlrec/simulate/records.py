"""The simulator's frozen records: the node, a trace job, the settings, and what a replay gives."""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["JobResult", "Node", "SimConfig", "SimResult", "TraceJob"]

CONTENTION_MODELS = ("all", "busy")


@dataclass(frozen=True)
class Node:
    """One shared machine."""

    cores: int = 32  # logical cores, shared by every job's main processes and loader workers
    gpus: int = 8  # accelerators; a job waits (FIFO) until it can hold all the GPUs it asks for
    memory_mb: int = 256 * 1024  # memory available to loader workers

    def __post_init__(self) -> None:
        if self.cores < 1 or self.gpus < 1 or self.memory_mb < 0:
            raise ValueError("a node needs cores >= 1, gpus >= 1 and memory_mb >= 0")


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace, with the curve it has on this node."""

    job_id: str
    arrival_s: float  # when it is submitted
    work_samples: float  # samples it must train on before it completes
    curve: tuple[float, ...]  # job samples/s against its total loader workers (all ranks), w = 0..len-1
    gpus: int = 1  # GPUs it holds while running; one training process (rank) per GPU
    requested_workers: int = 8  # the num_workers its script sets, per rank (what `fixed` gives it)
    mem_per_worker_mb: int = 0  # whole MB per loader worker
    weight: float = 1.0  # priority under the "weighted" objective
    profile: str = ""  # the measured profile its curve was derived from, for reports
    # ranks that step together (``--ranks lockstep``: one per GPU), as the service tells the allocator of a job of
    # several: every policy then gives it a multiple of them; 1: its ranks load and step independently
    ranks: int = 1

    def __post_init__(self) -> None:
        if not self.arrival_s >= 0 or not self.work_samples > 0:
            raise ValueError(f"job {self.job_id!r}: need arrival_s >= 0 and work_samples > 0")
        if self.gpus < 1 or self.requested_workers < 0 or len(self.curve) < 2:
            raise ValueError(f"job {self.job_id!r}: need gpus >= 1, requested_workers >= 0, a curve past w=0")
        if max(self.curve) <= 0:
            raise ValueError(f"job {self.job_id!r}: its curve is zero everywhere")

    @property
    def main_cores(self) -> int:
        """One main (training) process per rank, each needing a core."""
        return self.gpus

    @property
    def peak(self) -> float:
        return max(self.curve)


@dataclass(frozen=True)
class SimConfig:
    """How decisions are made and what they cost."""

    interval_s: float = 60.0  # re-decide at least this often (and at every arrival and completion)
    resize_s: float = 0.5  # seconds of progress a job loses each time its worker count changes
    threshold: float = 0.05  # hysteresis passed to the policy (fraction of a job's full-speed value)
    objective: str = "busy_gpus"  # the policy's objective
    contention: str = "all"  # "all": every worker competes for CPU; "busy": workers a job cannot use sleep
    main_cpu: float = 1.0  # share of a core a main process needs to run its step at full speed (0: never slows)

    def __post_init__(self) -> None:
        finite = all(math.isfinite(x) for x in (self.interval_s, self.resize_s, self.threshold))
        if not (finite and self.interval_s > 0 and self.resize_s >= 0 and self.threshold >= 0):
            raise ValueError("need finite numbers: interval_s > 0, resize_s >= 0 and threshold >= 0")
        if self.contention not in CONTENTION_MODELS:
            raise ValueError(f"contention must be one of {', '.join(CONTENTION_MODELS)}")
        if not 0 <= self.main_cpu <= 1:
            raise ValueError("main_cpu must be within [0, 1]")


@dataclass(frozen=True)
class JobResult:
    """What happened to one job."""

    job_id: str
    arrival_s: float
    start_s: float  # when it got its GPUs
    finish_s: float
    resizes: int  # worker-count changes after its start (each cost resize_s)
    gpus: int
    mean_workers: float  # time-weighted loader workers while running

    @property
    def jct_s(self) -> float:
        """Job completion time: submission to completion, queueing included."""
        return self.finish_s - self.arrival_s


@dataclass(frozen=True)
class SimResult:
    """One policy's replay of one trace."""

    policy: str
    jobs: tuple[JobResult, ...]  # in trace order
    makespan_s: float  # first arrival to last completion
    active_s: float  # time during which the node held at least one job
    busy_gpu_fraction: float  # busy GPU-time (integral of sum_j g_j T_j/T_j(max)) / (node GPUs x makespan)
    aggregate_throughput: float  # busy GPU-time / GPU-time held by jobs: normalised samples/s per held GPU
    samples_per_s: float  # raw samples/s summed over jobs, per active second
    decisions: int  # policy calls
    resizes: int  # worker-count changes, all jobs
    mean_cpu_share: float  # time-weighted share of a core each process got while jobs ran (1: no contention)

    @property
    def mean_jct_s(self) -> float:
        return sum(j.jct_s for j in self.jobs) / len(self.jobs) if self.jobs else 0.0
