"""Run the service under uvicorn, refusing to expose open writes beyond loopback."""

from __future__ import annotations

import importlib.util
import ipaddress
import logging
import signal
import socket
import sys
import threading

from adlrec.client import token_problem
from adlrec.config import Settings
from adlrec.errors import UsageError

__all__ = ["check_bind", "check_listen", "check_tracking", "is_loopback", "serve"]

log = logging.getLogger("adlrec.service")

SWITCH_INTERVAL_S = 0.0005


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and names that resolve only to them (e.g. localhost)."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        addrs = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except OSError:
        return False
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def check_bind(settings: Settings) -> str:
    """The line to log at start; raises UsageError for open writes on a non-loopback interface."""
    host = settings.service_host
    if settings.service_token is not None and not settings.service_token.get_secret_value():
        # `ADLREC_SERVICE_TOKEN=$(cat missing-file)`: serving would let through any `Authorization: Bearer`.
        raise UsageError(
            "the service token is empty (ADLREC_SERVICE_TOKEN or --token); "
            "give a non-empty token, or unset it to bind loopback only"
        )
    if settings.service_token is not None:
        problem = token_problem(settings.service_token.get_secret_value())
        if problem is not None:  # no client could send it: every write would be 401
            raise UsageError(
                f"the service token (ADLREC_SERVICE_TOKEN or --token) {problem}; clients send it in an HTTP "
                "header, which carries printable ASCII only: give such a token (openssl rand -hex 16)"
            )
        return f"writes need the bearer token; listening on {host}:{settings.service_port}"
    if not is_loopback(host):
        raise UsageError(
            f"refusing to listen on {host} without a token: set ADLREC_SERVICE_TOKEN (or --token), or bind 127.0.0.1"
        )
    return f"no token configured: writes are open, so the service listens on loopback only ({host})"


def check_listen(settings: Settings) -> None:
    """Raise UsageError when the service could not listen on its host and port (taken, or not an
    address of this machine), before its start-up spends seconds on the stores and the model; uvicorn
    would say so only after, with its own exit code 3."""
    host, port = settings.service_host, settings.service_port
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
            probe.bind(address)
    except OSError as exc:
        raise UsageError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; expected a free port (--port) on an address "
            "of this machine (--host)"
        ) from None


def check_tracking(settings: Settings, origin: str = "") -> None:
    """Raise UsageError when the tracking URI names no store MLflow can open (a folder, an unknown
    scheme, a missing driver), naming ``origin``, the flag or variable that chose it, when known.  A store
    that is merely away is not checked here: the model falls back to the analytic one and the live writer
    retries."""
    from adlrec.tracking import Tracker

    Tracker(settings.resolved_tracking_uri, settings.experiment, settings.artifact_root, origin)


def serve(settings: Settings, origin: str = "") -> None:
    """Start uvicorn in the foreground until interrupted.  ``origin``: what chose the tracking store, for a
    refusal to name (``adlrec.cli.common.store_source``)."""
    import uvicorn

    from adlrec.service.app import create_app
    from adlrec.service.store import check_store_url

    line = check_bind(settings)
    check_listen(settings)
    check_store_url(settings.resolved_store_url)  # before the MLflow store is made, and before any log line
    check_tracking(settings, origin)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # it logs every run at INFO
    log.warning(line) if settings.service_token is None else log.info(line)
    # Requests are served on the event loop while recomputes and flushes run in threads.  With
    # CPython's default 5 ms GIL switch interval, each socket call the loop makes (which releases the
    # GIL) can cost it 5 ms behind a busy thread, so one recompute stalls every request for its
    # whole duration; a 0.5 ms interval bounds that wait.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    http, loop = _fast("httptools", "h11"), _fast("uvloop", "asyncio")
    log.info("uvicorn: HTTP parser %s, event loop %s", http, loop)
    if (http, loop) != ("httptools", "uvloop"):
        log.warning(
            "install uvicorn[standard] (httptools, uvloop): with %s and %s a request costs more CPU", http, loop
        )
    app = create_app(settings)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_after_sigterm)
    uvicorn.run(
        app,
        host=settings.service_host,
        port=settings.service_port,
        http=http,
        loop=loop,
        log_level="info",
        access_log=False,
    )


def _exit_after_sigterm(signum: int, frame: object) -> None:
    """Exit normally on SIGTERM (``docker stop``, systemd): uvicorn shuts down gracefully and then raises
    the signal again; under the default handler the process would die there without running its
    finalizers, and the resource tracker would report the live writer's queue semaphores as leaked."""
    raise SystemExit(0)


def _fast(module: str, fallback: str) -> str:
    """``module`` when it is installed (the C implementations uvicorn[standard] brings), else ``fallback``."""
    return module if importlib.util.find_spec(module) is not None else fallback
