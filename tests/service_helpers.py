"""Helpers for the service tests: a settable clock, a real uvicorn server in a thread, payloads."""

from __future__ import annotations

import atexit
import contextlib
import functools
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from adlrec.config import Settings, load_settings


class ManualClock:
    """A clock the test moves by hand (seconds since the epoch)."""

    def __init__(self, t: float = 1_800_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@functools.cache
def _migrated_mlflow_store() -> Path:
    """An empty MLflow SQLite store, made once per test process the way MLflow makes one (its migrations take
    about a second; a copy, milliseconds), and removed at exit."""
    from mlflow.tracking import MlflowClient

    folder = Path(tempfile.mkdtemp(prefix="adlrec-test-store-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    path = folder / "mlflow.db"
    MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


def service_settings(tmp: Path, **overrides: Any) -> Settings:
    """Settings on a temp data dir with a real SQLite MLflow store; no background recompute unless asked.

    The MLflow store (``tmp/mlflow.db``, unless ``tracking_uri`` is given) starts as a copy of an empty
    migrated one when the test has not made it yet: the service would make the same, a second later.

    No live runs unless asked (``service_live_runs=True``): their writer is a process of its own that
    imports MLflow and migrates a fresh store, about 4 s at every stop of a service that heard a heartbeat,
    for tests about something else. test_service_live.py and test_service_model.py cover them.
    """
    base = dict(
        data_dir=tmp / "data",
        tracking_uri=f"sqlite:///{tmp / 'mlflow.db'}",
        service_interval_s=3600,
        service_debounce_s=3600,
        service_token="s3cret",
        service_node_cores=8,
        service_node_memory_mb=16_000,
        service_threshold=0.0,
        service_live_runs=False,
    )
    mlflow_db = tmp / "mlflow.db"
    if "tracking_uri" not in overrides and not mlflow_db.exists():
        mlflow_db.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(_migrated_mlflow_store(), mlflow_db)
    return load_settings(**(base | overrides))


class LiveServer:
    """A real uvicorn server on 127.0.0.1 (port 0: any free port), run in a thread."""

    def __init__(self, app: Any, port: int = 0) -> None:
        self.server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on", access_log=False)
        )
        self.thread = threading.Thread(target=self.server.run, name="test-uvicorn", daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    @property
    def port(self) -> int:
        return self.server.servers[0].sockets[0].getsockname()[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        # its shutdown writes what the service holds (heartbeats, live samples: a writer process that may still be
        # importing MLflow on a loaded machine); a test that read the stores after 30 s read them before that
        self.thread.join(timeout=180)
        if self.thread.is_alive():
            raise RuntimeError("uvicorn did not stop within 180 s")


@contextlib.contextmanager
def server_with_breakable_store(tmp: Path) -> Iterator[tuple[LiveServer, httpx.Client, Callable[[], None]]]:
    """A live service on a SQLite job store in ``tmp/store``, a client of it, and a function that makes the
    store stop answering: its folder removed and its pooled connections dropped, as a restarted database
    server drops them (removing the folder alone is not enough: open SQLite connections keep the file)."""
    from adlrec.service import create_app
    from adlrec.service.store import JobStore

    folder = tmp / "store"
    store = JobStore(f"sqlite:///{folder / 'service.db'}")

    def break_store() -> None:
        shutil.rmtree(folder)
        store.close()

    try:
        with (
            LiveServer(create_app(service_settings(tmp), store=store, flush_s=3600)) as srv,
            httpx.Client(base_url=srv.url, timeout=10) as http,
        ):
            yield srv, http, break_store
    finally:
        store.close()


PROBE = {
    "ceiling": 500.0,
    "prep_rate_0": 100.0,
    "prep_rate_1": 90.0,
    "prep_rate_2": 170.0,
    "fetch_extra_s": 0.0,
    "batch_size": 32,
    "cores": 8,
    "device_kind": "cuda",
}
