"""Plans: the current plan per node (one node's, or every node's), the paged history, and an explicit recompute."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Path, Query

from adlrec.service.api import PlanOut, PlanPage, RecomputeOut
from adlrec.service.deps import Authorized, PartsDep

router = APIRouter(tags=["plans"])

MAX_ID = 2**63 - 1  # plan ids are 64-bit integers in the store: a larger one is the client's mistake, not a 500


@router.get("/nodes/{name}/plan", summary="The node's current plan (404 until the first one)")
def current_plan(name: Annotated[str, Path(min_length=1, max_length=128)], parts: PartsDep) -> PlanOut:
    parts.store.node(name)  # 404 for an unknown node
    latest = parts.store.latest_plan(name)
    if latest is None:
        raise HTTPException(status_code=404, detail=f"node {name!r} has no plan yet")
    return PlanOut.of(latest)


# before /plans/{plan_id}, which would take "current" for an id (and refuse it, 422)
@router.get("/plans/current", summary="Every node's current plan, by node name, in one call")
def current_plans(parts: PartsDep) -> list[PlanOut]:
    """What ``GET /nodes/{name}/plan`` answers for each node that has a plan, read from memory (the plans the
    service answers heartbeats from), so it answers while the store is down."""
    plans = parts.state.current_plans()
    return [PlanOut.of(plans[n]) for n in sorted(plans)]


@router.get("/plans", summary="Plan history, newest first, paged by plan id")
def history(
    parts: PartsDep,
    node: Annotated[str | None, Query(max_length=128)] = None,
    before: Annotated[int | None, Query(ge=1, le=MAX_ID, description="only plans with a smaller id")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
) -> PlanPage:
    plans = parts.store.plans(node=node, before=before, limit=limit + 1)  # one more: is there another page?
    more = len(plans) > limit
    plans = plans[:limit]
    return PlanPage(plans=[PlanOut.of(p) for p in plans], next_before=plans[-1].plan_id if more else None)


@router.get("/plans/{plan_id}", summary="One plan by id")
def get_plan(plan_id: Annotated[int, Path(ge=1, le=MAX_ID)], parts: PartsDep) -> PlanOut:
    p = parts.store.plan(plan_id)
    if p is None:
        raise HTTPException(status_code=404, detail=f"no plan {plan_id}")
    return PlanOut.of(p)


@router.post("/plans/recompute", dependencies=[Authorized], summary="Recompute every node's plan now")
def recompute(parts: PartsDep) -> RecomputeOut:
    return RecomputeOut(plans=[PlanOut.of(p) for p in parts.recomputer.recompute("request")])
