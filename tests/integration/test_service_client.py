"""The fail-soft client against a real uvicorn server that goes away and comes back."""

from __future__ import annotations

import logging

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from adlrec.client import ServiceClient
from adlrec.service import create_app
from tests.service_helpers import LiveServer, ManualClock, service_settings

AUTH = {"Authorization": "Bearer s3cret"}
STEEP = [10.0, 50.0, 90.0, 100.0, 100.0, 100.0]
RISING = [10.0, 30.0, 50.0, 70.0, 90.0, 100.0]


def recompute(url: str) -> list[dict]:
    return httpx.post(f"{url}/plans/recompute", headers=AUTH, timeout=10).json()["plans"]


def test_each_plan_is_new_exactly_once(tmp_path):
    settings = service_settings(tmp_path)
    # read from a token file: its newline is not part of the token, on either side
    with LiveServer(create_app(settings)) as srv, ServiceClient(srv.url, token="s3cret\n") as client:
        assert client.register(node="c1", curve=STEEP, job_id="c1-a") == "c1-a"
        before = client.heartbeat(throughput=50.0, workers=1)
        assert before.plan_id is None and not before.new and before.workers == 1
        (plan,) = recompute(srv.url)
        first = client.heartbeat(throughput=50.0, workers=1)
        again = client.heartbeat(throughput=90.0, workers=first.workers)
        assert first.new and first.plan_id == plan["plan_id"] and first.workers == plan["workers"]["c1-a"]
        assert not again.new and again.plan_id == first.plan_id
        assert client.finish()


def test_the_client_keeps_its_plan_while_the_service_is_away_and_picks_up_the_next(tmp_path, caplog):
    settings = service_settings(tmp_path, service_node_cores=6)
    clock = ManualClock()
    slept: list[float] = []
    with LiveServer(create_app(settings, clock=clock)) as srv:
        port, url = srv.port, srv.url
        client = ServiceClient(url, token="s3cret", timeout_s=1.0, retries=2, backoff_s=0.05, sleep=slept.append)
        client.register(node="away", curve=RISING, job_id="away-a")
        recompute(url)
        held = client.heartbeat(throughput=80.0, workers=4)
        assert held.new and held.workers == 5
    # the service is gone: no exception, the last plan, one warning however many calls fail
    with caplog.at_level(logging.INFO, logger="adlrec.client"):
        stale = [client.heartbeat(throughput=85.0, workers=5) for _ in range(3)]
        assert all(a.stale and a.workers == 5 and a.plan_id == held.plan_id and not a.new for a in stale)
        assert not client.finish() and client.plan("away") is None
        assert [r.levelname for r in caplog.records] == ["WARNING"]
        assert "unreachable" in caplog.records[0].getMessage() and "keeping 5 workers" in caplog.records[0].getMessage()
        assert slept[:2] == [0.05, 0.1]  # backoff doubles between retries
        caplog.clear()
        with LiveServer(create_app(settings, clock=clock), port=port):
            httpx.post(f"{url}/jobs", json={"job_id": "away-b", "node": "away", "curve": RISING}, headers=AUTH)
            (plan,) = recompute(url)
            back = client.heartbeat(throughput=85.0, workers=5)
            assert not back.stale and back.new and back.plan_id == plan["plan_id"] > held.plan_id
            assert back.workers == plan["workers"]["away-a"]
            assert any("is back" in r.getMessage() for r in caplog.records)
    client.close()


def test_a_service_that_lost_the_job_gets_it_registered_again(tmp_path):
    with LiveServer(create_app(service_settings(tmp_path / "one"))) as srv:
        port = srv.port
        client = ServiceClient(srv.url, token="s3cret", sleep=lambda s: None)
        client.register(node="lost", curve=STEEP, job_id="lost-a", requested_workers=2)
    with LiveServer(create_app(service_settings(tmp_path / "two")), port=port) as srv:  # an empty store
        a = client.heartbeat(throughput=50.0, workers=2)
        assert a is not None and not a.stale and a.status == "active"
        assert httpx.get(f"{srv.url}/jobs/lost-a").json()["requested_workers"] == 2
    client.close()


def test_a_job_the_service_named_is_registered_again_under_that_name(tmp_path):
    """A job registered without an id takes the one the service gives; a service that lost it gets the same id back
    (a follower rank reads the job by that id)."""
    with LiveServer(create_app(service_settings(tmp_path / "one"))) as srv:
        port = srv.port
        client = ServiceClient(srv.url, token="s3cret", sleep=lambda s: None)
        job_id = client.register(node="named", curve=STEEP)
        assert job_id is not None
    with LiveServer(create_app(service_settings(tmp_path / "two")), port=port) as srv:  # an empty store
        assert not client.heartbeat(throughput=50.0, workers=2).stale
        assert client.job_id == job_id and httpx.get(f"{srv.url}/jobs/{job_id}", timeout=10).status_code == 200
    client.close()


def test_a_plan_of_a_service_restarted_on_a_fresh_store_is_new_though_its_id_was_seen(tmp_path):
    with LiveServer(create_app(service_settings(tmp_path / "one", service_node_cores=6))) as srv:
        port = srv.port
        client = ServiceClient(srv.url, token="s3cret", sleep=lambda s: None)
        client.register(node="again", curve=RISING, job_id="again-a", requested_workers=2)
        (plan,) = recompute(srv.url)
        first = client.heartbeat(throughput=50.0, workers=2)
        assert first.new and first.plan_id == plan["plan_id"] == 1
    # a fresh store on a node with other cores: its plan 1 gives another count, and must be applied
    with LiveServer(create_app(service_settings(tmp_path / "two", service_node_cores=3)), port=port) as srv:
        client.heartbeat(throughput=50.0, workers=first.workers)  # unknown: registered again
        (plan,) = recompute(srv.url)
        a = client.heartbeat(throughput=50.0, workers=first.workers)
        assert plan["plan_id"] == 1 and a.plan_id == 1 and a.workers == plan["workers"]["again-a"]
        assert a.workers != first.workers and a.new
    client.close()


def test_refusals_are_logged_once_and_never_raised(tmp_path, caplog):
    with LiveServer(create_app(service_settings(tmp_path))) as srv, ServiceClient(srv.url, token="wrong") as client:
        with caplog.at_level(logging.ERROR, logger="adlrec.client"):
            assert client.register(node="r", curve=STEEP) is None
            assert client.register(node="r", curve=STEEP) is None
            assert client.heartbeat(throughput=1.0, workers=1) is None
        assert len(caplog.records) == 1 and caplog.records[0].getMessage() == (
            "adlrec service refused POST jobs 401: missing or wrong bearer token (Authorization: Bearer <token>)"
        )


def _refusing(body: bytes) -> Starlette:
    """What answers at the service's address and refuses every request (403), with a JSON ``body`` of its own."""

    async def answer(request: Request) -> Response:
        return Response(body, status_code=403, media_type="application/json")

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b'["denied"]', '["denied"]'),
        (b'"denied"', '"denied"'),
        (b'{"detail": "no entry"}', "no entry"),
        (b"<html>Forbidden</html>", "<html>Forbidden</html>"),
    ],
)
def test_a_refusal_whose_answer_is_not_the_services_is_said_in_one_line(caplog, body, says):
    """A refusal with a JSON list or string (a proxy's, another program's): before, ``.get`` on it raised, and
    the refusal was logged as an unexpected error in the client, with a traceback, the refusal itself never said."""
    with LiveServer(_refusing(body)) as srv, ServiceClient(srv.url) as client:
        with caplog.at_level(logging.WARNING, logger="adlrec.client"):
            assert client.register(node="n", curve=STEEP) is None
            assert client.register(node="n", curve=STEEP) is None  # said once
    (record,) = caplog.records
    assert record.levelname == "ERROR" and record.exc_info is None
    assert record.getMessage() == f"adlrec service refused POST jobs 403: {says}"


def test_a_new_registration_applies_the_plan_again_though_its_id_was_seen(tmp_path):
    """A second run with the same client (one ADLCallback, two fits) registers the job again; its loader
    may run at any count, so the node's plan, unchanged since the first run applied it, is new again."""
    with LiveServer(create_app(service_settings(tmp_path))) as srv, ServiceClient(srv.url, token="s3cret") as client:
        client.register(node="twice", curve=STEEP, job_id="twice-a", requested_workers=1)
        (plan,) = recompute(srv.url)
        first = client.heartbeat(throughput=50.0, workers=1)
        assert first.new and first.plan_id == plan["plan_id"]
        assert client.finish()
        client.register(node="twice", curve=STEEP, requested_workers=1)  # the same job id, the same plan
        again = client.heartbeat(throughput=50.0, workers=1)
        assert again.new and again.plan_id == first.plan_id and again.workers == first.workers
        assert not client.heartbeat(throughput=50.0, workers=again.workers).new


def test_a_service_away_before_any_plan_is_logged_without_a_plan_id(tmp_path, caplog):
    server = LiveServer(create_app(service_settings(tmp_path))).__enter__()
    client = ServiceClient(server.url, token="s3cret", sleep=lambda s: None)
    client.register(node="early", curve=STEEP, job_id="early-a", requested_workers=2)
    assert client.last is not None and client.last.plan_id is None  # no recompute yet: no plan
    server.__exit__(None, None, None)
    with caplog.at_level(logging.WARNING, logger="adlrec.client"):
        client.heartbeat(throughput=50.0, workers=2)
    (message,) = [r.getMessage() for r in caplog.records]
    assert "keeping 2 workers (the service has not planned this job yet)" in message and "None" not in message
    client.close()


def test_a_follower_applies_the_plan_of_a_service_restarted_on_a_fresh_store_though_its_id_was_seen(tmp_path):
    """A distributed run's follower rank reads the job its leader registered.  The service restarts on an
    empty store: the leader registers the job again, and the node's plans are numbered from 1 again; the
    follower must apply the new plan 1 as its leader does, or the ranks run at different counts."""
    with LiveServer(create_app(service_settings(tmp_path / "one", service_node_cores=6))) as srv:
        port = srv.port
        leader = ServiceClient(srv.url, token="s3cret", sleep=lambda s: None)
        follower = ServiceClient(srv.url, sleep=lambda s: None)
        leader.register(node="ddp", curve=RISING, job_id="ddp-a", requested_workers=2, ranks=2)
        (plan,) = recompute(srv.url)
        led, followed = leader.heartbeat(throughput=50.0, workers=2), follower.follow("ddp-a", first=True)
        assert plan["plan_id"] == 1 and plan["workers"] == {"ddp-a": 4}  # 6 cores, 2 main: 2 workers a rank
        assert (led.new, led.workers) == (followed.new, followed.workers) == (True, 2)
    # a fresh store on a node with other cores: its plan 1 gives each rank another count
    with LiveServer(create_app(service_settings(tmp_path / "two", service_node_cores=4)), port=port) as srv:
        assert follower.follow("ddp-a") is None  # the leader has not registered it again yet
        leader.heartbeat(throughput=50.0, workers=2)  # unknown: registered again
        (plan,) = recompute(srv.url)
        assert plan["plan_id"] == 1 and plan["workers"] == {"ddp-a": 2}
        led, followed = leader.heartbeat(throughput=50.0, workers=2), follower.follow("ddp-a")
        assert (led.plan_id, led.workers, led.new) == (1, 1, True)
        assert (followed.plan_id, followed.workers, followed.new) == (1, 1, True)
        assert not follower.follow("ddp-a").new  # and once only
    leader.close()
    follower.close()


def _impostor(body: bytes, media_type: str) -> Starlette:
    """An HTTP server at the service's address that is not the service (a proxy's page, another program):
    every request answered 200 with ``body``."""

    async def answer(request: Request) -> Response:
        return Response(body, media_type=media_type)

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


IMPOSTORS = [  # (body, media type) of answers that are not the service's
    (b"<html><body>Sign in to continue</body></html>", "text/html"),
    (b'{"ok": true}', "application/json"),
    (b"[1, 2]", "application/json"),
    (b'{"job_id": "x", "workers": 1000000000, "plan_id": 7, "status": "active"}', "application/json"),
    (b'{"job_id": "x", "workers": -1, "plan_id": 7, "status": "active"}', "application/json"),
    # job- and assignment-shaped but for one field: a plan id that is not a number, no status, a job id not a string
    (
        b'{"job_id": "x", "workers": 1, "plan_id": "7", "status": "active",'
        b' "assignment": {"workers": 1, "plan_id": "7", "status": "active"}}',
        "application/json",
    ),
    (b'{"job_id": "x", "workers": 1, "plan_id": 7, "assignment": {"workers": 1, "plan_id": 7}}', "application/json"),
    (b'{"job_id": 7, "assignment": {"workers": 1, "plan_id": 7, "status": "active"}}', "application/json"),
    # a worker count that is a JSON true (Python's bool is an int: it would pass as 1 worker)
    (
        b'{"job_id": "x", "workers": true, "plan_id": 7, "status": "active",'
        b' "assignment": {"workers": true, "plan_id": 7, "status": "active"}}',
        "application/json",
    ),
]


def test_answers_that_are_not_the_services_are_never_raised_and_the_last_plan_is_kept(tmp_path, caplog):
    """A 200 that is not the service's answer (before: KeyError or TypeError raised out of register, heartbeat
    and follow, or a traceback logged as an unexpected error at every call): the job keeps its last plan, as
    while the service is away, said once, and takes the service's next plan when it answers again.  One job
    per kind of answer, each meeting only its own impostor; the service started twice in all."""
    settings = service_settings(tmp_path, service_node_cores=32)  # a main core for each job, and workers to plan
    with LiveServer(create_app(settings)) as srv:
        port = srv.port
        clients = [ServiceClient(srv.url, token="s3cret", sleep=lambda s: None) for _ in IMPOSTORS]
        for i, client in enumerate(clients):
            client.register(node="imp", curve=STEEP, job_id=f"imp-{i}", requested_workers=2)
        (plan,) = recompute(srv.url)
        held = [client.heartbeat(throughput=50.0, workers=2) for client in clients]
        assert all(h.new and h.plan_id == plan["plan_id"] for h in held)
    for (body, media_type), client, h in zip(IMPOSTORS, clients, held, strict=True):
        caplog.clear()
        fresh = ServiceClient(f"http://127.0.0.1:{port}", sleep=lambda s: None)  # knows nothing yet
        with LiveServer(_impostor(body, media_type), port=port), caplog.at_level(logging.INFO, logger="adlrec.client"):
            stale = [client.heartbeat(throughput=50.0, workers=h.workers) for _ in range(2)]
            assert all(a.stale and (a.workers, a.plan_id, a.new) == (h.workers, h.plan_id, False) for a in stale)
            assert (
                fresh.register(node="imp", curve=STEEP) is None and fresh.heartbeat(throughput=1.0, workers=1) is None
            )
            assert fresh.follow("imp-0") is None and not fresh.finish()
            warned = [r.getMessage() for r in caplog.records]
            assert len(warned) == 2 and all("not the service's" in m and media_type in m for m in warned), body
            assert all(r.levelname == "WARNING" and r.exc_info is None for r in caplog.records)
        fresh.close()
    with LiveServer(create_app(settings), port=port):
        for client, h in zip(clients, held, strict=True):
            back = client.heartbeat(throughput=50.0, workers=h.workers)
            # the service's plan (the restart may recompute from the heartbeats' measurements: a new one, new once)
            assert not back.stale and back.plan_id >= h.plan_id and back.new == (back.plan_id != h.plan_id)
            client.close()


class _Dripper:
    """A TCP server that reads a request, then answers a whole, valid 200 one byte every ``gap_s``: each read
    of the client's is answered well within its timeout, the answer as a whole takes ``len x gap_s``."""

    def __init__(self, gap_s: float) -> None:
        import socket
        import threading

        body = b'{"job_id": "j", "workers": 1, "plan_id": null, "status": "active"}'
        self.answer = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (
            len(body),
            body,
        )
        self.gap_s = gap_s
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.sent_all = threading.Event()  # the whole answer went out
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(65536)
            for i in range(len(self.answer)):
                if self.stop.wait(self.gap_s):
                    return
                try:
                    conn.sendall(self.answer[i : i + 1])
                except OSError:  # the client hung up
                    return
            self.sent_all.set()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.sock.close()


def test_an_answer_dripped_a_byte_at_a_time_ends_the_call_at_its_deadline(caplog):
    """httpx's timeouts bound each read: an answer of ~130 bytes sent a byte every 0.2 s kept each read under
    the 2 s timeout and held register() for the ~26 s it took (helper-46 saw 170 s with a slower drip).
    The call now ends within one connect and one read (3 s here), as while the service is away, long
    before the answer is whole."""
    dripper = _Dripper(gap_s=0.2)
    caplog.set_level(logging.WARNING, logger="adlrec.client")
    try:
        with ServiceClient(dripper.url, retries=0) as client:
            assert client.attempt_s == 3.0
            assert client.register(node="n", curve=STEEP) is None
            assert not dripper.sent_all.is_set()  # returned while the answer was still coming
        assert "unreachable (ReadTimeout" in caplog.text
    finally:
        dripper.close()


class _Late(_Dripper):
    """A TCP server that reads a request, then sends nothing for ``gap_s``, then the whole answer at once."""

    def _serve(self) -> None:
        conn, _ = self.sock.accept()
        with conn:
            conn.recv(65536)
            if self.stop.wait(self.gap_s):
                return
            try:
                conn.sendall(self.answer)
            except OSError:  # the client hung up
                return
            self.sent_all.set()


def test_a_read_that_would_outlast_the_calls_deadline_is_cut_to_it():
    """httpx's timeout (30 s here) bounds each read; the deadline (0.5 s) cuts the read already waiting for
    an answer that comes 2 s late to what is left of it, not only the reads that start after it."""
    from adlrec.http_deadline import DeadlineBackend, deadline_transport

    late = _Late(gap_s=2.0)
    backend = DeadlineBackend()
    try:
        with httpx.Client(transport=deadline_transport(backend), timeout=30) as http:
            with backend.deadline(0.5), pytest.raises(httpx.ReadTimeout):
                http.get(late.url)
    finally:
        late.close()


def _unavailable(status: int, requests: list[str]) -> Starlette:
    """What answers at the service's address while the service behind it is down (a proxy's 502 or 503):
    every request answered ``status``, and counted."""

    async def answer(request: Request) -> Response:
        requests.append(f"{request.method} {request.url.path}")
        return Response(b"<html>Service Unavailable</html>", status_code=status, media_type="text/html")

    return Starlette(routes=[Route("/{path:path}", answer, methods=["GET", "POST"])])


def test_a_5xx_is_retried_with_doubling_backoff_then_the_last_plan_is_kept(tmp_path, caplog):
    """A 5xx is the service away, not a refusal: tried ``retries`` times more, ``backoff_s`` doubling between
    the tries and no wait after the last, then the last plan is kept and the warning said once."""
    with LiveServer(create_app(service_settings(tmp_path))) as srv:
        port = srv.port
        slept: list[float] = []
        client = ServiceClient(srv.url, token="s3cret", retries=3, backoff_s=0.05, sleep=slept.append)
        client.register(node="busy", curve=STEEP, job_id="busy-a", requested_workers=2)
        (plan,) = recompute(srv.url)
        held = client.heartbeat(throughput=50.0, workers=2)
        assert held.new and held.plan_id == plan["plan_id"] and slept == []
    requests: list[str] = []
    with LiveServer(_unavailable(503, requests), port=port), caplog.at_level(logging.INFO, logger="adlrec.client"):
        stale = [client.heartbeat(throughput=50.0, workers=held.workers) for _ in range(2)]
        assert all(a.stale and (a.workers, a.plan_id, a.new) == (held.workers, held.plan_id, False) for a in stale)
    assert requests == ["POST /jobs/busy-a/heartbeat"] * 8  # 4 tries a call
    assert slept == [0.05, 0.1, 0.2] * 2
    (said,) = caplog.records
    assert said.levelname == "WARNING" and "unreachable (HTTP 503)" in said.getMessage()
    client.close()


@pytest.mark.parametrize("status", [500, 502])
def test_a_default_client_tries_a_5xx_three_times_waiting_a_tenth_then_a_fifth_of_a_second(status):
    """The defaults a training callback gets: two retries, 0.1 s backoff doubling; a 500 is the service away too."""
    requests: list[str] = []
    slept: list[float] = []
    with LiveServer(_unavailable(status, requests)) as srv, ServiceClient(srv.url, sleep=slept.append) as client:
        assert client.register(node="n", curve=STEEP) is None
    assert requests == ["POST /jobs"] * 3 and slept == [0.1, 0.2]


def test_a_job_whose_registration_found_no_service_registers_when_it_answers(tmp_path, caplog):
    """The service is not up yet when the job starts: a later heartbeat registers the job, and it is planned
    (registered first: not a heartbeat for a job with no id, answered 404 and said as a job the service lost)."""
    settings = service_settings(tmp_path)
    with LiveServer(create_app(settings)) as srv:  # only to find a free port
        port = srv.port
    client = ServiceClient(f"http://127.0.0.1:{port}", token="s3cret", sleep=lambda s: None)
    assert client.register(node="late", curve=STEEP, job_id="late-a", requested_workers=2) is None
    assert client.heartbeat(throughput=50.0, workers=2) is None  # still away, and no plan known
    with LiveServer(create_app(settings), port=port) as srv, caplog.at_level(logging.WARNING, logger="adlrec.client"):
        a = client.heartbeat(throughput=50.0, workers=2)
        assert a is not None and not a.stale and a.status == "active" and client.job_id == "late-a"
        assert not [r.getMessage() for r in caplog.records if "no longer knows" in r.getMessage()]
        assert httpx.get(f"{srv.url}/jobs/late-a", timeout=10).json()["requested_workers"] == 2
        (plan,) = recompute(srv.url)
        assert client.heartbeat(throughput=50.0, workers=2).plan_id == plan["plan_id"]
    client.close()


def test_a_404_is_no_answer_where_the_call_does_not_expect_one(tmp_path):
    """A node with no plan yet, a job the service no longer holds: ``plan`` answers None and ``finish``
    False, not the marker the heartbeat and follow calls use for an unknown job."""
    with LiveServer(create_app(service_settings(tmp_path / "one"))) as srv:
        port = srv.port
        client = ServiceClient(srv.url, token="s3cret", sleep=lambda s: None)
        assert client.register(node="gone", curve=STEEP, job_id="gone-a") == "gone-a"
        assert client.plan("gone") is None  # no recompute yet
    with LiveServer(create_app(service_settings(tmp_path / "two")), port=port):  # an empty store
        assert client.finish() is False
        assert client.plan("gone") is None
    client.close()


def test_a_service_that_answers_again_even_with_a_refusal_is_back_and_its_next_absence_is_said(tmp_path, caplog):
    settings = service_settings(tmp_path)
    with LiveServer(create_app(settings)) as srv:  # only to find a free port
        port = srv.port
    with (
        ServiceClient(f"http://127.0.0.1:{port}", token="wrong", sleep=lambda s: None) as client,
        caplog.at_level(logging.INFO, logger="adlrec.client"),
    ):
        client.register(node="r", curve=STEEP)  # away
        with LiveServer(create_app(settings), port=port):
            client.register(node="r", curve=STEEP)  # back, and refusing the token
        client.register(node="r", curve=STEEP)  # away again
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in said] == ["WARNING", "INFO", "ERROR", "WARNING"]
    for (_, message), words in zip(
        said, ["unreachable", "is back", "refused POST jobs 401", "unreachable"], strict=True
    ):
        assert words in message


def test_a_job_finished_at_the_service_is_registered_again_by_its_next_heartbeat(tmp_path):
    """A second run whose registration found the service away kept the first run's job id, the service had
    that job as finished, and each heartbeat got 409: before, the client logged a refusal and answered its
    last assignment, stale, for the whole run, never registered.  The service says to register it again."""
    settings = service_settings(tmp_path)
    with LiveServer(create_app(settings)) as srv:
        port = srv.port
        client = ServiceClient(srv.url, token="s3cret", sleep=lambda s: None)
        client.register(node="fin", curve=STEEP, job_id="fin-a", requested_workers=2)
        assert client.heartbeat(throughput=50.0, workers=2).status == "active" and client.finish()
    assert client.register(node="fin", curve=STEEP, requested_workers=2) is None  # away: not registered
    assert client.job_id == "fin-a"  # the id it had, which the next registration asks for
    with LiveServer(create_app(settings), port=port) as srv:
        a = client.heartbeat(throughput=50.0, workers=2)
        assert a is not None and not a.stale and a.status == "active"
        assert httpx.get(f"{srv.url}/jobs/fin-a", timeout=10).json()["status"] == "active"
    client.close()


def test_a_follow_marked_first_takes_the_plan_as_new_again(tmp_path):
    """A follower rank's next run (``first=True``) applies the job's plan to its fresh loader, though it saw
    that plan in its last run and the job has not been registered again."""
    with LiveServer(create_app(service_settings(tmp_path))) as srv, ServiceClient(srv.url, token="s3cret") as leader:
        leader.register(node="f", curve=STEEP, job_id="f-a", requested_workers=2)
        (plan,) = recompute(srv.url)
        with ServiceClient(srv.url) as follower:
            news = [follower.follow("f-a", first=first).new for first in (True, False, True, False)]
            assert news == [True, False, True, False] and follower.last.plan_id == plan["plan_id"]


def test_a_lost_job_the_service_will_not_take_again_is_no_second_heartbeat(tmp_path):
    """A service restarted on a fresh store (404 for the job) that refuses its registration: the client
    answers its last plan, stale, at once.  Before, register() answered the old id, and the heartbeat was
    sent again to a service that did not know it (a second 404, logged as a refusal)."""
    from tests.service_helpers import PROBE

    with LiveServer(create_app(service_settings(tmp_path / "one"))) as srv:
        port = srv.port
        client = ServiceClient(srv.url, token="s3cret", sleep=lambda s: None)
        assert client.register(node="cap", probe=PROBE, job_id="cap-a", max_workers=16) == "cap-a"
        assert not client.heartbeat(throughput=50.0, workers=2).stale
    # an empty store, whose limit of 8 workers refuses the job's max_workers of 16 (422)
    with LiveServer(create_app(service_settings(tmp_path / "two", service_max_workers=8)), port=port) as srv:
        a = client.heartbeat(throughput=50.0, workers=2)
        assert a is not None and a.stale and client.job_id == "cap-a"
        metrics = httpx.get(f"{srv.url}/metrics", timeout=10).text
    heartbeats = [m for m in metrics.splitlines() if m.startswith("adlrec_http_requests_total") and "heartbeat" in m]
    assert len(heartbeats) == 1 and heartbeats[0].endswith(" 1"), heartbeats  # one, answered 404
    assert 'code="404"' in heartbeats[0]
    client.close()
