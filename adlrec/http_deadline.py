"""A deadline for a whole HTTP call, where httpx's timeouts bound each connect, read and write.

A peer that answers a byte at a time (a broken proxy) satisfies every per-read timeout and can hold
one call for minutes; a training loop that calls the service itself would wait that long.  Here every
network operation of a call waits at most what is left until the calling thread's deadline, and one
that starts after it raises a timeout, which httpx reports as it does its own.

    backend = DeadlineBackend()
    client = httpx.Client(transport=deadline_transport(backend))
    with backend.deadline(3.0):
        client.get(url)            # httpx.ReadTimeout (or ConnectTimeout, WriteTimeout) after 3 s at most
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

__all__ = ["DeadlineBackend", "deadline_transport"]

log = logging.getLogger("adlrec.client")


class DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's synchronous sockets, each operation's timeout cut to the calling thread's deadline."""

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()
        self._local = threading.local()

    @contextmanager
    def deadline(self, seconds: float) -> Iterator[None]:
        """Operations in this thread, inside the block, end at most ``seconds`` from now."""
        before = getattr(self._local, "at", None)
        self._local.at = time.monotonic() + seconds
        try:
            yield
        finally:
            self._local.at = before

    def left(self, timeout: float | None, error: type[Exception]) -> float | None:
        """``timeout`` cut to what is left of the deadline; ``error`` once nothing is."""
        at = getattr(self._local, "at", None)
        if at is None:
            return timeout
        rest = at - time.monotonic()
        if rest <= 0:
            raise error("the call's deadline passed")
        return rest if timeout is None else min(timeout, rest)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = self.left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, timeout, local_address, socket_options), self)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        timeout = self.left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, timeout, socket_options), self)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream, backend: DeadlineBackend) -> None:
        self._inner = inner
        self._backend = backend

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._backend.left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._backend.left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        timeout = self._backend.left(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, timeout), self._backend)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


def deadline_transport(backend: DeadlineBackend) -> httpx.HTTPTransport:
    """httpx's own transport (its TLS, limits and error mapping) over ``backend``'s sockets.

    httpx takes no network backend, so this sets the one of the connection pool it made, before any
    connection exists (a test checks that a dripping answer is cut off, so an httpx or httpcore that
    renamed either attribute is seen there).  Without them the transport is httpx's as it is: each
    operation still times out, the call as a whole does not (logged once)."""
    transport = httpx.HTTPTransport()
    pool = getattr(transport, "_pool", None)
    if not hasattr(pool, "_network_backend"):  # pragma: no cover - another httpx or httpcore
        log.warning("adlrec client: this httpx/httpcore has no pool backend to set; calls have no overall deadline")
        return transport
    pool._network_backend = backend  # type: ignore[union-attr]
    return transport
