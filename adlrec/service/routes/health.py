"""Liveness and Prometheus metrics."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from adlrec import __version__
from adlrec.service.api import HealthOut
from adlrec.service.deps import PartsDep
from adlrec.service.store import STORE_DOWN

router = APIRouter(tags=["health"])


# HEAD too: load balancers and uptime checkers often probe with it (a GET-only route answered 405).  One
# route for both gave both one OpenAPI operation id, and FastAPI warned of the duplicate at every schema build.
@router.head("/health", summary="The same as GET /health, without the body")
@router.get("/health", summary="The service is up and its store answers")
def health(parts: PartsDep) -> HealthOut:
    parts.store.counts()  # a store that does not answer makes this a 503 (app.py), which is the point
    return HealthOut(
        status="ok",
        version=__version__,
        store=parts.store.engine.dialect.name,
        policy=parts.settings.service_policy,
    )


@router.get(
    "/metrics",
    response_class=PlainTextResponse,
    summary="Counters in Prometheus text format",
)
def metrics(parts: PartsDep) -> PlainTextResponse:
    """The counters live in memory, so they are served while the job store is down (when they matter most):
    ``adlrec_store_up`` is then 0, and what only the store knows (finished jobs, stored plans) is left out."""
    try:
        counts, up = parts.state.counts(), 1.0
    except STORE_DOWN:  # the write-behind thread logs the outage; a scrape every few seconds need not
        counts, up = parts.state.held_counts(), 0.0
    gauges = {
        "adlrec_jobs": {(("status", s),): float(n) for s, n in counts.items() if s != "plans"},
        "adlrec_store_up": {(): up},
    }
    if "plans" in counts:
        gauges["adlrec_plans"] = {(): float(counts["plans"])}
    return PlainTextResponse(parts.metrics.render(gauges), media_type="text/plain; version=0.0.4; charset=utf-8")
