"""The throughput model the service predicts curves with."""

from __future__ import annotations

from fastapi import APIRouter

from adlrec.service.api import ModelOut
from adlrec.service.deps import Authorized, PartsDep

router = APIRouter(tags=["model"])


@router.get("/model", summary="The throughput model in use: registry name, version and alias, or the fallback")
def model(parts: PartsDep) -> ModelOut:
    i = parts.predictor.info
    return ModelOut(name=i.name, version=i.version, alias=i.alias, source=i.source, note=i.note)


@router.post(
    "/model/refresh",
    dependencies=[Authorized],
    summary="Follow the alias now (the periodic recompute also does); re-predicts active jobs if it moved",
)
def refresh(parts: PartsDep) -> ModelOut:
    parts.recomputer.refresh_model()
    return model(parts)
