"""`adlrec status` against a real service on port 0: what a terminal on the node shows of it."""

from __future__ import annotations

import http.server
import json
import socket
import threading

import httpx
import pytest

from adlrec.cli import main
from adlrec.cli.status import ServiceError, fetch_status
from adlrec.service import create_app
from tests.service_helpers import LiveServer, server_with_breakable_store, service_settings

AUTH = {"Authorization": "Bearer s3cret"}
STEEP = [10.0, 50.0, 90.0, 100.0, 100.0, 100.0]
RISING = [10.0, 30.0, 50.0, 70.0, 90.0, 100.0]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("status")
    with LiveServer(create_app(service_settings(tmp))) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        assert http.put("/nodes/gpu-01", json={"cores": 12, "memory_mb": 64_000}, headers=AUTH).status_code == 200
        assert http.put("/nodes/gpu-02", json={"cores": 16, "memory_mb": 64_000}, headers=AUTH).status_code == 200
        for body in (
            {"job_id": "ddp-run", "node": "gpu-01", "curve": STEEP, "ranks": 2},
            {"job_id": "bert", "node": "gpu-01", "curve": RISING},
        ):
            assert http.post("/jobs", json=body, headers=AUTH).status_code == 201
        plan = http.post("/plans/recompute", headers=AUTH).json()["plans"][0]
        beat = {"throughput": 98.0, "workers": 2, "data_wait": 0.12}
        assert http.post("/jobs/ddp-run/heartbeat", json=beat, headers=AUTH).status_code == 200
        yield srv.url, plan


def test_each_node_with_jobs_shows_its_plan_and_each_jobs_counts_and_the_idle_nodes_are_listed(service, capsys):
    url, plan = service
    assert plan["workers"] == {"ddp-run": 4, "bert": 5}  # 12 cores less 3 main processes
    assert main(["status", "--url", url]) == 0
    out = capsys.readouterr().out
    assert (
        f"gpu-01: 12 cores, 62.5 GB for workers, 2 active · plan #{plan['plan_id']} by optimal, 12 of 12 cores used"
        in out
    )
    ddp = next(line for line in out.splitlines() if "ddp-run" in line)
    cells = [c.strip() for c in ddp.split("│")[1:-1]]
    # GPUs, the plan's total and each rank's share, what each rank runs and measured, the job's expected and share
    assert cells[1:8] == ["2 (2 ranks)", "4 (2 × 2)", "2 × 2", "2 × 98.0", "180.0", "90%", "12%"]
    bert = [c.strip() for c in next(line for line in out.splitlines() if "bert" in line).split("│")[1:-1]]
    assert bert[1:8] == ["1", "5", "–", "–", "100.0", "100%", "–"]
    assert "nodes without an active job: gpu-02 (16 cores)" in out


def test_json_gives_the_nodes_plans_and_active_jobs_as_the_service_answers_them(service, capsys, monkeypatch):
    url, plan = service
    monkeypatch.setenv("ADLREC_SERVICE_URL", url + "/")  # the address the callbacks use too
    assert main(["status", "--json", "--node", "gpu-01"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["url"] == url
    assert [n["name"] for n in state["nodes"]] == ["gpu-01"]
    assert [p["plan_id"] for p in state["plans"]] == [plan["plan_id"]]
    assert [(j["job_id"], j["ranks"]) for j in state["jobs"]] == [("ddp-run", 2), ("bert", 1)]


@pytest.mark.parametrize(
    ("argv", "code", "says"),
    [
        (["--node", "nope"], 2, "--node: the service at {url} knows no node 'nope' (known: gpu-01, gpu-02)"),
        (
            ["--url", "ftp://x"],
            2,
            "--url must be the service's http(s) address, e.g. http://127.0.0.1:8470, got 'ftp://x'",
        ),
        (["--url", "http://127.0.0.1:9"], 1, "no adlrec service answers at http://127.0.0.1:9 (ConnectError"),
        (["--url", "{url}/v2"], 1, "the service at {url}/v2 answered GET /nodes with 404: Not Found"),
    ],
)
def test_a_mistake_or_an_absent_service_is_one_line(service, capsys, argv, code, says):
    url, _ = service
    argv = ["--url", url, *argv] if "--url" not in argv else [a.format(url=url) for a in argv]
    assert main(["status", *argv]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("adlrec: error: ") and says.format(url=url) in err


def test_a_service_whose_job_store_is_down_is_said_so(tmp_path, capsys):
    with server_with_breakable_store(tmp_path) as (srv, _http, break_store):
        url = srv.url
        break_store()
        assert main(["status", "--url", url]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"adlrec: error: the service at {url} answered GET /nodes with 503: ")
    assert err.count("\n") == 1


def test_a_service_without_nodes_says_what_makes_one(tmp_path, capsys):
    with LiveServer(create_app(service_settings(tmp_path))) as srv:
        assert main(["status", "--url", srv.url]) == 0
    assert "knows no node yet: a job's registration names its node" in capsys.readouterr().out


def test_a_long_job_id_is_shown_whole_not_cut_short(tmp_path, capsys):
    """An id of the 128 characters the API allows wraps in its column: cut to "jxxx…" it could not be told
    from another nor copied (to open its page, #job/<id>)."""
    long_id = "j" + "x" * 100 + "-tail-" + "y" * 21
    with LiveServer(create_app(service_settings(tmp_path))) as srv, httpx.Client(base_url=srv.url) as http:
        body = {"job_id": long_id, "node": "gpu-01", "curve": RISING}
        assert http.post("/jobs", json=body, headers=AUTH).status_code == 201
        assert main(["status", "--url", srv.url]) == 0
    rows = [line.split("│") for line in capsys.readouterr().out.splitlines() if line.startswith("│")]
    assert "".join(cells[1].strip() for cells in rows) == long_id


def test_a_service_that_takes_the_connection_but_does_not_answer_is_said_busy_not_absent():
    """A listening socket that never answers (a stuck or overloaded service): no "start one with adlrec serve"."""
    with socket.create_server(("127.0.0.1", 0)) as sock:  # the kernel takes connections; nobody reads them
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        with pytest.raises(ServiceError) as err:
            fetch_status(url, timeout_s=0.2)
    assert str(err.value) == (
        f"the service at {url} took the connection but did not answer GET /nodes within 0.2 s (ReadTimeout); "
        "it may be busy: try again, or see its log"
    )


class _OtherJSONService(http.server.BaseHTTPRequestHandler):
    """Another program's JSON API, where a wrong --url points: 200 and JSON, not an adlrec service's."""

    answer = b'{"detail": "hello"}'

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("answer", [b'{"detail": "hello"}', b"[1, 2]", b"{}", b'[{"name": "n"}]'])
@pytest.mark.parametrize("argv", [[], ["--node", "n"], ["--json"]])
def test_another_programs_json_is_one_line_not_a_traceback(capsys, monkeypatch, answer, argv):
    monkeypatch.setattr(_OtherJSONService, "answer", answer)
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtherJSONService) as srv:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        try:
            assert main(["status", "--url", url, *argv]) == 1
        finally:
            srv.shutdown()
    out = capsys.readouterr()
    assert out.out == ""
    assert out.err.count("\n") == 1
    assert out.err.startswith(f"adlrec: error: {url} answered GET /nodes with JSON that is not an adlrec service's")


class _OtherWebServer(http.server.BaseHTTPRequestHandler):
    """A web server where a wrong --url points: a 404 whose body is a page, or another API's JSON."""

    answer = b"<!DOCTYPE HTML>\n<html>\n<body>\n<h1>Error response</h1>\n</body>\n</html>\n"

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.send_response(404)
        self.send_header("content-length", str(len(self.answer)))
        self.end_headers()
        self.wfile.write(self.answer)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    ("answer", "says"),
    [
        # the page's every line was printed
        (_OtherWebServer.answer, "not an adlrec service's answer ('<!DOCTYPE HTML>'...): is --url its address?"),
        # .get on a list: AttributeError, a traceback
        (b"[1, 2]", "not an adlrec service's answer ('[1, 2]'): is --url its address?"),
        # "..." after a whole answer said more was left out
        (b"  \n", "not an adlrec service's answer (an empty body): is --url its address?"),
        (b"x" * 100, f"not an adlrec service's answer ('{'x' * 80}'...): is --url its address?"),
        (b'{"detail": "no\\n such\\tthing"}', "no such thing"),
    ],
)
def test_an_error_answer_that_is_not_the_services_is_one_line(capsys, monkeypatch, answer, says):
    monkeypatch.setattr(_OtherWebServer, "answer", answer)
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _OtherWebServer) as srv:
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        url = f"http://127.0.0.1:{srv.server_address[1]}"
        try:
            assert main(["status", "--url", url]) == 1
        finally:
            srv.shutdown()
    assert capsys.readouterr().err == f"adlrec: error: the service at {url} answered GET /nodes with 404: {says}\n"


def test_only_active_jobs_are_shown_and_node_keeps_to_that_nodes_jobs_and_plan(tmp_path, capsys):
    with LiveServer(create_app(service_settings(tmp_path))) as srv, httpx.Client(base_url=srv.url) as http:
        for job_id, node in (("a1", "n1"), ("ended", "n1"), ("b1", "n2")):
            body = {"job_id": job_id, "node": node, "curve": RISING}
            assert http.post("/jobs", json=body, headers=AUTH).status_code == 201
        assert http.post("/jobs/ended/finish", headers=AUTH).status_code == 200
        assert http.post("/plans/recompute", headers=AUTH).status_code == 200
        assert main(["status", "--url", srv.url, "--json"]) == 0
        every = json.loads(capsys.readouterr().out)
        assert main(["status", "--url", srv.url, "--json", "--node", "n1"]) == 0
        one = json.loads(capsys.readouterr().out)
    assert [j["job_id"] for j in every["jobs"]] == ["a1", "b1"]
    assert sorted(p["node"] for p in every["plans"]) == ["n1", "n2"]
    assert [j["job_id"] for j in one["jobs"]] == ["a1"]
    assert [n["name"] for n in one["nodes"]] == ["n1"] and [p["node"] for p in one["plans"]] == ["n1"]


def test_an_address_from_the_environment_that_is_not_a_url_names_the_variable(capsys, monkeypatch):
    monkeypatch.setenv("ADLREC_SERVICE_URL", "ftp://x")
    assert main(["status"]) == 2
    assert capsys.readouterr().err == (
        "adlrec: error: ADLREC_SERVICE_URL (--url not given) must be the service's http(s) address, e.g. "
        "http://127.0.0.1:8470, got 'ftp://x'\n"
    )
