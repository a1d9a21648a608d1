"""What routes depend on: the service's parts, the bearer-token check, and client errors."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request, status

from adlrec.config import Settings
from adlrec.service.live import LiveLog
from adlrec.service.metrics import Metrics
from adlrec.service.predictor import Predictor
from adlrec.service.records import NodeInfo
from adlrec.service.scheduler import Recomputer
from adlrec.service.state import JobState
from adlrec.service.store import JobStore

__all__ = [
    "UNAUTHORIZED",
    "UNAUTHORIZED_HEADERS",
    "Authorized",
    "ClientError",
    "Parts",
    "PartsDep",
    "require_token",
    "token_ok",
    "write_refused",
]


class ClientError(Exception):
    """A request that passed validation but cannot be served as asked; answered 4xx naming the field."""

    def __init__(self, field: str, message: str, status_code: int = 422) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message, self.status_code = field, message, status_code


@dataclass(frozen=True)
class Parts:
    """Everything a route may use, built once by create_app."""

    settings: Settings
    store: JobStore
    state: JobState  # the open jobs in memory; read and write jobs through it
    predictor: Predictor
    recomputer: Recomputer
    metrics: Metrics
    default_node: NodeInfo  # budgets of a node that appears only through a job registration
    live: LiveLog | None = None  # per-job MLflow runs of heartbeats; None when switched off
    clock: Callable[[], float] = time.time


async def get_parts(request: Request) -> Parts:
    return request.app.state.parts


PartsDep = Annotated[Parts, Depends(get_parts)]


def token_ok(settings: Settings, authorization: str) -> bool:
    """Whether an ``Authorization`` header value lets a write through (constant-time compare)."""
    token = settings.service_token
    if token is None:
        return True
    if not token.get_secret_value():  # refused at start (check_bind); never "any Bearer" here either
        return False
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode())


UNAUTHORIZED = "missing or wrong bearer token (Authorization: Bearer <token>)"
UNAUTHORIZED_HEADERS = {"WWW-Authenticate": "Bearer"}


def write_refused(request: Request, parts: Parts) -> bool:
    """Whether ``request`` is a write (every route but a read needs the token) without the token."""
    return request.method not in ("GET", "HEAD", "OPTIONS") and not token_ok(
        parts.settings, request.headers.get("authorization", "")
    )


async def require_token(request: Request, parts: PartsDep) -> None:
    """Every write carries ``Authorization: Bearer <service_token>`` when a token is configured."""
    if not token_ok(parts.settings, request.headers.get("authorization", "")):
        raise HTTPException(status_code=status.HTTP_401_UNAUTHORIZED, detail=UNAUTHORIZED, headers=UNAUTHORIZED_HEADERS)


Authorized = Depends(require_token)
