"""The service's ASGI middleware around a small ASGI app, without a server: the body limit's bounds and
what the request metrics count."""

from __future__ import annotations

import asyncio

import pytest

from adlrec.service.metrics import Metrics
from adlrec.service.middleware import BodyLimit, Metered


async def _echo(scope: dict, receive, send) -> None:
    """Answers 200 with the body it read."""
    body, more = b"", True
    while more:
        msg = await receive()
        body += msg.get("body", b"")
        more = msg.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


def _call(app, chunks: list[bytes], headers: list[tuple[bytes, bytes]] = ()) -> tuple[int, bytes]:
    """POST ``chunks`` (more_body on all but the last) to ``app``; its status and body."""
    scope = {"type": "http", "method": "POST", "path": "/jobs", "headers": list(headers)}
    incoming = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    sent: list[dict] = []

    async def receive() -> dict:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(msg: dict) -> None:
        sent.append(msg)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_body_of_exactly_the_limit_passes_and_one_byte_more_is_a_413(declared):
    app = BodyLimit(_echo, limit=10)

    def post(body: bytes) -> tuple[int, bytes]:
        if declared:
            return _call(app, [body], [(b"content-length", str(len(body)).encode())])
        return _call(app, [body[:4], body[4:]])

    assert post(b"x" * 10) == (200, b"x" * 10)
    status, said = post(b"x" * 11)
    assert status == 413 and b"request body larger than 10 bytes" in said


def test_a_request_whose_app_raises_is_counted_as_a_500():
    """Starlette's outer error middleware answers 500 after the exception has passed the metrics: they count it
    with the status no response gave them."""

    async def broken(scope: dict, receive, send) -> None:
        raise RuntimeError("a bug in a route")

    metrics = Metrics()
    with pytest.raises(RuntimeError):
        _call(Metered(broken, metrics), [b"{}"])
    assert metrics.value("adlrec_http_requests_total", method="POST", route="unmatched", code="500") == 1


def test_a_client_that_leaves_mid_body_reaches_no_route():
    """Its body cut short is not a request: it was passed on as if whole, so a cut upload whose start parsed (a
    PUT /nodes whose client sent the JSON and then left before the bytes its Content-Length promised) was done."""
    called: list[dict] = []

    async def app(scope: dict, receive, send) -> None:
        called.append(scope)
        await _echo(scope, receive, send)

    incoming = [{"type": "http.request", "body": b'{"cores": 4, "memory_mb": 100}', "more_body": True}]
    asked = 0

    async def receive() -> dict:
        nonlocal asked
        asked += 1
        assert asked < 100, "asked for the rest of a body whose client has left, again and again"
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    sent: list[dict] = []

    async def send(msg: dict) -> None:
        sent.append(msg)

    scope = {"type": "http", "method": "PUT", "path": "/nodes/x", "headers": [(b"content-length", b"100")]}
    metrics = Metrics()
    asyncio.run(Metered(BodyLimit(app, limit=1000), metrics)(scope, receive, send))
    assert called == [] and sent == []
    # counted as what it was (nginx's code for a client that closed its request), not as the 500 of a bug
    assert metrics.value("adlrec_http_requests_total", method="PUT", route="unmatched", code="499") == 1
