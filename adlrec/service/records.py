"""Frozen records passed between the service's store, its recompute and its routes.

The routes turn them into pydantic models at the HTTP boundary; the recompute reads a
:class:`Snapshot` and returns :class:`NodeOutcome` values; the store writes and reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from adlrec.schemas import AllocationPlan, AllocationRequest

__all__ = [
    "ACTIVE",
    "EXPIRED",
    "FINISHED",
    "Assignment",
    "JobRecord",
    "JobSpec",
    "MeasuredPoint",
    "NodeInfo",
    "NodeOutcome",
    "PlanRecord",
    "Snapshot",
]

ACTIVE, FINISHED, EXPIRED = "active", "finished", "expired"


@dataclass(frozen=True)
class NodeInfo:
    """A node of the cluster: the budgets its jobs' loader workers share."""

    name: str
    cores: int  # logical cores
    memory_mb: int  # memory available to loader workers


@dataclass(frozen=True)
class JobSpec:
    """What a job registers: where it runs, its bounds, and its predicted curve."""

    job_id: str
    node: str
    curve: tuple[float, ...]  # predicted samples/s for w = 0..len(curve)-1 (explicit, or from the model)
    curve_source: str  # "explicit", "analytic", "adlrec-throughput v<N>", or "analytic (... failed on this probe: E)"
    features: dict[str, Any] | None = None  # the probe features it was predicted from (None: explicit)
    gpus: int = 1
    weight: float = 1.0
    min_workers: int = 0
    max_workers: int | None = None  # None: the curve's last index
    requested_workers: int = 8
    mem_per_worker_mb: int = 0
    main_cores: int = 1
    # ranks on this node that step together (DDP), each with its own loader: the curve, the bounds, the
    # heartbeats and the assignment are then one rank's, the plan counts the job's total workers
    ranks: int = 1


@dataclass(frozen=True)
class JobRecord:
    """A job as the store keeps it: its spec, its state and what it last reported."""

    spec: JobSpec
    status: str  # ACTIVE | FINISHED | EXPIRED
    registered_at: float  # seconds since the epoch, from the service's clock
    last_seen: float  # last register or heartbeat
    finished_at: float | None = None
    reported_workers: int | None = None  # workers it said it runs with in its last heartbeat
    reported_throughput: float | None = None  # samples/s in its last heartbeat
    data_wait: float | None = None  # share of its step time spent waiting for data, last heartbeat

    @property
    def job_id(self) -> str:
        return self.spec.job_id


@dataclass(frozen=True)
class MeasuredPoint:
    """Throughput a job measured at one worker count (a running mean over its heartbeats)."""

    workers: int
    throughput: float
    samples: int  # heartbeats averaged into it
    data_wait: float | None  # running mean of the data-wait share over the beats that reported one


@dataclass(frozen=True)
class PlanRecord:
    """A stored plan: one node's allocation, with a monotonically increasing id."""

    plan_id: int
    node: str
    created_at: float
    plan: AllocationPlan
    request: AllocationRequest


@dataclass(frozen=True)
class Assignment:
    """What a job should run with now: its worker count and the plan that decided it (None: no plan yet)."""

    job_id: str
    workers: int
    plan_id: int | None
    status: str


@dataclass(frozen=True)
class Snapshot:
    """Everything the recompute needs, read in one transaction."""

    nodes: dict[str, NodeInfo]
    jobs: tuple[JobRecord, ...]  # active jobs, in registration order
    points: dict[str, dict[int, float]] = field(default_factory=dict)  # measured throughput per job and workers
    latest: dict[str, PlanRecord] = field(default_factory=dict)  # the current plan per node


@dataclass(frozen=True)
class NodeOutcome:
    """The recompute's answer for one node: a new plan to store, or why not; and why no plan fits, if none does."""

    node: str
    request: AllocationRequest | None
    plan: AllocationPlan | None  # None: the node's jobs could not be made a request
    changed: bool  # the plan's worker counts differ from the node's current plan (store it)
    # why no plan fits (the minimum workers do not: ``plan`` is then every job at its minimum), or why the node's
    # jobs could not be made a request
    error: str = ""
