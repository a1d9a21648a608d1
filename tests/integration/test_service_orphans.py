"""`adlrec serve` killed by SIGKILL: its children (the live-metrics writer, the recompute process,
multiprocessing's resource tracker) exit within seconds instead of living on as orphans, and the
writer first writes the samples it held."""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import httpx
import psutil
import pytest

from adlrec.tracking import LIVE_EXPERIMENT, LIVE_JOB_TAG, LiveRuns

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="orphan handling is checked on Linux")

BOUND_S = 15.0  # how long the children may take to exit after their parent's death


def _wait_for(what: str, check, timeout_s: float, log: Path | None = None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}" + (f"\n{log.read_text()}" if log is not None else ""))


def _alive(p: psutil.Process) -> bool:
    """Still running: a zombie (exited, not yet reaped by whatever adopted it) counts as gone."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_survivors(procs: list[psutil.Process]) -> None:
    for p in procs:
        if _alive(p):
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass


def _spawned(p: psutil.Process) -> bool:
    try:
        return "spawn_main" in " ".join(p.cmdline())
    except psutil.Error:
        return False


def test_children_of_adlrec_serve_exit_when_it_is_killed_with_sigkill(tmp_path):
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    log = tmp_path / "serve.log"
    cmd = [sys.executable, "-m", "adlrec.cli", "serve", "--port", "0", "--data-dir", str(tmp_path / "data")]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    server = psutil.Process(proc.pid)
    children: list[psutil.Process] = []
    try:
        port = _wait_for(
            "uvicorn to listen",
            lambda: (m := re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", log.read_text())) and m[1],
            120,
            log,
        )
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).status_code == 200
        # the recompute process (started with the service) and the live writer (at the first flush)
        _wait_for("both spawned children", lambda: sum(map(_spawned, server.children(recursive=True))) >= 2, 60, log)
        time.sleep(1.0)  # past their start-up: the killed parent is the one they were running under
        children = server.children(recursive=True)
        assert sum(map(_spawned, children)) == 2, [c.cmdline() for c in children]

        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
        t0 = time.monotonic()
        while time.monotonic() - t0 < BOUND_S and any(map(_alive, children)):
            time.sleep(0.1)
        gone_after = time.monotonic() - t0
        left = [(c.pid, c.cmdline()) for c in children if _alive(c)]
        assert not left, f"still running {BOUND_S:.0f} s after the service was killed: {left}\n{log.read_text()}"
        print(f"{len(children)} children gone {gone_after:.1f} s after SIGKILL of the service")
        text = log.read_text()
        assert re.search(r"the live-metrics writer \(pid \d+\): the service \(pid \d+\) is gone", text), text
        assert re.search(r"the recompute process \(pid \d+\): the service \(pid \d+\) is gone", text), text
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
        _kill_survivors(children)


PARENT = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from adlrec.service.live import LiveLog

    uri, art = sys.argv[1], Path(sys.argv[2])
    live = LiveLog(uri, art, period_s=3600.0)  # a sample is held for up to an hour before its write
    t = time.time()
    live.record("orphaned-job", "n0", t, {"throughput": 42.0}, t)
    live.flush()
    print(live._proc.pid, flush=True)
    time.sleep(3600)
    """
)


def test_a_writer_whose_service_is_killed_writes_what_it_holds_and_exits(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    log = tmp_path / "parent.log"
    with log.open("w") as err:
        parent = subprocess.Popen(
            [sys.executable, "-c", PARENT, uri, str(tmp_path / "art")], stdout=subprocess.PIPE, stderr=err, env=env
        )
    writer: list[psutil.Process] = []
    try:
        writer.append(psutil.Process(int(parent.stdout.readline())))

        def connected() -> bool:  # the writer has connected to MLflow once the live experiment exists
            try:
                with sqlite3.connect(tmp_path / "mlflow.db") as db:
                    return bool(db.execute("SELECT 1 FROM experiments WHERE name = ?", (LIVE_EXPERIMENT,)).fetchall())
            except sqlite3.Error:
                return False

        _wait_for("the writer's connection to MLflow", connected, 120, log)
        time.sleep(0.5)
        parent.kill()
        parent.wait(30)
        _wait_for(f"the writer to exit within {BOUND_S:.0f} s", lambda: not _alive(writer[0]), BOUND_S, log)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait(30)
        _kill_survivors(writer)
    assert "the live-metrics writer" in log.read_text() and "is gone" in log.read_text()

    client = LiveRuns(uri).client
    runs = client.search_runs([LiveRuns(uri).experiment_id], f"tags.`{LIVE_JOB_TAG}` = 'orphaned-job'")
    assert len(runs) == 1
    assert [m.value for m in client.get_metric_history(runs[0].info.run_id, "throughput")] == [42.0]
    assert runs[0].info.status == "RUNNING"  # the job did not end: a restarted service writes on into it
