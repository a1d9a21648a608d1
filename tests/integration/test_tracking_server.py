"""A remote MLflow server that does not answer is an error at once: MLflow's client retried for
minutes with no output (`adlrec profiles list` against a closed port ran past 5 minutes)."""

from __future__ import annotations

import http.server
import socket
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
