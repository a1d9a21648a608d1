"""A remote MLflow server that does not answer is an error at once: MLflow's client retried for
minutes with no output (`adlrec profiles list` against a closed port ran past 5 minutes)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from adlrec.cli import main
from adlrec.errors import TrackingError
from adlrec.tracking import _READ_LIMITS, MODEL_NAME, Tracker, _read_error, check_server, prompt_reads
from tests.factories import make_profile
from tests.integration.test_profile_cli import cli


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "argv",
    [
        ["profiles", "list"],
        ["model", "list"],
        ["profile", "{tiny}", "--device", "emulate:2"],
        ["predict", "{tiny}", "--device", "emulate:2"],
    ],
)
def test_commands_say_at_once_that_the_server_does_not_answer(tmp_path, tiny_job_path, capsys, argv):
    uri = f"http://127.0.0.1:{closed_port()}"
    argv = [a.replace("{tiny}", str(tiny_job_path)) for a in argv]
    assert main([*argv, "--tracking-uri", uri, "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert f"the MLflow server at {uri} does not answer" in err and "--tracking-uri" in err, err
    assert "Traceback" not in err


def test_profile_asks_the_server_before_it_measures(tmp_path, capsys):
    """The sweep takes minutes: a store that does not answer is said before it, not after (here the job's
    build_dataset raises, which only a sweep would find)."""
    job = tmp_path / "model.py"
    job.write_text(
        "import torch\nPARAMS = {'batch_size': 2}\ndef build_dataset(cfg): raise RuntimeError('measured')\n"
        "def build_model(cfg): return torch.nn.Linear(1, 1)\ndef loss_fn(o, t): return o.sum()\n"
    )
    uri = f"http://127.0.0.1:{closed_port()}"
    argv = ["profile", str(job), "--device", "emulate:2", "--tracking-uri", uri, "--data-dir", str(tmp_path / "d")]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"the MLflow server at {uri} does not answer" in err and "measured" not in err, err
    assert not (tmp_path / "d").exists()


def test_a_server_gone_by_the_end_of_the_sweep_is_said_at_once_and_the_profile_kept(tmp_path):
    """Not after MLflow's minutes of retries while logging: the sweep's profile is kept for `profiles import`."""
    from adlrec.cli.profile import log_or_keep
    from adlrec.config import load_settings

    uri = f"http://127.0.0.1:{closed_port()}"
    tracker = Tracker(uri, "adlrec-profiles", origin="--tracking-uri")
    with pytest.raises(TrackingError) as err:
        log_or_keep(tracker, make_profile(), load_settings(tracking_uri=uri, data_dir=tmp_path))
    (kept,) = (tmp_path / "unlogged").iterdir()
    assert str(err.value).startswith(f"the MLflow server at {uri} does not answer")
    assert str(err.value).endswith(f"; the profile is kept in {kept}: `adlrec profiles import {kept}` logs it")


class _Refuses(http.server.BaseHTTPRequestHandler):
    status = 403

    def do_GET(self):  # noqa: N802 (the handler's name)
        self.send_response(self.status)
        self.end_headers()

    def log_message(self, *args):
        pass


# a 403: a proxy's login; a 503: a proxy whose server is down (one MLflow's client would retry)
@pytest.mark.parametrize("status", [403, 503])
def test_any_http_answer_is_a_server_that_is_there_and_other_uris_are_not_checked(tmp_path, status):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), type("_Answers", (_Refuses,), {"status": status}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        check_server(f"http://127.0.0.1:{server.server_address[1]}/")
    finally:
        server.shutdown()
        server.server_close()
    check_server(f"sqlite:///{tmp_path / 'mlflow.db'}")
    with pytest.raises(TrackingError, match="does not answer"):
        check_server(f"https://127.0.0.1:{closed_port()}")


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")  # MLflow's own, asked for
def test_the_probe_honours_mlflows_tls_settings(tmp_path, monkeypatch):
    """A server with its own certificate, which MLflow reaches through MLFLOW_TRACKING_SERVER_CERT_PATH
    or MLFLOW_TRACKING_INSECURE_TLS, is there; without either, TLS refuses it, and the error says so."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert)]
        + ["-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True,
        capture_output=True,
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"https://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(TrackingError, match="does not answer .*(SSL|CERTIFICATE)") as exc:
            check_server(uri)
        assert len(str(exc.value)) < 400, exc.value  # the cause, not the whole chain of requests' errors
        monkeypatch.setenv("MLFLOW_TRACKING_SERVER_CERT_PATH", str(cert))
        check_server(uri)
        monkeypatch.delenv("MLFLOW_TRACKING_SERVER_CERT_PATH")
        monkeypatch.setenv("MLFLOW_TRACKING_INSECURE_TLS", "true")
        check_server(uri)
    finally:
        server.shutdown()
        server.server_close()


class _Unavailable(http.server.BaseHTTPRequestHandler):
    """A proxy whose MLflow server is down: /health is the proxy's own, every API call a 503."""

    def do_GET(self):  # noqa: N802 (the handler's name)
        self.send_response(200 if self.path == "/health" else 503)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_GET

    def log_message(self, *args):
        pass


@pytest.fixture
def unavailable() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Unavailable)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


READING = {
    "profiles list": ["profiles", "list"],
    "profiles export": ["profiles", "export", "--out", "out"],
    "model list": ["model", "list"],
    "predict": ["predict", "{tiny}", "--device", "emulate:2", "--budget", "0.4", "--max-workers", "1"],
}


# Every reading command with the flag; the variable (the same resolution of the store, another name in the
# message) with one command: each case is a process of its own, seconds each.
@pytest.mark.parametrize(
    ("argv", "origin"),
    [(argv, "--tracking-uri") for argv in READING.values()] + [(READING["model list"], "MLFLOW_TRACKING_URI")],
    ids=[*READING, "model list, MLFLOW_TRACKING_URI"],
)
def test_reading_commands_give_up_on_a_server_that_fails_every_request_in_seconds(
    tmp_path, tiny_job_path, unavailable, argv, origin
):
    """MLflow retried each request 7 times over about 4 minutes: `profiles list` ended after 250 s with a
    page of urllib3's reprs, `model list` after 500 s with "no versions" and exit code 0, `predict` predicted
    with the analytic model as if none were registered."""
    argv = [a.replace("{tiny}", str(tiny_job_path)) for a in argv]
    flags, env = (["--tracking-uri", unavailable], {}) if origin == "--tracking-uri" else ([], {origin: unavailable})
    done = cli(*argv, *flags, cwd=tmp_path, env=env, timeout=90)  # minutes would be the bug
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"adlrec: error: the MLflow server at {unavailable} (set by {origin}) does not serve requests (too many 503 "
        "error responses, after 2 retries); check it, or set MLFLOW_HTTP_REQUEST_MAX_RETRIES and "
        "MLFLOW_HTTP_REQUEST_TIMEOUT to wait longer\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_read_keeps_the_retries_the_user_set(tmp_path, unavailable):
    done = cli("model", "list", "--tracking-uri", unavailable, env={"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}, timeout=90)
    assert done.returncode == 1 and "(too many 503 error responses, after 0 retries)" in done.stderr, done.stderr


def test_prompt_reads_limits_only_its_block_and_keeps_what_the_user_set(monkeypatch):
    """A command that reads and then writes (profile, model fit) must write with MLflow's patient retries."""
    for name in _READ_LIMITS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "300")
    with prompt_reads():
        assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == _READ_LIMITS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
        assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "300"
    assert {name: os.environ.get(name) for name in _READ_LIMITS} == {
        "MLFLOW_HTTP_REQUEST_MAX_RETRIES": None,
        "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": None,
        "MLFLOW_HTTP_REQUEST_TIMEOUT": "300",
    }


def test_a_failed_request_outside_prompt_reads_counts_mlflows_own_retries(monkeypatch):
    """A command that writes (profile, profiles import) keeps MLflow's default retries: the message says how many."""
    import requests
    from mlflow.environment_variables import MLFLOW_HTTP_REQUEST_MAX_RETRIES
    from mlflow.exceptions import MlflowException

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    try:  # as MLflow's client raises it: its own exception, from what requests raised
        try:
            raise requests.exceptions.ConnectionError("[Errno 111] Connection refused")
        except requests.exceptions.ConnectionError as cause:
            raise MlflowException(f"API request to http://h:5000/api failed with exception {cause}") from cause
    except MlflowException as exc:
        error = _read_error(exc, "http://h:5000", "--tracking-uri")
    assert str(error).startswith(
        "the MLflow server at http://h:5000 (set by --tracking-uri) does not serve requests "
        f"(Connection refused, after {MLFLOW_HTTP_REQUEST_MAX_RETRIES.default} retries); "
    )


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory) -> Iterator[str]:
    """A real `mlflow server` on a SQLite store, with its artifacts served."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = closed_port()
    command = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"]
    command += ["--backend-store-uri", f"sqlite:///{root / 'm.db'}", "--artifacts-destination", str(root / "a")]
    env = os.environ | {"MLFLOW_DISABLE_TELEMETRY": "true"}
    server = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                check_server(uri, timeout_s=1)
                break
            except TrackingError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("mlflow server did not start")
                time.sleep(0.5)
        yield uri
    finally:
        server.terminate()
        server.wait(30)


def test_reading_a_real_server_lists_what_it_holds_and_no_model_is_none(tmp_path, mlflow_server, capsys):
    """A registry with no adlrec-throughput is "no versions" and no champion, not a server that fails."""
    local = tmp_path / "artifacts"  # the CLI's artifact root: for a local store only, the server keeps its own
    tracker = Tracker(mlflow_server, "adlrec-profiles", artifact_root=local)
    tracker.log_profile(make_profile())
    assert tracker.client.get_experiment_by_name("adlrec-profiles").artifact_location.startswith("mlflow-artifacts:")
    assert not local.exists()
    assert main(["profiles", "list", "--tracking-uri", mlflow_server]) == 0
    assert " w " in capsys.readouterr().out
    assert main(["model", "list", "--tracking-uri", mlflow_server]) == 0
    assert capsys.readouterr().out == f"no versions of {MODEL_NAME} in {mlflow_server}\n"
    assert main(["profiles", "export", "--tracking-uri", mlflow_server, "--out", str(tmp_path / "out")]) == 0
    assert "exported 1 profile to" in capsys.readouterr().out


def test_logging_to_a_real_server_leaves_stdout_to_adlrec(tmp_path, tiny_job_path, mlflow_server, capsys):
    """MLflow's client prints "View run ... at: http://..." on stdout when a run on a server ends: `profile --json`
    printed it before the JSON, which then did not parse."""
    import json

    from adlrec.tracking import log_simulation

    argv = ["profile", str(tiny_job_path), "--device", "emulate:2", "--budget", "0.4", "--max-workers", "1", "--json"]
    assert main([*argv, "--tracking-uri", mlflow_server, "--data-dir", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert Tracker(mlflow_server, "adlrec-profiles").client.get_run(out["run_id"]).info.status == "FINISHED"
    log_simulation(Tracker(mlflow_server, "adlrec-simulations"), {"policies": "even"}, [], "policy\n")
    assert capsys.readouterr().out == ""


def test_a_servers_versions_are_listed_in_number_order_past_nine(mlflow_server):
    """A server's registry gives versions as text: in text order, v10 and v11 came before v2."""
    from adlrec.tracking import ModelRegistry

    registry = ModelRegistry(mlflow_server)
    registry.client.create_registered_model(MODEL_NAME)
    try:
        for _ in range(11):
            registry.client.create_model_version(MODEL_NAME, source="s3://bucket/model")  # a source it accepts
        assert [str(mv.version) for mv in registry.versions()] == [str(v) for v in range(1, 12)]
    finally:  # the server is the module's: the other tests find no model there
        registry.client.delete_registered_model(MODEL_NAME)


class _FailsSearches(_Unavailable):
    """A server that finds the experiment and then fails every other request: a search is what fails."""

    def do_GET(self):  # noqa: N802 (the handler's name)
        if "/experiments/get-by-name" not in self.path:
            return super().do_GET()
        body = b'{"experiment": {"experiment_id": "1", "name": "adlrec-profiles", "lifecycle_stage": "active"}}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = _Unavailable.do_GET


class _FailsDownloads(_FailsSearches):
    """A server that finds the experiment and its one complete run, and then fails to send the run's profile.json."""

    def do_POST(self):  # noqa: N802 (the handler's name)
        if "/runs/search" not in self.path:
            return super().do_POST()
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        run = {
            "info": {
                "run_id": "r1",
                "experiment_id": "1",
                "status": "FINISHED",
                "artifact_uri": "mlflow-artifacts:/1/r1",
            },
            "data": {"tags": [{"key": "adlrec.complete", "value": "true"}]},
        }
        body = json.dumps({"runs": [run]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.mark.parametrize("handler", [_FailsSearches, _FailsDownloads], ids=["search", "download"])
def test_a_request_that_fails_after_the_experiment_is_found_is_one_line(tmp_path, handler):
    """Not a traceback, and not a run skipped as unreadable: the server failed, and the command says so."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    uri = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        done = cli("profiles", "list", "--tracking-uri", uri, cwd=tmp_path, timeout=90)
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 1, done.stderr
    assert done.stderr.startswith(
        f"adlrec: error: the MLflow server at {uri} (set by --tracking-uri) does not serve requests (too many 503 "
    ), done.stderr
