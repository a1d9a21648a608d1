"""A remote MLflow server that does not answer is an error at once: MLflow's client retried for
minutes with no output (`adlrec profiles list` against a closed port ran past 5 minutes)."""

from __future__ import annotations

import http.server
import shutil
import socket
import ssl
import subprocess
import threading

import pytest

from adlrec.cli import main
from adlrec.errors import TrackingError
from adlrec.tracking import check_server


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


class _Refuses(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the handler's name)
        self.send_response(403)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_any_http_answer_is_a_server_that_is_there_and_other_uris_are_not_checked(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Refuses)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        check_server(f"http://127.0.0.1:{server.server_address[1]}/")  # a 403 (a proxy's login): it is there
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
