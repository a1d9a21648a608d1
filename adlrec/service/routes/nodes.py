"""Nodes: the budgets (cores, memory) their jobs' loader workers share."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from adlrec.service.api import NodeIn, NodeOut
from adlrec.service.deps import Authorized, Parts, PartsDep
from adlrec.service.records import NodeInfo

router = APIRouter(prefix="/nodes", tags=["nodes"])

NodeName = Annotated[str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]*$")]


def _out(parts: Parts, n: NodeInfo, plan_id: int | None) -> NodeOut:
    return NodeOut.of(n, parts.state.active_count(n.name), plan_id, parts.state.problem(n.name))


def _one(parts: Parts, n: NodeInfo) -> NodeOut:
    latest = parts.store.latest_plan(n.name)
    return _out(parts, n, latest.plan_id if latest else None)


@router.get("", summary="Every known node")
def list_nodes(parts: PartsDep) -> list[NodeOut]:
    plan_ids = parts.store.latest_plan_ids()
    return [_out(parts, n, plan_ids.get(n.name)) for n in parts.store.nodes()]


@router.get("/{name}", summary="One node")
def get_node(name: NodeName, parts: PartsDep) -> NodeOut:
    return _one(parts, parts.store.node(name))


@router.put("/{name}", dependencies=[Authorized], summary="Declare a node's cores and worker memory")
def put_node(name: NodeName, body: NodeIn, parts: PartsDep) -> NodeOut:
    node = parts.store.put_node(NodeInfo(name, body.cores, body.memory_mb))
    parts.state.forget_problem(name)
    parts.recomputer.poke("node")
    return _one(parts, node)
