"""The HTTP boundary: pydantic models for every request and response, with bounded fields.

Routes validate with these, convert to the frozen records of :mod:`adlrec.service.records`, and
answer with these; nothing else in the service sees pydantic.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from adlrec.schemas import MAX_WORKERS
from adlrec.service.recompute import effective_curve
from adlrec.service.records import Assignment, JobRecord, MeasuredPoint, NodeInfo, PlanRecord
from adlrec.words import count

__all__ = [
    "AssignmentOut",
    "FinishOut",
    "HealthOut",
    "Heartbeat",
    "JobOut",
    "JobRegistration",
    "ModelOut",
    "NodeIn",
    "NodeOut",
    "PlanOut",
    "PlanPage",
    "ProbeIn",
    "RecomputeOut",
]

Name = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$")]
Rate = Annotated[float, Field(ge=0, le=1e9, allow_inf_nan=False)]
PositiveRate = Annotated[float, Field(gt=0, le=1e9, allow_inf_nan=False)]
Workers = Annotated[int, Field(ge=0, le=MAX_WORKERS)]


class _In(BaseModel):
    """A request body.  Strict: a JSON number where a number belongs (an integer may stand for a float,
    never a float for an integer), no ``true`` for a number, no ``"1"`` for one; a client's wrong type
    is its mistake to hear of (422), not something to guess at."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ProbeIn(_In):
    """A job's probe features (adlrec.predict.features.ProbeFeatures), measured by `adlrec predict`."""

    ceiling: PositiveRate
    prep_rate_0: PositiveRate
    prep_rate_1: PositiveRate
    prep_rate_2: PositiveRate
    fetch_extra_s: Annotated[float, Field(ge=0, lt=60, allow_inf_nan=False)]
    batch_size: Annotated[int, Field(ge=1, le=1_000_000)]
    cores: Annotated[int, Field(ge=1, le=4096)]
    device_kind: Literal["cpu", "cuda", "emulate"]


class JobRegistration(_In):
    """A job joining a node: its bounds and either its probe features or an explicit curve."""

    job_id: Name | None = Field(default=None, description="client-chosen id; the service makes one if absent")
    node: Name = Field(description="the node the job runs on")
    ranks: Annotated[int, Field(ge=1, le=64)] = Field(
        default=1,
        description="its processes on this node that step together (DDP ranks), each with its own loader; with "
        "more than one, curve, probe, min/max/requested workers, heartbeats and the assignment are one rank's",
    )
    gpus: Annotated[int, Field(ge=0, le=64)] | None = Field(default=None, description="None: one per rank")
    weight: Annotated[float, Field(ge=0, le=1e6, allow_inf_nan=False)] = 1.0
    min_workers: Workers = 0
    max_workers: Workers | None = Field(default=None, description="None: the service's service_max_workers")
    requested_workers: Workers = Field(
        default=8, description="num_workers its script asked for (each rank's; with ranks=1, all its processes')"
    )
    mem_per_worker_mb: Annotated[int, Field(ge=0, le=1_048_576)] = 0
    main_cores: Annotated[int, Field(ge=0, le=256)] | None = Field(
        default=None, description="cores its training processes need, not available to workers; None: one per rank"
    )
    probe: ProbeIn | None = Field(default=None, description="predict the curve from these features")
    curve: Annotated[list[Rate], Field(min_length=1, max_length=257)] | None = Field(
        default=None, description="samples/s at w = 0..len-1 workers, instead of a probe"
    )

    @model_validator(mode="after")
    def _one_source(self) -> JobRegistration:
        if (self.probe is None) == (self.curve is None):
            raise ValueError("give exactly one of probe or curve")
        if self.max_workers is not None and self.min_workers > self.max_workers:
            raise ValueError(f"min_workers ({self.min_workers}) must be <= max_workers ({self.max_workers})")
        if self.curve is not None:
            top = len(self.curve) - 1
            last = f"the curve's last point ({count(top, 'worker')})"
            if self.max_workers is not None and self.max_workers > top:
                raise ValueError(f"max_workers ({self.max_workers}) is past {last}")
            if self.min_workers > top:
                raise ValueError(f"min_workers ({self.min_workers}) is past {last}")
        return self


class Heartbeat(_In):
    """What a running job measured since its last heartbeat."""

    throughput: Rate | None = Field(default=None, description="samples/s measured at `workers`")
    workers: Workers | None = Field(default=None, description="loader workers it runs with now")
    data_wait: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = Field(
        default=None, description="share of step time spent waiting for data"
    )


class NodeIn(_In):
    cores: Annotated[int, Field(ge=1, le=4096)]
    memory_mb: Annotated[int, Field(ge=0, le=1 << 30)]


class NodeOut(BaseModel):
    name: str
    cores: int
    memory_mb: int
    active_jobs: int
    plan_id: int | None
    problem: str | None = Field(
        default=None,
        description="why no plan fits the node at the last recompute (its jobs' main processes and minimum "
        "workers need more than it has); until one does, its plan gives every job its minimum workers",
    )

    @classmethod
    def of(cls, n: NodeInfo, active_jobs: int, plan_id: int | None, problem: str | None = None) -> NodeOut:
        return cls(
            name=n.name, cores=n.cores, memory_mb=n.memory_mb, active_jobs=active_jobs, plan_id=plan_id, problem=problem
        )


class PointOut(BaseModel):
    workers: int
    throughput: float
    samples: int
    data_wait: float | None  # null: no heartbeat at this worker count said


class AssignmentOut(BaseModel):
    """What the job should run with: apply it when plan_id differs from the last one applied."""

    job_id: str
    workers: int
    plan_id: int | None
    status: str

    @classmethod
    def of(cls, a: Assignment) -> AssignmentOut:
        return cls(job_id=a.job_id, workers=a.workers, plan_id=a.plan_id, status=a.status)


class JobOut(BaseModel):
    job_id: str
    node: str
    status: str
    gpus: int
    weight: float
    min_workers: int
    max_workers: int | None
    requested_workers: int
    mem_per_worker_mb: int
    main_cores: int
    ranks: int  # with more than one, the curves, bounds and assignment are one rank's; a plan counts them all
    predicted: list[float]
    curve: list[float]  # the predicted curve with measured points in place: what the allocator uses
    curve_source: str
    measured: list[PointOut]
    registered_at: float
    last_seen: float
    finished_at: float | None
    reported_workers: int | None
    reported_throughput: float | None
    data_wait: float | None
    assignment: AssignmentOut

    @classmethod
    def of(cls, j: JobRecord, points: list[MeasuredPoint], a: Assignment) -> JobOut:
        s = j.spec
        measured = {p.workers: p.throughput for p in points}
        return cls(
            job_id=s.job_id,
            node=s.node,
            status=j.status,
            gpus=s.gpus,
            weight=s.weight,
            min_workers=s.min_workers,
            max_workers=s.max_workers,
            requested_workers=s.requested_workers,
            mem_per_worker_mb=s.mem_per_worker_mb,
            main_cores=s.main_cores,
            ranks=s.ranks,
            predicted=list(s.curve),
            curve=list(effective_curve(s.curve, measured)),  # what the allocator plans with
            curve_source=s.curve_source,
            measured=[PointOut(**p.__dict__) for p in points],
            registered_at=j.registered_at,
            last_seen=j.last_seen,
            finished_at=j.finished_at,
            reported_workers=j.reported_workers,
            reported_throughput=j.reported_throughput,
            data_wait=j.data_wait,
            assignment=AssignmentOut.of(a),
        )


class FinishOut(BaseModel):
    job_id: str
    status: str


class PlanOut(BaseModel):
    plan_id: int
    node: str
    created_at: float
    policy: str
    workers: dict[str, int]
    throughput: dict[str, float]
    objective: float
    cores_used: int
    memory_used_mb: int
    reasons: dict[str, str]

    @classmethod
    def of(cls, p: PlanRecord) -> PlanOut:
        a = p.plan
        return cls(
            plan_id=p.plan_id,
            node=p.node,
            created_at=p.created_at,
            policy=a.policy,
            workers=a.workers,
            throughput=a.throughput,
            objective=a.objective,
            cores_used=a.cores_used,
            memory_used_mb=a.memory_used_mb,
            reasons=a.reasons,
        )


class PlanPage(BaseModel):
    plans: list[PlanOut]
    next_before: int | None = Field(description="pass as `before` for the next (older) page; null at the end")


class RecomputeOut(BaseModel):
    plans: list[PlanOut]  # the plans this recompute stored (nodes whose allocation changed)


class ModelOut(BaseModel):
    name: str
    version: str | None
    alias: str
    source: str
    note: str


class HealthOut(BaseModel):
    status: Literal["ok"]
    version: str
    store: str
    policy: str
