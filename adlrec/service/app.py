"""``create_app(settings)``: the allocation service as a FastAPI application.

Tests and ``adlrec serve`` build it with their own settings, and may pass a store (e.g. on a
PostgreSQL URL), a clock and a predictor.  The app's lifespan loads the throughput model, starts
the periodic recompute, and stops it again.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from adlrec import __version__
from adlrec.config import Settings
from adlrec.errors import first_line
from adlrec.predict.features import ProbeError
from adlrec.service.deps import UNAUTHORIZED, UNAUTHORIZED_HEADERS, ClientError, Parts, write_refused
from adlrec.service.fastpath import HeartbeatFastPath
from adlrec.service.flusher import WriteBehind
from adlrec.service.lifeline import children_ignore_interrupts
from adlrec.service.live import LiveLog
from adlrec.service.metrics import Metrics
from adlrec.service.middleware import BodyLimit, Metered
from adlrec.service.predictor import Predictor
from adlrec.service.records import NodeInfo
from adlrec.service.routes import health, jobs, model, nodes, plans
from adlrec.service.scheduler import RecomputeConfig, Recomputer
from adlrec.service.state import JobState
from adlrec.service.store import STORE_DOWN, JobNotActive, JobStore, StoreError, UnknownJob, UnknownNode
from adlrec.service.ui import mount_ui

__all__ = ["create_app"]

log = logging.getLogger("adlrec.service")


def create_app(
    settings: Settings,
    *,
    store: JobStore | None = None,
    clock: Callable[[], float] = time.time,
    predictor: Predictor | None = None,
    start_scheduler: bool = True,
    flush_s: float = 1.0,
) -> FastAPI:
    """The service.  ``store``: a JobStore to use (default: one on ``settings.resolved_store_url``,
    closed at shutdown); ``clock``: seconds since the epoch, for timestamps and TTLs;
    ``start_scheduler=False`` leaves recomputes to ``POST /plans/recompute``; ``flush_s``: how often
    buffered heartbeats are written to the store (at most what a crash loses)."""
    own_store = store is None
    store = store or JobStore(settings.resolved_store_url, clock=clock)
    predictor = predictor or Predictor(
        settings.resolved_tracking_uri, settings.artifact_root, alias=settings.service_model_alias
    )
    metrics = Metrics()
    live = (
        LiveLog(settings.resolved_tracking_uri, settings.artifact_root, period_s=settings.service_interval_s)
        if settings.service_live_runs
        else None
    )
    state = JobState(store, clock, settings.service_measure_alpha)
    writer = WriteBehind(state, metrics, live, every_s=flush_s)
    recomputer = Recomputer(
        state,
        predictor,
        RecomputeConfig(
            policy=settings.service_policy,
            objective=settings.service_objective,
            threshold=settings.service_threshold,
            ttl_s=settings.service_ttl_s,
            interval_s=settings.service_interval_s,
            debounce_s=settings.service_debounce_s,
        ),
        metrics,
        live,
        own_process=settings.service_recompute_process,
    )
    parts = Parts(
        settings=settings,
        store=store,
        state=state,
        predictor=predictor,
        recomputer=recomputer,
        metrics=metrics,
        default_node=_default_node(settings),
        live=live,
        clock=clock,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.load()
        predictor.refresh()
        with children_ignore_interrupts():  # a terminal's Ctrl-C is the service's, not its children's
            writer.flush_live()  # starts the live-metrics writer here, not on the write-behind thread
            writer.start()
            if start_scheduler:
                recomputer.start()
        # What is alive now (modules, the app, SQLAlchemy, MLflow, the loaded jobs) stays alive: keep
        # the cyclic GC from walking it again in every full collection, each of which stops the event
        # loop for as long as the walk takes: the tail of the heartbeats' latency under load.
        gc.freeze()
        log.info(
            "adlrec service: store %s, policy %s, model %s, recompute every %gs",
            store.engine.url.render_as_string(hide_password=True),
            settings.service_policy,
            predictor.info.source,
            settings.service_interval_s,
        )
        try:
            yield
        finally:
            recomputer.stop()
            writer.stop()  # the last heartbeats to the store, the last live samples to MLflow
            if own_store:
                store.close()
            gc.unfreeze()  # what the app held can be collected again (several apps in one process: tests)

    app = FastAPI(
        title="adlrec allocation service",
        version=__version__,
        description="Training jobs register, report measured throughput, and read how many DataLoader "
        "workers to run with. Writes need `Authorization: Bearer <token>` when the service has a token.",
        lifespan=lifespan,
    )
    app.state.parts = parts
    for r in (jobs.router, nodes.router, plans.router, model.router, health.router):
        app.include_router(r)
    mount_ui(app, settings.resolved_webapp_dir)
    _add_error_handlers(app)
    if settings.service_fast_heartbeat:
        route = next(r for r in jobs.router.routes if getattr(r, "path", None) == "/jobs/{job_id}/heartbeat")
        app.add_middleware(HeartbeatFastPath, parts=parts, route=route)
    app.add_middleware(BodyLimit, limit=settings.service_max_body_bytes)
    app.add_middleware(Metered, metrics=metrics)  # outermost (added last): it counts the 413s too
    return app


def _default_node(settings: Settings) -> NodeInfo:
    import psutil

    cores = settings.service_node_cores or os.cpu_count() or 1
    memory = settings.service_node_memory_mb or int(psutil.virtual_memory().total // 2**20)
    return NodeInfo("default", cores, memory)


# -- errors: every client mistake is a short 4xx that names the field ----------------------------
def _field(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def _message(err: dict[str, Any]) -> str:
    msg = str(err.get("msg", "invalid"))
    return msg.removeprefix("Value error, ")


def _body_message(request: Request, err: dict[str, Any]) -> str:
    """The error's message; for a body that is not a JSON object, what one is and how to send it."""
    if tuple(err.get("loc", ())) != ("body",) or err.get("type") not in ("missing", "model_attributes_type"):
        return _message(err)
    ctype = request.headers.get("content-type", "")
    main = ctype.split(";")[0].strip().lower()
    if main != "application/json" and not (main.startswith("application/") and main.endswith("+json")):
        got = f"got content-type {ctype!r}" if ctype else "got no content-type"
        return f"expected a JSON object sent with content-type application/json, {got}"
    return "expected a JSON object" + (", got nothing" if err.get("type") == "missing" else "")


_UNPARSED = "There was an error parsing the body"  # fastapi/routing.py's detail


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI reads and validates the body before it runs the token's dependency: a write
        # without the token hears 401 first, whatever its body, and learns nothing of the schema
        if write_refused(request, request.app.state.parts):
            return JSONResponse(status_code=401, content={"detail": UNAUTHORIZED}, headers=UNAUTHORIZED_HEADERS)
        errors = [
            {"field": "body", "message": "not valid JSON"}
            if e.get("type") == "json_invalid"
            else {"field": _field(tuple(e.get("loc", ()))), "message": _body_message(request, e)}
            for e in exc.errors()
        ]
        detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors[:5])
        return JSONResponse(status_code=422, content={"detail": f"invalid request: {detail}", "errors": errors})

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> Any:
        # FastAPI's answer to a body json cannot read for another reason than bad syntax (nested
        # thousands deep: a RecursionError): said in this service's form, and after the token
        if exc.status_code == 400 and exc.detail == _UNPARSED:
            if write_refused(request, request.app.state.parts):
                return JSONResponse(status_code=401, content={"detail": UNAUTHORIZED}, headers=UNAUTHORIZED_HEADERS)
            message = "could not be read as JSON (nested too deeply?); expected a JSON object of the fields"
            return JSONResponse(
                status_code=400,
                content={
                    "detail": f"invalid request: body: {message}",
                    "errors": [{"field": "body", "message": message}],
                },
            )
        return await http_exception_handler(request, exc)

    @app.exception_handler(ClientError)
    async def _client(request: Request, exc: ClientError) -> JSONResponse:
        return JSONResponse(
            status_code=exc.status_code,
            content={"detail": f"invalid request: {exc}", "errors": [{"field": exc.field, "message": exc.message}]},
        )

    @app.exception_handler(ProbeError)
    async def _probe(request: Request, exc: ProbeError) -> JSONResponse:
        return JSONResponse(status_code=422, content={"detail": f"invalid request: probe: {exc}"})

    # The job store's database does not answer (its server is down or unreachable, its file or folder gone, no
    # connection free): not the client's mistake, and not a bug either.  A 503 that says so; the cause goes to
    # the log, not to the client (it may name hosts and users).  What memory holds still answers: active jobs,
    # heartbeats, each node's current plan (GET /plans/current).
    async def _store_down(request: Request, exc: Exception) -> JSONResponse:
        cause = first_line(getattr(exc, "orig", None) or exc, type(exc).__name__)
        log.error("%s %s: the job store did not answer: %s", request.method, request.url.path, cause)
        detail = "the job store is unavailable (its database did not answer); the service's log says why"
        return JSONResponse(status_code=503, content={"detail": detail}, headers={"Retry-After": "5"})

    for down in STORE_DOWN:
        app.add_exception_handler(down, _store_down)

    @app.exception_handler(StoreError)
    async def _store(request: Request, exc: StoreError) -> JSONResponse:
        code = 404 if isinstance(exc, (UnknownJob, UnknownNode)) else 409 if isinstance(exc, JobNotActive) else 400
        return JSONResponse(status_code=code, content={"detail": str(exc)})
