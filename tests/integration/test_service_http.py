"""The allocation service over real HTTP: uvicorn on 127.0.0.1 port 0, a real SQLite MLflow store,
the job store in SQLite, and an injected clock for TTLs."""

from __future__ import annotations

import logging
import os
import time
import uuid

import httpx
import pytest

from adlrec import __version__
from adlrec.service import create_app
from adlrec.service.store import JobStore
from tests.service_helpers import PROBE, LiveServer, ManualClock, server_with_breakable_store, service_settings

AUTH = {"Authorization": "Bearer s3cret"}
STEEP = [10.0, 50.0, 90.0, 100.0, 100.0, 100.0]
FLAT = [80.0, 95.0, 100.0, 100.0, 100.0, 100.0]
RISING = [10.0, 30.0, 50.0, 70.0, 90.0, 100.0]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    """One server for the tests that need no restart; each test uses its own node names."""
    tmp = tmp_path_factory.mktemp("svc")
    clock = ManualClock()
    settings = service_settings(tmp, service_ttl_s=60)
    with LiveServer(create_app(settings, clock=clock)) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        yield http, clock


def register(http, node, job_id, curve=None, **kw):
    body = {"job_id": job_id, "node": node, **kw}
    if curve is not None:
        body["curve"] = curve
    r = http.post("/jobs", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return r.json()


def recompute(http):
    r = http.post("/plans/recompute", headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()["plans"]


def test_register_recompute_plan_and_heartbeat_carries_it(service):
    http, _ = service
    assert http.put("/nodes/rp", json={"cores": 6, "memory_mb": 8000}, headers=AUTH).status_code == 200
    register(http, "rp", "rp-a", STEEP)
    register(http, "rp", "rp-b", FLAT)
    assert http.get("/nodes/rp/plan").status_code == 404
    (plan,) = [p for p in recompute(http) if p["node"] == "rp"]
    assert plan["workers"] == {"rp-a": 3, "rp-b": 1} and plan["policy"] == "optimal"
    assert http.get("/nodes/rp/plan").json()["plan_id"] == plan["plan_id"]
    beat = http.post("/jobs/rp-a/heartbeat", json={"throughput": 100.0, "workers": 3, "data_wait": 0.1}, headers=AUTH)
    assert beat.json() == {"job_id": "rp-a", "workers": 3, "plan_id": plan["plan_id"], "status": "active"}
    node = http.get("/nodes/rp").json()
    assert node["active_jobs"] == 2 and node["plan_id"] == plan["plan_id"]
    assert [p for p in recompute(http) if p["node"] == "rp"] == []  # nothing changed: no new plan


def test_a_probe_is_predicted_by_the_fallback_model_when_none_is_registered(service):
    http, _ = service
    job = register(http, "pr", "pr-a", probe=PROBE, max_workers=6)
    assert job["curve_source"] == "analytic" and len(job["predicted"]) == 7
    assert job["predicted"][0] == pytest.approx(1 / (1 / 500 + 1 / 100))
    model = http.get("/model").json()
    assert model["name"] == "analytic" and model["version"] is None and model["alias"] == "champion"


def test_measured_throughput_corrects_the_curve_and_moves_workers(service):
    http, _ = service
    http.put("/nodes/hb", json={"cores": 6, "memory_mb": 8000}, headers=AUTH)
    register(http, "hb", "hb-a", STEEP)
    register(http, "hb", "hb-b", FLAT)
    (first,) = [p for p in recompute(http) if p["node"] == "hb"]
    assert first["workers"] == {"hb-a": 3, "hb-b": 1}
    # a reaches its peak with one worker; b is much slower at one and two workers than predicted
    for body in ({"throughput": 100.0, "workers": 1}, {"throughput": 100.0, "workers": 2}):
        http.post("/jobs/hb-a/heartbeat", json=body, headers=AUTH)
    for body in ({"throughput": 30.0, "workers": 1}, {"throughput": 50.0, "workers": 2}):
        http.post("/jobs/hb-b/heartbeat", json=body, headers=AUTH)
    job = http.get("/jobs/hb-b").json()
    assert job["curve"][:3] == [80.0, 30.0, 50.0] and job["predicted"][:3] == FLAT[:3]
    (second,) = [p for p in recompute(http) if p["node"] == "hb"]
    assert second["plan_id"] > first["plan_id"]
    assert second["workers"]["hb-b"] > 1 and second["workers"]["hb-a"] < 3
    beat = http.post("/jobs/hb-b/heartbeat", json={}, headers=AUTH).json()
    assert beat["plan_id"] == second["plan_id"] and beat["workers"] == second["workers"]["hb-b"]


def test_silent_jobs_expire_and_release_their_workers(service):
    http, clock = service
    http.put("/nodes/ttl", json={"cores": 6, "memory_mb": 8000}, headers=AUTH)
    register(http, "ttl", "ttl-a", RISING)
    register(http, "ttl", "ttl-b", RISING)
    (p1,) = [p for p in recompute(http) if p["node"] == "ttl"]
    assert set(p1["workers"]) == {"ttl-a", "ttl-b"} and sum(p1["workers"].values()) == 4  # 6 cores - 2 mains
    clock.advance(40)
    http.post("/jobs/ttl-b/heartbeat", json={"workers": p1["workers"]["ttl-b"]}, headers=AUTH)
    clock.advance(30)  # a: silent for 70 s > TTL 60 s; b: 30 s
    (p2,) = [p for p in recompute(http) if p["node"] == "ttl"]
    assert p2["workers"] == {"ttl-b": 5}  # b gets the cores a held
    assert http.get("/jobs/ttl-a").json()["status"] == "expired"
    back = http.post("/jobs/ttl-a/heartbeat", json={}, headers=AUTH).json()
    assert back["status"] == "active" and back["plan_id"] is None  # back, but not in the current plan
    (p3,) = [p for p in recompute(http) if p["node"] == "ttl"]
    assert set(p3["workers"]) == {"ttl-a", "ttl-b"}


def test_writes_need_the_token_and_reads_do_not(service):
    http, _ = service
    r = http.post("/jobs", json={"node": "x", "curve": [1.0]})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert (
        http.post("/jobs", json={"node": "x", "curve": [1.0]}, headers={"Authorization": "Bearer nope"}).status_code
        == 401
    )
    assert http.post("/plans/recompute").status_code == 401
    assert http.put("/nodes/x", json={"cores": 1, "memory_mb": 1}).status_code == 401
    # without the token, a bad body hears 401 too (it heard 422: FastAPI validates before the token)
    for bad in ({"content": b"{nope", "headers": {"content-type": "application/json"}}, {"json": {"node": 5}}):
        r = http.post("/jobs", **bad)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer", r.text
    assert http.put("/nodes/x", json={"cores": "many"}).status_code == 401
    assert http.post("/jobs/bad%20id/heartbeat", json={}).status_code == 401
    assert http.get("/health").json()["status"] == "ok"
    head = http.head("/health")  # what load balancers and uptime checkers send
    assert head.status_code == 200 and head.content == b""
    assert http.get("/plans").status_code == 200


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"node": "v", "curve": [1.0, 2.0], "gpus": -1}, "gpus", "greater than or equal to 0"),
        ({"node": "v"}, "body", "exactly one of probe or curve"),
        ({"node": "v", "curve": [1.0, 2.0], "max_workers": 5}, "body", "past the curve's last point"),
        (
            {"node": "v", "curve": [1.0, 2.0], "min_workers": 2},
            "body",
            "min_workers (2) is past the curve's last point",
        ),
        ({"node": "v", "curve": [1.0, 2.0, 3.0], "min_workers": 2, "max_workers": 1}, "body", "must be <= max_workers"),
        ({"node": "v", "curve": [1.0, -2.0]}, "curve.1", "greater than or equal to 0"),
        ({"node": "v", "curve": [1.0] * 258}, "curve", "at most 257 items"),
        ({"node": "v", "curve": [1.0, "fast"]}, "curve.1", "valid number"),
        ({"node": "v b", "curve": [1.0]}, "node", "pattern"),
        # strict types: a wrong type is the client's mistake, never coerced (true was 1, "2" was 2)
        ({"node": "v", "curve": [1.0, True]}, "curve.1", "valid number"),
        ({"node": "v", "curve": [1.0, 2.0], "gpus": "2"}, "gpus", "valid integer"),
        ({"node": "v", "curve": [1.0, 2.0], "gpus": 1.0}, "gpus", "valid integer"),
        ({"node": "v", "curve": [1.0, 2.0], "weight": False}, "weight", "valid number"),
        ({"node": "v", "curve": [1.0, 2.0], "weight": 1e7}, "weight", "less than or equal to 1000000"),
        ({"node": "v", "curve": [1.0], "colour": "red"}, "colour", "Extra inputs"),
        ({"node": "v", "probe": PROBE | {"ceiling": 0}}, "probe.ceiling", "greater than 0"),
        ({"node": "v", "probe": PROBE | {"fetch_extra_s": -1.0}}, "probe.fetch_extra_s", "greater than or equal to 0"),
        ({"node": "v", "probe": PROBE, "max_workers": 999}, "max_workers", "less than or equal to 256"),
        # the store's columns hold 128 characters: a longer id or node was stored on SQLite, a 500 on PostgreSQL
        ({"job_id": "j" * 129, "node": "v", "curve": [1.0]}, "job_id", "at most 128 characters"),
        ({"node": "v" * 129, "curve": [1.0]}, "node", "at most 128 characters"),
        ({"node": "v", "curve": [1.0, 2e9]}, "curve.1", "less than or equal to 1000000000"),
        ({"node": "v", "probe": PROBE | {"fetch_extra_s": 60.0}}, "probe.fetch_extra_s", "less than 60"),
        ({"node": "v", "probe": PROBE | {"batch_size": 0}}, "probe.batch_size", "greater than or equal to 1"),
        ({"node": "v", "probe": PROBE | {"cores": 0}}, "probe.cores", "greater than or equal to 1"),
        ({"node": "v", "curve": []}, "curve", "at least 1 item"),
        ({"node": "v", "curve": [1.0], "gpus": 65}, "gpus", "less than or equal to 64"),
        ({"node": "v", "curve": [1.0], "main_cores": 257}, "main_cores", "less than or equal to 256"),
        ({"node": "v", "curve": [1.0], "mem_per_worker_mb": 1_048_577}, "mem_per_worker_mb", "less than or equal to"),
        ({"node": "v", "probe": PROBE, "max_workers": 100}, "max_workers", "above this service's limit"),
    ],
)
def test_bad_input_is_a_422_that_names_the_field(service, body, field, words):
    http, _ = service
    r = http.post("/jobs", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith(f"invalid request: {field}: ") and words in detail, detail
    assert http.get("/jobs", params={"node": "v"}).json() == []  # nothing registered


def test_a_curve_s_bounds_may_reach_its_last_point_of_up_to_256_workers(service):
    http, _ = service
    edge = register(http, "edge", "edge-a", [1.0, 2.0, 3.0], min_workers=2, max_workers=2)
    assert (edge["min_workers"], edge["max_workers"], edge["assignment"]["workers"]) == (2, 2, 2)
    assert len(register(http, "edge", "edge-long", [1.0] * 257)["curve"]) == 257  # w = 0..256
    for job_id in ("edge-a", "edge-long"):
        assert http.post(f"/jobs/{job_id}/finish", headers=AUTH).status_code == 200


def test_registering_a_job_id_again_is_a_200_that_replaces_its_spec_and_forgets_its_points(service):
    http, _ = service
    register(http, "again", "again-a", STEEP)
    assert http.post("/jobs/again-a/heartbeat", json={"throughput": 70.0, "workers": 2}, headers=AUTH).is_success
    r = http.post("/jobs", json={"job_id": "again-a", "node": "again", "curve": FLAT}, headers=AUTH)
    assert r.status_code == 200 and (r.json()["predicted"], r.json()["measured"]) == (FLAT, []), r.text
    assert http.post("/jobs/again-a/finish", headers=AUTH).status_code == 200


def test_a_node_no_plan_fits_says_why_until_one_does(service):
    http, _ = service
    http.put("/nodes/small", json={"cores": 2, "memory_mb": 8000}, headers=AUTH)
    register(http, "small", "sm-a", [1.0, 2.0])
    register(http, "small", "sm-b", [1.0, 2.0])
    register(http, "small", "sm-c", [1.0, 2.0])
    http.post("/plans/recompute", headers=AUTH)
    node = http.get("/nodes/small").json()
    assert node["problem"] == "2 cores cannot hold the jobs' 3 main processes and 0 minimum workers", node
    assert [n["problem"] for n in http.get("/nodes").json() if n["name"] == "small"] == [node["problem"]]
    # every job at its minimum until a plan fits: sm-c, the newcomer that overfilled the node, too
    plan = http.get("/nodes/small/plan").json()
    assert (plan["plan_id"], plan["policy"], plan["workers"]) == (
        node["plan_id"],
        "minimum",
        dict.fromkeys(["sm-a", "sm-b", "sm-c"], 0),
    )
    assigned = http.get("/jobs/sm-c").json()["assignment"]
    assert (assigned["workers"], assigned["plan_id"]) == (0, node["plan_id"]), assigned
    http.post("/jobs/sm-c/finish", headers=AUTH)
    http.post("/plans/recompute", headers=AUTH)
    node = http.get("/nodes/small").json()
    assert node["problem"] is None and node["plan_id"] is not None, node
    # a PUT that changes the budgets does not answer with the old budgets' problem
    register(http, "small", "sm-d", [1.0, 2.0])
    register(http, "small", "sm-e", [1.0, 2.0])
    http.post("/plans/recompute", headers=AUTH)
    assert http.get("/nodes/small").json()["problem"]
    node = http.put("/nodes/small", json={"cores": 16, "memory_mb": 8000}, headers=AUTH).json()
    assert node["cores"] == 16 and node["problem"] is None, node


@pytest.mark.parametrize(
    ("request_kwargs", "message"),
    [
        (
            {"data": {"node": "a", "curve": "1"}},
            "expected a JSON object sent with content-type application/json, "
            "got content-type 'application/x-www-form-urlencoded'",
        ),
        (
            {"content": b'{"node": "a", "curve": [1]}', "headers": {"content-type": "text/plain"}},
            "expected a JSON object sent with content-type application/json, got content-type 'text/plain'",
        ),
        ({"content": b'{"node": "a"}'}, "expected a JSON object sent with content-type application/json, got no"),
        ({"json": [1, 2]}, "expected a JSON object"),
        ({"content": b"[1]", "headers": {"content-type": "application/vnd.api+json"}}, "expected a JSON object"),
        ({}, "expected a JSON object sent with content-type application/json, got no content-type"),
        ({"headers": {"content-type": "application/json"}}, "expected a JSON object, got nothing"),
    ],
)
def test_a_body_that_is_not_a_json_object_says_what_to_send(service, request_kwargs, message):
    http, _ = service
    kw = dict(request_kwargs)
    r = http.post("/jobs", headers=AUTH | kw.pop("headers", {}), **kw)
    assert r.status_code == 422 and r.json()["detail"].startswith(f"invalid request: body: {message}"), r.text
    assert ("content-type" in r.json()["detail"]) == ("content-type" in message), r.text  # blamed only when wrong


def test_other_client_mistakes_are_4xx_never_500(service):
    http, _ = service
    assert (
        http.post("/jobs", content=b"{not json", headers=AUTH | {"content-type": "application/json"}).json()["detail"]
        == "invalid request: body: not valid JSON"
    )
    deep = b"[" * 5000 + b"]" * 5000  # json's recursion limit: FastAPI's bare "error parsing the body"
    for path in ("/jobs", "/jobs/ghost/heartbeat"):
        r = http.post(path, content=deep, headers=AUTH | {"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["detail"].startswith(
            "invalid request: body: could not be read as JSON"
        )
        assert http.post(path, content=deep, headers={"content-type": "application/json"}).status_code == 401
    r = http.post("/jobs/ghost/heartbeat", json={}, headers=AUTH)
    assert r.status_code == 404 and "register it first" in r.json()["detail"]
    r = http.post("/jobs/ghost/heartbeat", json={"throughput": 5.0}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: workers:")
    assert http.post("/jobs", content=b"x" * 70_000, headers=AUTH).status_code == 413
    chunked = iter([b"x" * 40_000, b"x" * 40_000])  # no content-length: counted as it arrives
    assert http.post("/jobs", content=chunked, headers=AUTH).status_code == 413
    assert http.get("/plans", params={"limit": 0}).status_code == 422
    # past SQLite's 64-bit integers: this was a 500 (OverflowError in the store)
    r = http.get(f"/plans/{2**63}")
    assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: plan_id:"), r.text
    assert http.get("/plans", params={"before": 0}).status_code == 422  # no plan id is below 1
    r = http.get("/plans", params={"before": 2**63})
    assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: before:"), r.text
    assert http.get(f"/plans/{2**63 - 1}").status_code == 404
    register(http, "fin", "fin-a", [1.0, 2.0])
    assert http.post("/jobs/fin-a/finish", headers=AUTH).json()["status"] == "finished"
    assert http.post("/jobs/fin-a/heartbeat", json={}, headers=AUTH).status_code == 409


def test_metrics_are_prometheus_text(service):
    http, _ = service
    http.get("/health")
    assert http.post("/jobs", content=b"x" * 70_000, headers=AUTH).status_code == 413
    r = http.get("/metrics")
    assert r.headers["content-type"].startswith("text/plain")
    text = r.text
    assert "# TYPE adlrec_http_requests_total counter" in text
    assert 'adlrec_http_requests_total{code="200",method="GET",route="/health"}' in text
    # refused before routing, so under no route's template
    assert 'adlrec_http_requests_total{code="413",method="POST",route="unmatched"}' in text
    assert 'adlrec_http_request_seconds_count{route="/health"}' in text and 'adlrec_jobs{status="active"}' in text
    # a line of its own: "adlrec_store_up 1" is also the start of its HELP text, which passed for it
    assert "adlrec_store_up 1" in text.splitlines() and "adlrec_plans " in text


def test_plan_history_of_one_node_pages_to_its_end(service):
    http, _ = service
    register(http, "pg-other", "pg-x", STEEP)  # another node's plans come first and between
    recompute(http)
    register(http, "pg", "pg-a", STEEP)
    recompute(http)
    register(http, "pg", "pg-b", FLAT)
    register(http, "pg-other", "pg-y", FLAT)
    recompute(http)
    http.post("/jobs/pg-a/finish", headers=AUTH)
    recompute(http)
    ids = [p["plan_id"] for p in http.get("/plans", params={"node": "pg"}).json()["plans"]]
    assert len(ids) == 3 and ids[-1] > 1
    first = http.get("/plans", params={"node": "pg", "limit": 2}).json()
    assert [p["plan_id"] for p in first["plans"]] == ids[:2] and first["next_before"] == ids[1]
    last = http.get("/plans", params={"node": "pg", "limit": 2, "before": first["next_before"]}).json()
    assert [p["plan_id"] for p in last["plans"]] == ids[2:] and last["next_before"] is None
    whole = http.get("/plans", params={"node": "pg", "limit": 3}).json()
    assert whole["next_before"] is None  # was the last id: a next page that is empty


def test_restart_keeps_jobs_and_plan_history(tmp_path):
    settings = service_settings(tmp_path)
    clock = ManualClock()
    with LiveServer(create_app(settings, clock=clock)) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        register(http, "rs", "rs-a", STEEP)
        http.post("/jobs/rs-a/heartbeat", json={"throughput": 42.0, "workers": 1}, headers=AUTH)
        first = recompute(http)
        register(http, "rs", "rs-b", FLAT)
        second = recompute(http)
    with LiveServer(create_app(settings, clock=clock)) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        jobs = http.get("/jobs", params={"node": "rs"}).json()
        assert [j["job_id"] for j in jobs] == ["rs-a", "rs-b"]
        assert jobs[0]["measured"][0]["throughput"] == 42.0 and jobs[0]["reported_throughput"] == 42.0
        history = http.get("/plans", params={"node": "rs"}).json()["plans"]
        assert [p["plan_id"] for p in history] == [second[0]["plan_id"], first[0]["plan_id"]]
        http.post("/jobs/rs-b/finish", headers=AUTH)
        (third,) = recompute(http)
        assert third["plan_id"] > second[0]["plan_id"] and third["workers"] == {"rs-a": 3}


def test_heartbeats_are_written_behind_and_a_clean_stop_writes_them_all(tmp_path):
    store = JobStore(f"sqlite:///{tmp_path / 'behind.db'}")
    settings = service_settings(tmp_path)
    with LiveServer(create_app(settings, store=store, flush_s=3600)) as srv, httpx.Client(base_url=srv.url) as http:
        register(http, "wb", "wb-a", STEEP)
        http.post("/jobs/wb-a/heartbeat", json={"throughput": 55.0, "workers": 2}, headers=AUTH)
        measured = http.get("/jobs/wb-a").json()["measured"]
        assert measured == [{"workers": 2, "throughput": 55.0, "samples": 1, "data_wait": None}]  # seen at once
        assert store.points("wb-a") == []  # in memory until the next flush
        recompute(http)  # a recompute flushes first
        assert store.points("wb-a")[0].throughput == 55.0
        http.post("/jobs/wb-a/heartbeat", json={"throughput": 75.0, "workers": 3}, headers=AUTH)
        assert [p.workers for p in store.points("wb-a")] == [2]
    assert [p.throughput for p in store.points("wb-a")] == [55.0, 75.0]  # the stop flushed the last one
    assert store.job("wb-a").reported_throughput == 75.0 and store.job("wb-a").reported_workers == 3
    store.close()


def test_the_write_behind_flushes_on_its_own(tmp_path):
    store = JobStore(f"sqlite:///{tmp_path / 'own-flush.db'}")
    settings = service_settings(tmp_path)
    with LiveServer(create_app(settings, store=store, flush_s=0.05)) as srv, httpx.Client(base_url=srv.url) as http:
        register(http, "of", "of-a", STEEP)
        http.post("/jobs/of-a/heartbeat", json={"throughput": 33.0, "workers": 1}, headers=AUTH)
        deadline = time.monotonic() + 20  # a bound on waiting, not a timing assertion
        while not store.points("of-a") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert store.points("of-a")[0].throughput == 33.0
        assert "adlrec_store_flushes_total" in http.get("/metrics").text
    store.close()


def test_a_register_triggers_a_debounced_recompute(tmp_path):
    settings = service_settings(tmp_path, service_debounce_s=0.05)
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        register(http, "db", "db-a", STEEP)
        deadline = time.monotonic() + 20  # a bound on waiting, not a timing assertion
        while http.get("/nodes/db/plan").status_code == 404 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert http.get("/nodes/db/plan").json()["workers"] == {"db-a": 3}
        metrics = http.get("/metrics").text
        assert 'adlrec_recomputes_total{trigger="register"} 1' in metrics


def test_the_store_can_be_passed_in(tmp_path):
    """On PostgreSQL too, when ADLREC_TEST_POSTGRES_URL names a throwaway database."""
    store = JobStore(os.environ.get("ADLREC_TEST_POSTGRES_URL") or f"sqlite:///{tmp_path / 'own.db'}")
    settings = service_settings(tmp_path)
    with LiveServer(create_app(settings, store=store)) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        register(http, "own", "own-a", STEEP)
    assert store.job("own-a").spec.node == "own"  # the app does not close a store it was given
    store.close()


def test_the_openapi_page_documents_every_route(service):
    http, _ = service
    paths = http.get("/openapi.json").json()["paths"]
    assert {"/jobs", "/jobs/{job_id}/heartbeat", "/jobs/{job_id}/finish", "/nodes/{name}/plan", "/plans"} <= set(paths)
    current = paths["/plans/current"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert current["type"] == "array" and current["items"] == {"$ref": "#/components/schemas/PlanOut"}
    assert all(op.get("summary") for ops in paths.values() for op in ops.values())
    assert http.get("/docs").status_code == 200
    # one operation id per operation: GET and HEAD /health shared one, and FastAPI warned at every schema build
    ids = [op["operationId"] for ops in paths.values() for op in ops.values()]
    assert len(ids) == len(set(ids)) and {"get", "head"} <= set(paths["/health"])


def test_every_nodes_current_plan_in_one_call(service):
    http, _ = service
    register(http, "cur-b", "cur-b1", STEEP)
    recompute(http)  # cur-b's plan first: the list is by name all the same, not in the order the plans came
    register(http, "cur-a", "cur-a1", FLAT)
    assert http.put("/nodes/cur-none", json={"cores": 2, "memory_mb": 1000}, headers=AUTH).status_code == 200
    recompute(http)
    r = http.get("/plans/current")
    assert r.status_code == 200, r.text  # it was a 422: "current" is not a plan id
    current = r.json()
    names = [p["node"] for p in current]
    assert names == sorted(names) and len(set(names)) == len(names)
    mine = {p["node"]: p for p in current if p["node"].startswith("cur-")}
    assert set(mine) == {"cur-a", "cur-b"}  # a node without a plan has none to list
    for node in ("cur-a", "cur-b"):
        assert mine[node] == http.get(f"/nodes/{node}/plan").json()  # what one node's route answers
    register(http, "cur-b", "cur-b2", RISING)
    (newer,) = [p for p in recompute(http) if p["node"] == "cur-b"]
    assert {p["node"]: p for p in http.get("/plans/current").json()}["cur-b"] == newer


def test_a_store_that_does_not_answer_is_a_503_and_what_memory_holds_still_answers(tmp_path, caplog):
    # its folder removed and its pooled connections dropped (as a restarted database server drops them): every
    # read that needs the store was a 500 with no word of why
    with server_with_breakable_store(tmp_path) as (srv, http, break_store):
        register(http, "down", "down-a", STEEP)
        (plan,) = recompute(http)
        break_store()
        with caplog.at_level(logging.ERROR, logger="adlrec.service"):
            for path in ("/health", "/nodes", "/nodes/down", "/nodes/down/plan", "/plans", "/jobs"):
                r = http.get(path)
                assert r.status_code == 503, (path, r.status_code, r.text)
                assert r.json()["detail"].startswith("the job store is unavailable"), (path, r.text)
                assert r.headers["retry-after"] == "5"
        assert any("the job store did not answer" in m for m in caplog.messages)  # the cause, in the log
        # what the service holds in memory answers as before; the metrics too (they were a 503: no counter at all
        # when a scraper most needs the failure counters), with the store said to be down
        metrics = http.get("/metrics")
        assert metrics.status_code == 200, metrics.text
        assert "adlrec_store_up 0" in metrics.text and 'adlrec_jobs{status="active"} 1' in metrics.text
        assert "adlrec_plans " not in metrics.text  # only the store knows how many it holds
        assert http.get("/plans/current").json() == [plan]
        assert [j["job_id"] for j in http.get("/jobs", params={"status": "active"}).json()] == ["down-a"]
        beat = http.post("/jobs/down-a/heartbeat", json={"throughput": 80.0, "workers": 2}, headers=AUTH)
        assert beat.status_code == 200 and beat.json()["plan_id"] == plan["plan_id"], beat.text


def test_a_job_of_ranks_registers_one_ranks_figures_and_is_told_each_ranks_count(service):
    http, _ = service
    assert http.put("/nodes/rk", json={"cores": 9, "memory_mb": 8000}, headers=AUTH).status_code == 200
    job = register(http, "rk", "rk-ddp", STEEP, ranks=2, requested_workers=4)
    assert (job["ranks"], job["gpus"], job["main_cores"], job["requested_workers"]) == (2, 2, 2, 4)
    assert job["curve"] == STEEP  # one rank's
    assert job["assignment"]["workers"] == 4  # no plan yet: what each rank asked for
    register(http, "rk", "rk-one", FLAT, gpus=1)
    (plan,) = [p for p in recompute(http) if p["node"] == "rk"]
    # 9 cores less 3 main processes: the 2-rank job gets a multiple of its ranks, 3 a rank to reach its peak
    assert plan["workers"] == {"rk-ddp": 6, "rk-one": 0} and plan["throughput"]["rk-ddp"] == 200.0
    beat = http.post("/jobs/rk-ddp/heartbeat", json={"throughput": 95.0, "workers": 3}, headers=AUTH).json()
    assert beat == {"job_id": "rk-ddp", "workers": 3, "plan_id": plan["plan_id"], "status": "active"}
    got = http.get("/jobs/rk-ddp").json()
    assert got["reported_workers"] == 3 and got["measured"][0]["workers"] == 3  # a rank's point of a rank's curve
    # the GPUs and main processes may be given: 2 ranks sharing one GPU
    shared = register(http, "rk", "rk-shared", STEEP, ranks=2, gpus=1, main_cores=1)
    assert (shared["gpus"], shared["main_cores"]) == (1, 1)


@pytest.mark.parametrize("ranks", [0, 65, 1.5, "2"])
def test_a_rank_count_out_of_range_is_a_clear_422_and_registers_nothing(service, ranks):
    http, _ = service
    r = http.post("/jobs", json={"job_id": "rk-bad", "node": "rk-bad", "curve": STEEP, "ranks": ranks}, headers=AUTH)
    assert r.status_code == 422 and "ranks" in r.text
    assert http.get("/jobs/rk-bad").status_code == 404


def test_a_probe_s_max_workers_may_reach_the_service_s_limit_and_no_further(service):
    http, _ = service
    r = http.post("/jobs", json={"job_id": "cap-over", "node": "cap", "probe": PROBE, "max_workers": 33}, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == "invalid request: max_workers: 33 is above this service's limit of 32 workers"
    assert http.get("/jobs/cap-over").status_code == 404
    job = register(http, "cap", "cap-edge", probe=PROBE, max_workers=32)
    assert job["max_workers"] == 32 and len(job["predicted"]) == 33
    job = register(http, "cap", "cap-default", probe=PROBE)  # no max_workers: the service's limit
    assert job["max_workers"] == 32 and len(job["predicted"]) == 33


def test_a_probe_s_min_workers_above_the_service_s_limit_is_a_422_and_registers_nothing(service):
    # no max_workers given, so the body alone cannot say min_workers is too high: the route must
    http, _ = service
    body = {"job_id": "cap-min", "node": "cap", "probe": PROBE, "min_workers": 33}
    r = http.post("/jobs", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == "invalid request: min_workers: 33 is above max_workers (32)"
    assert http.get("/jobs/cap-min").status_code == 404


def test_a_registration_s_every_field_is_kept_as_sent(service):
    http, _ = service
    job = register(
        http,
        "kept",
        "kept-a",
        STEEP,
        weight=2.5,
        min_workers=1,
        max_workers=4,
        requested_workers=3,
        mem_per_worker_mb=300,
        gpus=2,
        main_cores=3,
    )
    sent = {"weight": 2.5, "min_workers": 1, "max_workers": 4, "requested_workers": 3, "mem_per_worker_mb": 300}
    assert {k: job[k] for k in sent} == sent and (job["gpus"], job["main_cores"], job["ranks"]) == (2, 3, 1)
    assert {k: http.get("/jobs/kept-a").json()[k] for k in sent} == sent  # as stored, read back


def test_a_registration_at_each_end_of_every_range_is_taken(service):
    """The ranges' ends are in them: none of these is a client's mistake."""
    http, _ = service
    low = register(http, "ends", "ends-low", [0.0], gpus=0, weight=0.0, main_cores=0, requested_workers=0)
    assert (low["gpus"], low["weight"], low["main_cores"], low["requested_workers"]) == (0, 0.0, 0, 0)
    high = register(
        http,
        "ends",
        "e" * 128,
        [1e9] * 257,
        ranks=64,
        gpus=64,
        weight=1e6,
        main_cores=256,
        mem_per_worker_mb=1_048_576,
        min_workers=256,
        max_workers=256,
        requested_workers=256,
    )
    got = http.get(f"/jobs/{'e' * 128}").json()
    for key in ("ranks", "gpus", "weight", "main_cores", "mem_per_worker_mb", "min_workers", "max_workers"):
        assert got[key] == high[key], key
    assert (got["ranks"], got["weight"], got["mem_per_worker_mb"], got["max_workers"]) == (64, 1e6, 1_048_576, 256)
    big = http.put("/nodes/ends-big", json={"cores": 4096, "memory_mb": 1 << 30}, headers=AUTH)
    assert big.status_code == 200 and big.json()["memory_mb"] == 1 << 30, big.text
    for job_id in ("ends-low", "e" * 128):
        assert http.post(f"/jobs/{job_id}/finish", headers=AUTH).status_code == 200


def test_jobs_filter_by_each_status_and_refuse_any_other(service):
    http, clock = service
    register(http, "st", "st-a", STEEP)
    register(http, "st", "st-b", STEEP)
    register(http, "st", "st-c", STEEP)
    http.post("/jobs/st-c/finish", headers=AUTH)
    clock.advance(40)
    http.post("/jobs/st-b/heartbeat", json={}, headers=AUTH)
    clock.advance(30)  # a: silent for 70 s > TTL 60 s
    recompute(http)  # expires a
    by = {
        s: [j["job_id"] for j in http.get("/jobs", params={"status": s, "node": "st"}).json()]
        for s in ("active", "expired", "finished")
    }
    assert by == {"active": ["st-b"], "expired": ["st-a"], "finished": ["st-c"]}
    for bad in ("inactive", "Active", "expired "):  # the pattern is anchored: "inactive" holds "active"
        r = http.get("/jobs", params={"status": bad})
        assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: status:"), r.text


def test_a_job_id_longer_than_128_characters_is_a_422_not_an_unknown_job(service):
    http, _ = service
    long_id = "j" * 129
    r = http.get(f"/jobs/{long_id}")
    assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: job_id:"), r.text
    r = http.post(f"/jobs/{long_id}/heartbeat", json={}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: job_id:"), r.text


def test_the_plan_of_an_unknown_node_is_a_404_that_says_no_such_node(service):
    http, _ = service
    r = http.get("/nodes/ghost-node/plan")
    assert r.status_code == 404 and r.json()["detail"] == "no node named 'ghost-node'", r.text
    http.put("/nodes/planless", json={"cores": 2, "memory_mb": 100}, headers=AUTH)
    r = http.get("/nodes/planless/plan")
    assert r.status_code == 404 and r.json()["detail"] == "node 'planless' has no plan yet", r.text


def test_a_plan_page_holds_at_most_500_plans(service):
    http, _ = service
    assert http.get("/plans", params={"limit": 500}).status_code == 200
    r = http.get("/plans", params={"limit": 501})
    assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: limit:"), r.text


def test_a_finish_a_revived_job_and_a_node_s_new_budgets_each_ask_for_a_debounced_recompute(tmp_path):
    clock = ManualClock()
    settings = service_settings(tmp_path, service_debounce_s=0.05, service_ttl_s=60)

    def plan_becomes(http, done, what):
        deadline = time.monotonic() + 20  # a bound on waiting, not a timing assertion
        while time.monotonic() < deadline:
            r = http.get("/nodes/dq/plan")
            if r.status_code == 200 and done(r.json()["workers"]):
                return
            time.sleep(0.05)
        raise AssertionError(f"no plan {what} within 20 s: {r.text}")

    # no recompute but the debounced ones: the interval is an hour
    with LiveServer(create_app(settings, clock=clock)) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        register(http, "dq", "dq-a", STEEP)
        register(http, "dq", "dq-b", FLAT)
        plan_becomes(http, lambda w: set(w) == {"dq-a", "dq-b"}, "of a and b")
        assert http.post("/jobs/dq-b/finish", headers=AUTH).status_code == 200
        plan_becomes(http, lambda w: set(w) == {"dq-a"}, "without the finished b")
        clock.advance(70)
        (empty,) = [p for p in recompute(http) if p["node"] == "dq"]
        assert empty["workers"] == {}  # a, silent past its TTL, expired
        assert http.post("/jobs/dq-a/heartbeat", json={}, headers=AUTH).json()["status"] == "active"
        plan_becomes(http, lambda w: w == {"dq-a": 3}, "of the revived a")
        assert http.put("/nodes/dq", json={"cores": 2, "memory_mb": 8000}, headers=AUTH).status_code == 200
        plan_becomes(http, lambda w: w == {"dq-a": 1}, "on 2 cores: 1 worker beside a's main process")
        metrics = http.get("/metrics").text
        for trigger in ("finish", "revive", "node"):
            assert f'adlrec_recomputes_total{{trigger="{trigger}"}} 1' in metrics, trigger


@pytest.mark.parametrize("configured", [True, False])
def test_a_node_first_seen_in_a_registration_gets_the_configured_budgets_else_the_machine_s(tmp_path, configured):
    """service_node_cores / service_node_memory_mb (docs/service.md); at 0, their default, this machine's."""
    import psutil

    budgets = (5, 777) if configured else (0, 0)
    settings = service_settings(tmp_path, service_node_cores=budgets[0], service_node_memory_mb=budgets[1])
    with LiveServer(create_app(settings, start_scheduler=False)) as srv, httpx.Client(base_url=srv.url) as http:
        register(http, "fresh", "fresh-a", STEEP)
        node = http.get("/nodes/fresh").json()
    machine = (os.cpu_count(), psutil.virtual_memory().total // 2**20)
    assert (node["cores"], node["memory_mb"]) == (budgets if configured else machine)


def test_putting_a_node_again_changes_its_budgets_and_the_list_shows_each_node_s_plan(service):
    http, _ = service
    first = http.put("/nodes/bud", json={"cores": 6, "memory_mb": 8000}, headers=AUTH).json()
    assert (first["cores"], first["memory_mb"]) == (6, 8000)
    again = http.put("/nodes/bud", json={"cores": 12, "memory_mb": 4000}, headers=AUTH).json()
    assert (again["cores"], again["memory_mb"]) == (12, 4000)
    register(http, "bud", "bud-a", STEEP)
    (plan,) = [p for p in recompute(http) if p["node"] == "bud"]
    one = http.get("/nodes/bud").json()
    assert one == {
        "name": "bud",
        "cores": 12,
        "memory_mb": 4000,
        "active_jobs": 1,
        "plan_id": plan["plan_id"],
        "problem": None,
    }
    assert [n for n in http.get("/nodes").json() if n["name"] == "bud"] == [one]


def test_metrics_count_jobs_by_each_status_and_plans_apart(service):
    http, _ = service
    text = http.get("/metrics").text
    statuses = {line.split('"')[1] for line in text.splitlines() if line.startswith("adlrec_jobs{")}
    assert statuses == {"active", "finished", "expired"}, text  # "plans" was a job status here
    assert any(line.startswith("adlrec_plans ") for line in text.splitlines())


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"data_wait": 1.5}, "data_wait", "less than or equal to 1"),
        ({"data_wait": -0.1}, "data_wait", "greater than or equal to 0"),
        ({"throughput": -1.0, "workers": 1}, "throughput", "greater than or equal to 0"),
        # json reads NaN (not JSON, but Python's json takes it): said to be what it is, not "too large"
        (b'{"throughput": NaN, "workers": 1}', "throughput", "finite number"),
        ({"throughput": 5.0, "workers": 257}, "workers", "less than or equal to 256"),
        ({"throughput": 5.0, "workers": 1, "colour": "red"}, "colour", "Extra inputs"),
    ],
)
def test_a_bad_heartbeat_is_a_422_that_names_the_field_and_changes_nothing(service, body, field, words):
    http, _ = service
    job_id = f"badbeat-{uuid.uuid4().hex[:8]}"  # one per case: two cases may name the same field
    job = register(http, "badbeat", job_id, STEEP)
    sent = {"json": body} if isinstance(body, dict) else {"content": body}
    r = http.post(f"/jobs/{job_id}/heartbeat", headers=AUTH | {"content-type": "application/json"}, **sent)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith(f"invalid request: {field}: ") and words in detail, detail
    after = http.get(f"/jobs/{job_id}").json()
    assert (after["measured"], after["data_wait"], after["last_seen"]) == ([], None, job["last_seen"])


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"cores": 0, "memory_mb": 100}, "cores", "greater than or equal to 1"),
        ({"cores": 4097, "memory_mb": 100}, "cores", "less than or equal to 4096"),
        ({"cores": 2, "memory_mb": -1}, "memory_mb", "greater than or equal to 0"),
        ({"cores": 2}, "memory_mb", "Field required"),
        ({"cores": 2.0, "memory_mb": 100}, "cores", "valid integer"),
        ({"cores": 2, "memory_mb": (1 << 30) + 1}, "memory_mb", "less than or equal to 1073741824"),
    ],
)
def test_a_bad_node_budget_is_a_422_that_names_the_field_and_changes_nothing(service, body, field, words):
    http, _ = service
    assert http.put("/nodes/badnode", json={"cores": 4, "memory_mb": 500}, headers=AUTH).status_code == 200
    r = http.put("/nodes/badnode", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert detail.startswith(f"invalid request: {field}: ") and words in detail, detail
    node = http.get("/nodes/badnode").json()
    assert (node["cores"], node["memory_mb"]) == (4, 500)


def test_a_job_shows_its_times_and_what_it_last_reported(service):
    http, clock = service
    job = register(http, "times", "times-a", STEEP)
    assert job["registered_at"] == job["last_seen"] == clock() and job["finished_at"] is None
    clock.advance(5)
    http.post("/jobs/times-a/heartbeat", json={"throughput": 70.0, "workers": 2, "data_wait": 0.25}, headers=AUTH)
    got = http.get("/jobs/times-a").json()
    assert (got["registered_at"], got["last_seen"]) == (job["registered_at"], clock())
    assert (got["reported_workers"], got["reported_throughput"], got["data_wait"]) == (2, 70.0, 0.25)
    assert got["measured"] == [{"workers": 2, "throughput": 70.0, "samples": 1, "data_wait": 0.25}]
    clock.advance(5)
    assert http.post("/jobs/times-a/finish", headers=AUTH).json() == {"job_id": "times-a", "status": "finished"}
    done = http.get("/jobs/times-a").json()
    assert done["status"] == "finished" and done["finished_at"] == clock()


def test_a_plan_shows_when_it_was_made_what_it_uses_and_why(service):
    http, clock = service
    http.put("/nodes/pu", json={"cores": 6, "memory_mb": 8000}, headers=AUTH)
    register(http, "pu", "pu-a", STEEP, mem_per_worker_mb=100)
    register(http, "pu", "pu-b", FLAT, mem_per_worker_mb=100)
    (plan,) = [p for p in recompute(http) if p["node"] == "pu"]
    assert plan["created_at"] == clock() and plan["workers"] == {"pu-a": 3, "pu-b": 1}
    assert plan["memory_used_mb"] == 400 and plan["cores_used"] == 6  # 4 workers and 2 main processes
    assert set(plan["reasons"]) == {"pu-a", "pu-b"} and all(plan["reasons"].values())
    assert http.get(f"/plans/{plan['plan_id']}").json() == plan == http.get("/nodes/pu/plan").json()


def test_health_says_the_version_the_store_and_the_policy(service):
    http, _ = service
    assert http.get("/health").json() == {
        "status": "ok",
        "version": __version__,
        "store": "sqlite",
        "policy": "optimal",
    }


def test_a_registration_with_neither_probe_nor_curve_hears_the_rule_itself(service):
    http, _ = service
    r = http.post("/jobs", json={"node": "v"}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"] == "invalid request: body: give exactly one of probe or curve"


def test_a_probe_s_min_workers_may_reach_the_service_s_limit(service):
    http, _ = service
    job = register(http, "cap", "cap-min-edge", probe=PROBE, min_workers=32)  # no max_workers: the limit, 32
    assert (job["min_workers"], job["max_workers"]) == (32, 32)
    assert http.post("/jobs/cap-min-edge/finish", headers=AUTH).status_code == 200


def test_jobs_registered_without_an_id_each_get_their_own(service):
    http, _ = service
    a = register(http, "anon", None, [1.0, 2.0])
    b = register(http, "anon", None, [1.0, 2.0])
    assert a["job_id"] != b["job_id"]
    assert sorted(j["job_id"] for j in http.get("/jobs", params={"node": "anon"}).json()) == sorted(
        [a["job_id"], b["job_id"]]
    )


@pytest.mark.parametrize("name", ["-lead", ".lead", "with space"])
def test_a_node_name_a_job_could_not_register_on_is_a_422(service, name):
    http, _ = service
    r = http.put(f"/nodes/{name}", json={"cores": 2, "memory_mb": 100}, headers=AUTH)
    assert r.status_code == 422 and r.json()["detail"].startswith("invalid request: name:"), r.text
    assert all(n["name"] != name for n in http.get("/nodes").json())


def test_without_a_token_writes_need_no_authorization(tmp_path):
    """The default on loopback: no token configured, so a write without the header goes through (route and fast path)."""
    settings = service_settings(tmp_path, service_token=None)
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=10) as http:
        assert http.put("/nodes/open", json={"cores": 4, "memory_mb": 100}).status_code == 200
        r = http.post("/jobs", json={"job_id": "open-a", "node": "open", "curve": STEEP})
        assert r.status_code == 201, r.text
        r = http.post("/jobs/open-a/heartbeat", json={"throughput": 50.0, "workers": 1})
        assert r.status_code == 200 and r.json()["status"] == "active", r.text
        assert http.post("/plans/recompute").status_code == 200
        assert http.post("/jobs/open-a/finish").json()["status"] == "finished"


def test_each_heartbeat_and_registration_is_counted(service):
    http, _ = service

    def counter(name: str) -> float:
        lines = [ln for ln in http.get("/metrics").text.splitlines() if ln.startswith(f"{name} ")]
        return float(lines[0].split()[1]) if lines else 0.0

    def heartbeats() -> float:
        return counter("adlrec_heartbeats_total")

    def registrations() -> float:
        return counter("adlrec_registrations_total")

    before = heartbeats(), registrations()
    register(http, "hbc", "hbc-a", STEEP)
    for body in ({}, {"throughput": 50.0, "workers": 1}):
        assert http.post("/jobs/hbc-a/heartbeat", json=body, headers=AUTH).status_code == 200
    assert http.post("/jobs/hbc-a/heartbeat", json={"throughput": 5.0}, headers=AUTH).status_code == 422  # not one
    assert (heartbeats(), registrations()) == (before[0] + 2, before[1] + 1)


def test_a_body_with_several_mistakes_hears_of_each(service):
    http, _ = service
    r = http.post("/jobs", json={"node": "many", "curve": [1.0, 2.0], "gpus": -1, "weight": -1.0}, headers=AUTH)
    assert r.status_code == 422, r.text
    detail = r.json()["detail"]
    assert "gpus: " in detail and "; weight: " in detail, detail
    assert [e["field"] for e in r.json()["errors"]] == ["gpus", "weight"]


def test_a_write_whose_client_leaves_before_its_body_ends_is_not_done(service):
    """The body limit passed a cut body on as whole: a PUT whose JSON arrived but not the rest its Content-Length
    promised (the client gone) declared the node."""
    import socket

    http, _ = service
    left = 'adlrec_http_requests_total{code="499",method="PUT",route="unmatched"} 1'
    body = b'{"cores": 4, "memory_mb": 100}'
    head = "PUT /nodes/cut HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer s3cret\r\nContent-Type: application/json\r\n"
    with socket.create_connection(("127.0.0.1", http.base_url.port), timeout=10) as s:
        s.sendall(f"{head}Content-Length: {len(body) + 50}\r\n\r\n".encode() + body)
        time.sleep(0.2)  # the service reads what came, then sees the client leave
    deadline = time.monotonic() + 20  # a bound on waiting for the service to count it, not a timing assertion
    while left not in http.get("/metrics").text and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left in http.get("/metrics").text  # counted as a client that left (it was done, and counted 200)
    assert http.get("/nodes/cut").status_code == 404
    assert http.put("/nodes/cut", json={"cores": 4, "memory_mb": 100}, headers=AUTH).status_code == 200  # whole: done
