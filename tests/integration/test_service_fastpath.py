"""The heartbeat's fast path answers exactly as the route would: the same requests, sent to a service
with the fast path and to one without it (real uvicorn, real SQLite stores), get the same status,
the same body and the same counters; a spy on the fast path's ``beat`` shows which it answered."""

from __future__ import annotations

import httpx
import pytest

import adlrec.service.fastpath as fastpath
from adlrec.service import create_app
from tests.service_helpers import LiveServer, ManualClock, service_settings

AUTH = {"Authorization": "Bearer s3cret"}
HB = "/jobs/{}/heartbeat"
JSON = {"content-type": "application/json"}

# (name, job, request kwargs (a method other than POST in "method"), answered by the fast path)
CASES = [
    ("measured", "fp-a", {"json": {"throughput": 90.0, "workers": 2, "data_wait": 0.25}, "headers": AUTH}, True),
    ("empty object", "fp-a", {"json": {}, "headers": AUTH}, True),
    (
        "json with charset",
        "fp-b",
        {"content": b'{"workers": 1}', "headers": AUTH | {"content-type": "application/json; charset=utf-8"}},
        True,
    ),
    ("chunked", "fp-b", {"content": (b'{"throughput": 5', b'0.0, "workers": 1}'), "headers": AUTH | JSON}, True),
    ("no content type", "fp-b", {"content": b"{}", "headers": AUTH}, False),
    (
        "upper-case content type",
        "fp-b",
        {"content": b"{}", "headers": AUTH | {"content-type": "Application/JSON"}},
        True,
    ),
    ("a GET with a body", "fp-a", {"method": "GET", "json": {}, "headers": AUTH}, False),
    ("a PUT", "fp-a", {"method": "PUT", "json": {}, "headers": AUTH}, False),
    ("lower-case scheme", "fp-a", {"json": {}, "headers": {"Authorization": "bearer s3cret"}}, True),
    ("no token", "fp-a", {"json": {}}, False),
    ("wrong token", "fp-a", {"json": {}, "headers": {"Authorization": "Bearer nope"}}, False),
    ("no body", "fp-a", {"headers": AUTH}, False),
    ("not json", "fp-a", {"content": b"{nope", "headers": AUTH | {"content-type": "application/json"}}, False),
    ("text body", "fp-a", {"content": b"{}", "headers": AUTH | {"content-type": "text/plain"}}, False),
    ("a list", "fp-a", {"json": [1, 2], "headers": AUTH}, False),
    ("throughput alone", "fp-a", {"json": {"throughput": 5.0}, "headers": AUTH}, False),
    ("share above 1", "fp-a", {"json": {"throughput": 5.0, "workers": 1, "data_wait": 2}, "headers": AUTH}, False),
    ("extra field", "fp-a", {"json": {"colour": "red"}, "headers": AUTH}, False),
    ("negative workers", "fp-a", {"json": {"workers": -1}, "headers": AUTH}, False),
    ("negative rate", "fp-a", {"json": {"throughput": -5.0, "workers": 1}, "headers": AUTH}, False),
    ("workers past the limit", "fp-a", {"json": {"workers": 257}, "headers": AUTH}, False),
    ("negative share", "fp-a", {"json": {"throughput": 5.0, "workers": 1, "data_wait": -0.5}, "headers": AUTH}, False),
    ("true for a rate", "fp-a", {"json": {"throughput": True, "workers": 1}, "headers": AUTH}, False),
    ("a string for workers", "fp-a", {"json": {"workers": "1"}, "headers": AUTH}, False),
    ("a float for workers", "fp-a", {"json": {"workers": 1.0}, "headers": AUTH}, False),
    ("an integer rate", "fp-a", {"json": {"throughput": 40, "workers": 1, "data_wait": 0}, "headers": AUTH}, True),
    ("unknown job", "ghost", {"json": {}, "headers": AUTH}, False),
    ("finished job", "fp-done", {"json": {}, "headers": AUTH}, False),
    ("id too long", "x" * 129, {"json": {}, "headers": AUTH}, False),
]


def _run(tmp, fast: bool, monkeypatch) -> tuple[list[tuple[int, object]], int, str]:
    calls = []  # the heartbeats the fast path answered
    real = fastpath.beat

    def spy(*args):
        answer = real(*args)
        if answer is not None:
            calls.append(args[1])
        return answer

    monkeypatch.setattr(fastpath, "beat", spy)
    app = create_app(service_settings(tmp, service_fast_heartbeat=fast), clock=ManualClock(), start_scheduler=False)
    out = []
    with LiveServer(app) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        assert http.put("/nodes/fp", json={"cores": 4, "memory_mb": 4000}, headers=AUTH).status_code == 200
        for job in ("fp-a", "fp-b", "fp-done"):
            r = http.post("/jobs", json={"job_id": job, "node": "fp", "curve": [10.0, 60.0, 100.0]}, headers=AUTH)
            assert r.status_code == 201, r.text
        assert http.post("/plans/recompute", headers=AUTH).status_code == 200
        assert http.post("/jobs/fp-done/finish", headers=AUTH).status_code == 200
        for _, job, kwargs, _ in CASES:
            kw = dict(kwargs)
            if isinstance(kw.get("content"), tuple):
                kw["content"] = iter(kw["content"])  # chunks, sent without a content-length
            r = http.request(kw.pop("method", "POST"), HB.format(job), **kw)
            out.append((r.status_code, r.json()))
        points = http.get("/jobs/fp-a").json()
        metrics = http.get("/metrics").text
    counted = [
        ln for ln in metrics.splitlines() if ln.startswith(("adlrec_heartbeats_total", "adlrec_http_requests_total"))
    ]
    return out, len(calls), "\n".join(counted) + repr(points["measured"])


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    try:
        fast = _run(tmp_path_factory.mktemp("fast"), True, mp)
        mp.undo()
        slow = _run(tmp_path_factory.mktemp("slow"), False, mp)
    finally:
        mp.undo()
    return fast, slow


def test_the_fast_path_answers_the_well_formed_heartbeats_of_held_jobs(both):
    (_, fast_calls, _), (_, slow_calls, _) = both
    assert fast_calls == sum(1 for *_, answered in CASES if answered)
    assert slow_calls == 0


@pytest.mark.parametrize("i", range(len(CASES)), ids=[c[0] for c in CASES])
def test_every_answer_is_the_routes_answer(both, i):
    (fast, _, _), (slow, _, _) = both
    assert fast[i] == slow[i]
    assert (fast[i][0] == 200) == CASES[i][3]


def test_counters_and_measured_points_are_the_same(both):
    (_, _, fast), (_, _, slow) = both
    assert 'route="/jobs/{job_id}/heartbeat"' in fast
    assert fast == slow
