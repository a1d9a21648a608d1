"""The service's own ASGI middleware (pure ASGI: no buffering of responses): the request body limit
and the request metrics, and :func:`replayed`, for middleware that reads a body and passes it on."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from adlrec.service.metrics import Metrics

__all__ = ["BodyLimit", "Metered", "replayed"]

Receive = Callable[[], Awaitable[dict]]


def replayed(body: bytes, receive: Receive) -> Receive:
    """An ASGI ``receive`` that gives the app ``body`` (already read, whole), then what ``receive`` gives."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


class BodyLimit:
    """Refuse request bodies over ``limit`` bytes with 413, by header and by counting what arrives."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await _too_large(send, self.limit)
            return
        chunks, size, more = [], 0, True
        while more:
            msg = await receive()
            if msg["type"] != "http.request":  # the client left before its body ended: nobody to answer
                return
            chunks.append(msg.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await _too_large(send, self.limit)
                return
            more = msg.get("more_body", False)
        await self.app(scope, replayed(b"".join(chunks), receive), send)


async def _too_large(send: Callable, limit: int) -> None:
    body = f'{{"detail":"request body larger than {limit} bytes"}}'.encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


class Metered:
    """Count requests by route template and status, and time them."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self.app, self.metrics = app, metrics

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        code = 500  # an exception that passes here is answered 500 by Starlette's outer error middleware
        answered = False

        async def sending(msg: dict) -> None:
            nonlocal code, answered
            if msg["type"] == "http.response.start":
                code, answered = msg["status"], True
            await send(msg)

        try:
            await self.app(scope, receive, sending)
            if not answered:  # the client left before its body ended: nginx's "client closed request"
                code = 499
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")
            self.metrics.observe(time.perf_counter() - t0, route)
            self.metrics.inc("adlrec_http_requests_total", method=scope.get("method", ""), route=route, code=str(code))
