"""Binding rules and the metrics text, without a server."""

from __future__ import annotations

import signal
import socket

import pytest

from adlrec.config import load_settings
from adlrec.errors import UsageError
from adlrec.service.metrics import Metrics
from adlrec.service.server import check_bind, is_loopback


@pytest.mark.parametrize(
    ("host", "loop"),
    [("127.0.0.1", True), ("::1", True), ("[::1]", True), ("localhost", True), ("0.0.0.0", False), ("[::]", False)],
)
def test_loopback_is_recognised(host, loop):
    assert is_loopback(host) is loop


def test_without_a_token_only_loopback_may_be_bound(tmp_path):
    with pytest.raises(UsageError, match="without a token"):
        check_bind(load_settings(data_dir=tmp_path, service_host="0.0.0.0"))
    assert "loopback only" in check_bind(load_settings(data_dir=tmp_path))
    assert "bearer token" in check_bind(load_settings(data_dir=tmp_path, service_host="0.0.0.0", service_token="t"))


def test_an_empty_token_is_refused_and_a_token_s_surrounding_whitespace_is_not_part_of_it(
    tmp_path, monkeypatch, capsys
):
    from adlrec.cli import main
    from adlrec.service.deps import token_ok
    from adlrec.tracking import Tracker

    monkeypatch.setenv("ADLREC_SERVICE_TOKEN", "")  # what `$(cat missing-file)` gives: not "any Bearer"
    for host in ("0.0.0.0", "127.0.0.1"):
        with pytest.raises(UsageError, match=r"the service token is empty \(ADLREC_SERVICE_TOKEN or --token\)"):
            check_bind(load_settings(data_dir=tmp_path, service_host=host))
    # the user's command line: one line, exit 2 (its port taken, so that a regression exits rather than serving)
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert main(["serve", "--host", "0.0.0.0", "--port", port, "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the service token is empty" in err and "Traceback" not in err
    # commands that never use the token are not stopped by an empty one
    Tracker(f"sqlite:///{tmp_path}/mlflow.db", "adlrec-profiles")  # a store to list (a missing one is exit 2)
    assert main(["profiles", "list", "--data-dir", str(tmp_path)]) == 0
    blank = load_settings(service_token=" \n")
    assert not token_ok(blank, "Bearer") and not token_ok(blank, "Bearer ") and not token_ok(blank, "")
    s = load_settings(service_token="s3cret\n")  # read from a file that ends with a newline
    assert token_ok(s, "Bearer s3cret") and not token_ok(s, "Bearer") and not token_ok(s, "Bearer s3cre")
    assert token_ok(s, "Bearer  s3cret")  # RFC 6750: "Bearer" 1*SP token


@pytest.mark.parametrize("token", ["t\u00f6k", "\u201cs3cret\u201d", "line1\nline2"])
def test_a_token_no_client_can_send_is_refused_at_start(tmp_path, monkeypatch, capsys, token):
    """A bearer token travels in an HTTP header (printable ASCII).  Before, the service started with one that had
    another character (a typographic quote pasted with it, a two-line token file) and answered every write 401:
    adlrec's client could not even be built with it (UnicodeEncodeError), a UTF-8 sender's bytes never matched."""
    from adlrec.cli import main

    with pytest.raises(UsageError, match=r"not printable ASCII \(position \d+ of \d+\)") as err:
        check_bind(load_settings(data_dir=tmp_path, service_host="0.0.0.0", service_token=token))
    assert token not in str(err.value)  # a secret: its position only
    monkeypatch.setenv("ADLREC_SERVICE_TOKEN", token)
    with socket.socket() as taken:  # a regression exits rather than serving
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert main(["serve", "--port", port, "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "ADLREC_SERVICE_TOKEN or --token" in err and "Traceback" not in err
    assert "listening" in check_bind(load_settings(data_dir=tmp_path, service_token="a-b_c.d~e+f/g=h i"))


def test_settings_reject_unknown_policies_and_the_token_stays_secret(tmp_path):
    with pytest.raises(ValueError, match="service_policy"):
        load_settings(service_policy="random")
    s = load_settings(service_token="hunter2")
    assert "hunter2" not in repr(s) and s.service_token.get_secret_value() == "hunter2"
    assert load_settings(data_dir=tmp_path).resolved_store_url == f"sqlite:///{tmp_path.resolve() / 'service.db'}"


def test_metrics_render_counters_gauges_and_a_cumulative_histogram_per_route():
    m = Metrics()
    m.inc("adlrec_heartbeats_total")
    m.inc("adlrec_recomputes_total", trigger='we"ird\nline')
    for s in (0.0008, 0.003, 9.0):
        m.observe(s, "/a")
    m.observe(0.02, "/b")
    m.observe(0.01, "/b")  # on a bucket's bound: in it (le is "less than or equal")
    text = m.render({"adlrec_jobs": {(("status", "active"),): 2.0}})
    assert "# TYPE adlrec_heartbeats_total counter\nadlrec_heartbeats_total 1\n" in text
    assert 'adlrec_recomputes_total{trigger="we\\"ird\\nline"} 1' in text
    assert 'adlrec_http_request_seconds_bucket{route="/a",le="0.001"} 1' in text
    assert 'adlrec_http_request_seconds_bucket{route="/a",le="0.005"} 2' in text
    assert 'adlrec_http_request_seconds_bucket{route="/a",le="1"} 2' in text
    assert 'adlrec_http_request_seconds_bucket{route="/a",le="2.5"} 2' in text
    assert 'adlrec_http_request_seconds_bucket{route="/a",le="+Inf"} 3' in text
    assert 'adlrec_http_request_seconds_sum{route="/a"} 9.003800' in text
    assert 'adlrec_http_request_seconds_bucket{route="/b",le="0.005"} 0' in text
    assert 'adlrec_http_request_seconds_bucket{route="/b",le="0.01"} 1' in text
    assert 'adlrec_http_request_seconds_count{route="/b"} 2' in text
    assert '# TYPE adlrec_jobs gauge\nadlrec_jobs{status="active"} 2' in text


def test_metric_values_are_rendered_exactly_past_a_million():
    """Values were written with ``{:g}``, 6 significant digits: a counter past a million stood still between
    scrapes (1.23457e+06 for 1234567 and for 1234568), and a rate over it read 0."""
    m = Metrics()
    m.inc("adlrec_heartbeats_total", 1_234_567)
    m.inc("adlrec_heartbeats_total")
    m.set("adlrec_recompute_seconds_last", 0.1234567891)
    text = m.render()
    assert "adlrec_heartbeats_total 1234568\n" in text
    assert "adlrec_recompute_seconds_last 0.1234567891\n" in text


def test_a_counter_without_help_text_is_served_untyped_not_left_out():
    m = Metrics()
    m.inc("adlrec_something_new_total", kind="x")
    assert '# TYPE adlrec_something_new_total untyped\nadlrec_something_new_total{kind="x"} 1\n' in m.render()


def test_adlrec_serve_refuses_open_writes_on_a_public_interface(tmp_path, capsys):
    from adlrec.cli import main

    assert main(["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)]) == 2
    assert "refusing to listen on 0.0.0.0 without a token" in capsys.readouterr().err
    assert main(["serve", "--policy", "random", "--data-dir", str(tmp_path)]) == 2
    assert "service_policy" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("notaurl", "job store URL 'notaurl' is not a database URL; expected sqlite:///"),
        ("nope://x", "job store nope://x: no database driver 'nope'; expected sqlite:///"),
    ],
)
def test_adlrec_serve_names_a_store_url_it_cannot_use(tmp_path, capsys, url, says):
    from adlrec.cli import main

    assert main(["serve", "--port", "0", "--store-url", url, "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert says in err and err.count("\n") == 1 and "ADLREC_SERVICE_STORE_URL" in err
    assert not tmp_path.exists() or not any(tmp_path.iterdir())  # refused before the MLflow store was made


def test_adlrec_serve_refuses_a_store_url_in_one_line_before_any_log_line(tmp_path):
    """As a user runs it: the refusal came after the start-up's log lines (no token, uvicorn's parser)."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    data = tmp_path / "data"
    cmd = [
        sys.executable,
        "-m",
        "adlrec.cli",
        "serve",
        "--port",
        "0",
        "--store-url",
        "notaurl",
        "--data-dir",
        str(data),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("adlrec: error: job store URL 'notaurl' is not a database URL;"), done.stderr
    assert done.stderr.count("\n") == 1 and not data.exists()


def test_a_store_url_hides_its_password_and_a_database_that_cannot_open_exits_1(tmp_path):
    from adlrec.service.store import JobStore, StoreUnavailable

    (tmp_path / "dir.db").mkdir()  # a folder where the database file should be
    with pytest.raises(StoreUnavailable, match="cannot open it: unable to open database file") as err:
        JobStore(f"sqlite:///{tmp_path / 'dir.db'}")
    assert err.value.exit_code == 1
    (tmp_path / "junk.db").write_text("not a database")
    with pytest.raises(StoreUnavailable, match="cannot open it: file is not a database"):  # was a traceback
        JobStore(f"sqlite:///{tmp_path / 'junk.db'}")
    assert (tmp_path / "junk.db").read_text() == "not a database"
    for memory in ("sqlite://", "sqlite:///:memory:", "sqlite:///file:x?mode=memory&uri=true"):
        # each pooled connection would be a database of its own: every route answered 500
        with pytest.raises(UsageError, match="an in-memory SQLite database cannot hold the service's state"):
            JobStore(memory)
    with pytest.raises(UsageError) as err:
        JobStore("nope://user:hunter2@host/db")
    assert "hunter2" not in str(err.value) and "user:***@host" in str(err.value)


def test_adlrec_serve_refuses_a_tracking_uri_mlflow_cannot_open(tmp_path, capsys):
    from adlrec.cli import main

    assert main(["serve", "--port", "0", "--tracking-uri", str(tmp_path / "mlruns"), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "a folder is MLflow's file store, which MLflow 3 no longer serves; expected sqlite:///" in err
    assert err.rstrip().endswith("(set by --tracking-uri)")  # the flag that chose it, not every way one could
    assert not (tmp_path / "service.db").exists()  # refused before the job store was opened


def test_adlrec_serve_stopped_with_sigterm_exits_0_and_leaks_nothing(tmp_path):
    """docker stop / systemd send SIGTERM: uvicorn shuts down, then raises it again; the default handler
    killed the process there, without finalizers, and the resource tracker reported the live writer's
    semaphores as leaked."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    cmd = [sys.executable, "-m", "adlrec.cli", "serve", "--port", "0", "--data-dir", str(tmp_path)]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, env=env)
    lines = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if "Application startup complete" in line:
            time.sleep(1.5)  # the live writer process has started by now
            proc.send_signal(signal.SIGTERM)
            break
    rest = proc.communicate(timeout=60)[1]
    err = "".join(lines) + rest
    assert "Application startup complete" in err, err
    assert proc.returncode == 0, err
    assert "leaked" not in err and "Traceback" not in err, err


def _ignores(pid: int, sig: int) -> bool:
    with open(f"/proc/{pid}/status") as f:
        mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigIgn:"))
    return bool(mask & (1 << (sig - 1)))


def _stop_serve_group(tmp_path, sig: int, children_ready) -> tuple[int, str, list, list[float]]:
    """``adlrec serve`` in a process group of its own (as a shell's foreground job or a systemd unit has), a
    job and a heartbeat of 42 samples/s, then ``sig`` to the whole group once ``children_ready(children)``.
    Returns its exit code, its stderr, its two children (the live-metrics writer and the recompute process)
    and the throughputs its writer logged to MLflow."""
    import os
    import re
    import sys
    import time

    import httpx
    import psutil

    from adlrec.tracking import LIVE_EXPERIMENT, LiveRuns
    from tests.terminal import own_group

    env = dict(os.environ, MLFLOW_DISABLE_TELEMETRY="true")
    cmd = [sys.executable, "-m", "adlrec.cli", "serve", "--port", "0", "--data-dir", str(tmp_path)]
    with own_group(cmd, stdout=None, env=env) as proc:  # SIGINT as a terminal has it (see 7bcd746)
        lines = []
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any("Uvicorn running on" in x for x in lines):
            lines.append(proc.stderr.readline())
        port = int(re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", "".join(lines)).group(1))
        url = f"http://127.0.0.1:{port}"
        job = httpx.post(f"{url}/jobs", json={"job_id": "j", "node": "n", "curve": [1.0, 2.0]}).json()["job_id"]
        httpx.post(f"{url}/jobs/{job}/heartbeat", json={"throughput": 42.0, "workers": 1}).raise_for_status()
        kids = []
        while time.monotonic() < deadline:
            kids = [c for c in psutil.Process(proc.pid).children() if "spawn_main" in " ".join(c.cmdline())]
            if children_ready(kids):
                break
            time.sleep(0.05)
        os.killpg(proc.pid, sig)
        err = "".join(lines) + proc.communicate(timeout=120)[1]
    client = LiveRuns(f"sqlite:///{tmp_path / 'mlflow.db'}").client
    (run,) = client.search_runs([client.get_experiment_by_name(LIVE_EXPERIMENT).experiment_id])
    return proc.returncode, err, kids, [m.value for m in client.get_metric_history(run.info.run_id, "throughput")]


def test_adlrec_serve_stopped_with_sigterm_to_its_process_group_exits_0_and_its_writer_writes_what_it_holds(tmp_path):
    """systemd stops a service by sending SIGTERM to its whole control group, and ``timeout`` to its process
    group: the live-metrics writer and the recompute process died of it while the service shut down, the writer
    with the samples it held (and the service logged 'writer died ... starting a new one')."""
    import psutil

    # once both children are past their first line, from which they ignore SIGTERM
    ready = lambda kids: len(kids) == 2 and all(_ignores(c.pid, signal.SIGTERM) for c in kids)  # noqa: E731
    rc, err, kids, logged = _stop_serve_group(tmp_path, signal.SIGTERM, ready)
    assert len(kids) == 2, kids  # the live-metrics writer and the recompute process
    assert rc == 0, err
    assert "Traceback" not in err and "writer died" not in err, err
    assert not any(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in kids)
    assert logged == [42.0]


def test_adlrec_serve_stopped_with_ctrl_c_in_a_terminal_exits_0_and_its_writer_writes_what_it_holds(tmp_path):
    """A terminal's Ctrl-C goes to the whole foreground process group: the live-metrics writer and the recompute
    process each printed a KeyboardInterrupt traceback and died, the writer with the samples it held.  Sent
    right after start-up, while the children still import."""
    ignoring = []

    def ready(kids) -> bool:  # at once: they ignore SIGINT from exec on
        ignoring.extend(_ignores(c.pid, signal.SIGINT) for c in kids)
        return True

    rc, err, _, logged = _stop_serve_group(tmp_path, signal.SIGINT, ready)
    assert rc == 0, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and "writer died" not in err, err
    assert ignoring == [True, True]  # the live-metrics writer and the recompute process
    assert logged == [42.0]


def test_adlrec_serve_on_a_taken_port_or_a_foreign_host_is_one_line_before_start_up(tmp_path, capsys):
    import socket

    from adlrec.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--data-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}: Address already in use; expected a free port (--port)" in err
    assert err.count("\n") == 1 and not (tmp_path / "service.db").exists()  # refused before the stores
    assert not (tmp_path / "mlflow.db").exists()  # the MLflow store too: opening it takes seconds
    assert main(["serve", "--host", "999.1.1.1", "--token", "t", "--data-dir", str(tmp_path)]) == 2
    assert "cannot listen on 999.1.1.1:8470:" in capsys.readouterr().err
