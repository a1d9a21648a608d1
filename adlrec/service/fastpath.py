"""The heartbeat's fast path: a well-formed, authorised heartbeat of a job the service holds is
answered here, before FastAPI's router.

Heartbeats are nearly all the requests the service gets (every job, every few seconds), and under
``bench/service_load.py`` FastAPI's routing, dependency solving and request/response classes took
about half of the event loop's CPU per heartbeat; ``--fast-heartbeat on,off`` there shows what
this path saves (docs/service.md, Load).  It does what the route does, with the same :func:`~adlrec.service.routes.jobs.beat`
and the same token check, and passes everything else on to the app unchanged (its body replayed): a
missing or wrong token, a body that does not parse or validate, an unknown or finished job.  So
every error, and the OpenAPI page, stay the app's own.  It sits inside the body limit and the
request metrics, which count its answers under the heartbeat's route.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from adlrec.service.api import Heartbeat
from adlrec.service.deps import ClientError, Parts, token_ok
from adlrec.service.middleware import replayed
from adlrec.service.routes.jobs import beat

__all__ = ["HeartbeatFastPath"]

_PATH = re.compile(r"/jobs/([^/]{1,128})/heartbeat")  # the route's path and its job_id bounds
_JSON_HEADERS = [(b"content-type", b"application/json")]

Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


class HeartbeatFastPath:
    """Pure ASGI middleware.  ``route``: the heartbeat's route object, set on the scope of each
    request answered here, as the router would, so that request metrics name it."""

    def __init__(self, app: Any, parts: Parts, route: Any) -> None:
        self.app, self.parts, self.route = app, parts, route

    async def __call__(self, scope: dict, receive: Receive, send: Send) -> None:
        m = _PATH.fullmatch(scope["path"]) if scope["type"] == "http" and scope["method"] == "POST" else None
        if m is None or scope.get("root_path") or not self._authorised(scope["headers"]):
            await self.app(scope, receive, send)
            return
        body, more, disconnected = b"", True, False
        while more:
            msg = await receive()
            if msg["type"] != "http.request":
                disconnected = True
                break
            body += msg.get("body", b"")
            more = msg.get("more_body", False)
        answer = None if disconnected else self._answer(m.group(1), body)
        if answer is None:
            await self.app(scope, replayed(body, receive) if not disconnected else receive, send)
            return
        scope["route"] = self.route
        headers = [*_JSON_HEADERS, (b"content-length", str(len(answer)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": answer})

    def _authorised(self, headers: list[tuple[bytes, bytes]]) -> bool:
        auth, ctype = b"", b""
        for k, v in headers:
            if k == b"authorization":
                auth = v
            elif k == b"content-type":
                ctype = v
        # FastAPI reads a body as JSON only under a JSON content type; anything but plain
        # application/json goes on to it, to decide
        return ctype.split(b";")[0].strip().lower() == b"application/json" and token_ok(
            self.parts.settings, auth.decode("latin-1")
        )

    def _answer(self, job_id: str, body: bytes) -> bytes | None:
        """The answer's JSON, or None when the app should answer (and explain) this request."""
        if not body:
            return None
        try:
            hb = Heartbeat.model_validate(json.loads(body))  # as FastAPI does: parse, then validate
        except (ValueError, ValidationError, RecursionError):  # ValidationError is a ValueError; named for the
            return None  # reader; RecursionError: JSON nested thousands deep (the app says what is wrong)
        try:
            return beat(self.parts, job_id, hb)
        except ClientError:
            return None
