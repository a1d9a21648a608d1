"""Jobs: register, heartbeat, finish, and read them back."""

from __future__ import annotations

import json
import uuid
from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status
from starlette.concurrency import run_in_threadpool

from adlrec.predict.features import ProbeError, ProbeFeatures
from adlrec.service.api import AssignmentOut, FinishOut, Heartbeat, JobOut, JobRegistration
from adlrec.service.deps import Authorized, ClientError, Parts, PartsDep
from adlrec.service.records import Assignment, JobRecord, JobSpec
from adlrec.service.store import UnknownJob

router = APIRouter(prefix="/jobs", tags=["jobs"])

JobId = Annotated[str, Path(min_length=1, max_length=128, description="the job's id")]


def _out(parts: Parts, job: JobRecord) -> JobOut:
    return JobOut.of(job, parts.state.points(job.job_id), parts.state.assignment(job))


def _spec(parts: Parts, body: JobRegistration) -> JobSpec:
    job_id = body.job_id or uuid.uuid4().hex[:16]
    if body.curve is not None:
        curve, source, features, hi = tuple(body.curve), "explicit", None, body.max_workers
    else:
        cap = parts.settings.service_max_workers
        hi = body.max_workers if body.max_workers is not None else cap
        if hi > cap:
            raise ClientError("max_workers", f"{hi} is above this service's limit of {cap} workers")
        if body.min_workers > hi:
            raise ClientError("min_workers", f"{body.min_workers} is above max_workers ({hi})")
        try:
            features = ProbeFeatures(**body.probe.model_dump())
        except ProbeError as exc:
            raise ClientError("probe", str(exc)) from None
        curve, source = parts.predictor.predict(features, hi)
        features = features.to_dict()
    return JobSpec(
        job_id=job_id,
        node=body.node,
        curve=curve,
        curve_source=source,
        features=features,
        gpus=body.ranks if body.gpus is None else body.gpus,
        weight=body.weight,
        min_workers=body.min_workers,
        max_workers=hi,
        requested_workers=body.requested_workers,
        mem_per_worker_mb=body.mem_per_worker_mb,
        main_cores=body.ranks if body.main_cores is None else body.main_cores,
        ranks=body.ranks,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    dependencies=[Authorized],
    summary="Register a job (or register it again: its spec is replaced and its measurements forgotten)",
)
def register(body: JobRegistration, parts: PartsDep, response: Response) -> JobOut:
    job, created = parts.state.register(_spec(parts, body), parts.default_node)
    if not created:
        response.status_code = status.HTTP_200_OK
    parts.metrics.inc("adlrec_registrations_total")
    parts.recomputer.poke("register")
    return _out(parts, job)


@router.post(
    "/{job_id}/heartbeat",
    dependencies=[Authorized],
    response_model=AssignmentOut,
    summary="Report measured throughput; the answer is the worker count to run with and its plan id",
)
async def heartbeat(job_id: JobId, body: Heartbeat, parts: PartsDep) -> Response:
    """The hot path: memory only, on the event loop (the store gets it with the next flush).  Most
    heartbeats are answered before they reach this route, by :mod:`adlrec.service.fastpath` with the
    same :func:`beat`; it passes on what it cannot answer (unknown or finished jobs, bad input)."""
    answer = beat(parts, job_id, body)
    if answer is None:  # unknown or finished: the store says which (404 or 409)
        await run_in_threadpool(parts.state.check_closed, job_id)
        answer = beat(parts, job_id, body)
        if answer is None:  # it finished meanwhile
            raise UnknownJob(f"no active job {job_id!r}: register it again")
    return Response(answer, media_type="application/json")


def beat(parts: Parts, job_id: str, body: Heartbeat) -> bytes | None:
    """Record a heartbeat of a job held in memory and return the answer's JSON; None when the job is
    not held (unknown or finished).  Raises ClientError for a throughput without its worker count."""
    if body.throughput is not None and body.workers is None:
        raise ClientError("workers", "a measured throughput needs the worker count it was measured at")
    b = parts.state.beat(job_id, body.throughput, body.workers, body.data_wait)
    if b is None:
        return None
    parts.metrics.inc("adlrec_heartbeats_total")
    if b.revived:  # it had expired; plan for it again soon rather than at the next interval
        parts.recomputer.poke("revive")
    a = b.assignment
    if parts.live is not None:
        sample = {"throughput": body.throughput, "workers": body.workers, "data_wait": body.data_wait}
        metrics = sample | {"planned_workers": a.workers}
        parts.live.record(job_id, b.job.spec.node, b.job.last_seen, metrics, b.job.registered_at)
    return _assignment_json(a)


def _assignment_json(a: Assignment) -> bytes:
    """AssignmentOut's JSON, written directly: the response model is for the OpenAPI page."""
    d = {"job_id": a.job_id, "workers": a.workers, "plan_id": a.plan_id, "status": a.status}
    return json.dumps(d, separators=(",", ":")).encode()


@router.post("/{job_id}/finish", dependencies=[Authorized], summary="The job has ended: release its workers")
def finish(job_id: JobId, parts: PartsDep) -> FinishOut:
    job = parts.state.finish(job_id)
    if parts.live is not None:
        parts.live.end(job_id, job.status)
    parts.recomputer.poke("finish")
    return FinishOut(job_id=job.job_id, status=job.status)


@router.get("", summary="Jobs, in registration order")
def list_jobs(
    parts: PartsDep,
    status: Annotated[str | None, Query(pattern="^(active|finished|expired)$")] = None,
    node: Annotated[str | None, Query(max_length=128)] = None,
) -> list[JobOut]:
    return [_out(parts, j) for j in parts.state.jobs(status=status, node=node)]


@router.get("/{job_id}", summary="One job: its curve (predicted and measured), state and assignment")
def get_job(job_id: JobId, parts: PartsDep) -> JobOut:
    return _out(parts, parts.state.job(job_id))
