"""The service predicts with the model registered in a real SQLite MLflow registry, and follows its alias."""

from __future__ import annotations

import logging

import httpx
import pytest

from adlrec.predict.evaluate import curves_from_profiles
from adlrec.predict.features import ProbeFeatures
from adlrec.predict.fit import fit_and_register
from adlrec.predict.models import AnalyticModel, InterpModel, LearnedModel
from adlrec.service import create_app
from adlrec.tracking import ModelRegistry
from tests.factories import (
    register_model_of_other_features,
    register_narrow_champion,
    register_one_row_champion,
    register_scripted_champion,
    synthetic_profiles,
)
from tests.service_helpers import PROBE, LiveServer, ManualClock, service_settings

AUTH = {"Authorization": "Bearer s3cret"}


def test_registered_model_predicts_and_a_moved_alias_re_predicts_active_jobs(tmp_path):
    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    curves = curves_from_profiles(synthetic_profiles(workloads=4))
    fit_and_register(curves, {"kind": "interp"}, registry, sources="test")
    features = ProbeFeatures(**PROBE)
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        assert http.get("/model").json() | {"note": ""} == {
            "name": "adlrec-throughput",
            "version": "1",
            "alias": "champion",
            "source": "adlrec-throughput v1",
            "note": "",
        }
        body = {"job_id": "m-a", "node": "m", "probe": PROBE, "max_workers": 6}
        job = http.post("/jobs", json=body, headers=AUTH).json()
        assert job["curve_source"] == "adlrec-throughput v1"
        assert job["predicted"] == pytest.approx(list(InterpModel().predict(features, range(7))))
        explicit = {"job_id": "m-x", "node": "m", "curve": [1.0, 2.0, 3.0]}
        assert http.post("/jobs", json=explicit, headers=AUTH).status_code == 201

        outcome = fit_and_register(curves, {"kind": "analytic"}, registry, sources="test")
        registry.set_champion(outcome.version)
        moved = http.post("/model/refresh", headers=AUTH).json()
        assert moved["version"] == "2"
        job = http.get("/jobs/m-a").json()
        assert job["curve_source"] == "adlrec-throughput v2"
        assert job["predicted"] == pytest.approx(list(AnalyticModel().predict(features, range(7))))
        kept = http.get("/jobs/m-x").json()  # a curve the job sent is not the model's to predict
        assert (kept["curve_source"], kept["predicted"]) == ("explicit", [1.0, 2.0, 3.0])


def test_the_champion_is_looked_up_at_start_not_left_to_the_first_periodic_recompute(tmp_path):
    """Before the service takes requests (docs/service.md): with no periodic recompute to follow the alias, the
    first registration is still predicted by the champion."""
    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    fit_and_register(curves_from_profiles(synthetic_profiles(workloads=4)), {"kind": "interp"}, registry, sources="t")
    app = create_app(settings, start_scheduler=False)
    with LiveServer(app) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        assert http.get("/model").json()["version"] == "1"
        body = {"job_id": "start-a", "node": "start", "probe": PROBE, "max_workers": 6}
        assert http.post("/jobs", json=body, headers=AUTH).json()["curve_source"] == "adlrec-throughput v1"


def test_a_champion_whose_alias_or_model_is_removed_leaves_the_service_on_the_analytic_model(tmp_path):
    """No model, or no alias, is the registry's answer (not its absence): the service falls back and predicts the
    active jobs' curves again, analytically."""
    from adlrec.tracking import MODEL_NAME

    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    fit_and_register(curves_from_profiles(synthetic_profiles(workloads=4)), {"kind": "interp"}, registry, sources="t")
    analytic = pytest.approx(list(AnalyticModel().predict(ProbeFeatures(**PROBE), range(7))))
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        body = {"job_id": "gone-a", "node": "gone", "probe": PROBE, "max_workers": 6}
        assert http.post("/jobs", json=body, headers=AUTH).json()["curve_source"] == "adlrec-throughput v1"
        for remove in (
            lambda: registry.client.delete_registered_model_alias(MODEL_NAME, "champion"),
            lambda: registry.client.delete_registered_model(MODEL_NAME),
        ):
            remove()
            info = http.post("/model/refresh", headers=AUTH).json()
            assert (info["source"], info["version"]) == ("analytic", None)
            assert info["note"].startswith(f"no {MODEL_NAME}@champion in "), info
            job = http.get("/jobs/gone-a").json()
            assert job["curve_source"] == "analytic" and job["predicted"] == analytic
            if registry.client.search_registered_models():  # the alias alone went: set it again
                registry.set_champion("1")
                assert http.post("/model/refresh", headers=AUTH).json()["version"] == "1"
                assert http.get("/jobs/gone-a").json()["curve_source"] == "adlrec-throughput v1"


def _unpicklable_champion(registry, curves, settings) -> None:
    fit_and_register(curves, {"kind": "interp"}, registry, sources="test")
    (pickled,) = settings.artifact_root.rglob("python_model.pkl")
    pickled.write_bytes(b"cadlrec.predict.models\nModelOfAnotherAdlrec\n.")  # a class this adlrec lacks


def _champion_of_other_features(registry, curves, settings) -> None:
    register_model_of_other_features(registry, curves)


def _champion_predicting_nan(registry, curves, settings) -> None:
    register_scripted_champion(registry, curves, (100.0, float("nan"), 200.0))  # NaN at 1 worker, a test probe's count


def _champion_answering_one_row(registry, curves, settings) -> None:
    register_one_row_champion(registry)  # another program's pyfunc: one throughput for any number of rows


@pytest.mark.parametrize(
    ("break_champion", "why"),
    [
        (_unpicklable_champion, "cannot be loaded"),
        (_champion_answering_one_row, "cannot predict a test probe: ValueError: expected 4 throughputs, got an array"),
        (_champion_of_other_features, "cannot predict a test probe"),
        (_champion_predicting_nan, "cannot predict a test probe: ValueError: expected 4 finite throughputs"),
    ],
)
def test_a_champion_the_service_cannot_use_leaves_it_on_the_analytic_model_until_one_it_can(
    tmp_path, break_champion, why
):
    """A champion that cannot be loaded (a class this adlrec lacks) failed the service's start (its
    lifespan) and made POST /model/refresh a 500; one that loads but cannot predict (an adlrec with other
    features pickled it: sklearn's 'X has 12 features, but ... expecting 10') made every POST /jobs a 500.
    Either way the service now predicts analytically, says why, and takes the next usable champion."""
    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    curves = curves_from_profiles(synthetic_profiles(workloads=4))
    break_champion(registry, curves, settings)
    features = ProbeFeatures(**PROBE)
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        info = http.get("/model").json()
        assert info["source"] == "analytic" and info["version"] is None
        assert "adlrec-throughput v1 (@champion)" in info["note"] and why in info["note"]
        body = {"job_id": "b-a", "node": "b", "probe": PROBE, "max_workers": 6}
        r = http.post("/jobs", json=body, headers=AUTH)
        assert r.status_code == 201 and r.json()["curve_source"] == "analytic"
        assert r.json()["predicted"] == pytest.approx(list(AnalyticModel().predict(features, range(7))))
        assert http.post("/model/refresh", headers=AUTH).json()["source"] == "analytic"  # was a 500

        outcome = fit_and_register(curves, {"kind": "interp"}, registry, sources="test")
        registry.set_champion(outcome.version)  # a usable champion: the next refresh takes it
        taken = http.post("/model/refresh", headers=AUTH).json()
        assert (taken["version"], taken["note"]) == ("2", ""), taken  # the old champion's note goes with it
        assert http.get("/jobs/b-a").json()["curve_source"] == "adlrec-throughput v2"


def test_a_champion_predicting_below_zero_or_not_finite_at_some_counts_is_read_as_no_throughput_there(tmp_path):
    """The test probe a champion must predict (finite at 0, 1, 2 and 64 workers) lets through a model adlrec did
    not fit that predicts below 0, NaN or an infinity at other counts: each such count reads as no throughput (0),
    so the registration is a 201 with a curve the allocator takes, its peak where the model put it."""
    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    curves = curves_from_profiles(synthetic_profiles(workloads=4))
    nan, inf = float("nan"), float("inf")
    register_scripted_champion(registry, curves, (100.0, 150.0, 200.0, -50.0, nan, inf, -inf, 300.0))
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        assert http.get("/model").json()["version"] == "1"  # it passed the test probe
        body = {"job_id": "odd-a", "node": "odd", "probe": PROBE, "max_workers": 7}
        r = http.post("/jobs", json=body, headers=AUTH)
        assert r.status_code == 201, r.text
        assert r.json()["curve_source"] == "adlrec-throughput v1"
        assert r.json()["predicted"] == [100.0, 150.0, 200.0, 0.0, 0.0, 0.0, 0.0, 300.0]
        r = http.post("/plans/recompute", headers=AUTH)
        assert r.status_code == 200, r.text
        (plan,) = [p for p in r.json()["plans"] if p["node"] == "odd"]
        assert plan["workers"] == {"odd-a": 7}  # 8 cores, 1 for its main process: its peak


def test_a_champion_that_fails_on_one_jobs_probe_predicts_the_others_and_that_one_is_predicted_analytically(
    tmp_path, caplog
):
    """A champion passes the test probe (cuda) and raises on another job's probe (emulate): its POST /jobs was an
    HTTP 500, so the job could not register and its training ran unmanaged."""
    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    register_narrow_champion(registry, curves_from_profiles(synthetic_profiles(workloads=4)), (100.0, 150.0, 200.0))
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        cuda = http.post("/jobs", json={"job_id": "n-a", "node": "n", "probe": PROBE, "max_workers": 6}, headers=AUTH)
        assert cuda.status_code == 201 and cuda.json()["curve_source"] == "adlrec-throughput v1", cuda.text
        with caplog.at_level(logging.ERROR, logger="adlrec.service"):
            body = {"job_id": "n-b", "node": "n", "probe": PROBE | {"device_kind": "emulate"}, "max_workers": 6}
            other = http.post("/jobs", json=body, headers=AUTH)
        assert other.status_code == 201, other.text
        assert other.json()["curve_source"] == "analytic (adlrec-throughput v1 failed on this probe: ValueError)"
        emulated = ProbeFeatures(**PROBE | {"device_kind": "emulate"})
        assert other.json()["predicted"] == pytest.approx(list(AnalyticModel().predict(emulated, range(7))))
        assert [r.getMessage() for r in caplog.records] == [
            "throughput model: adlrec-throughput v1 failed on a probe (ValueError: unknown device_kind 'emulate': "
            "trained on cuda only); the analytic model predicts that job"
        ]
        assert http.post("/plans/recompute", headers=AUTH).status_code == 200


def test_a_champion_moved_to_a_version_the_service_cannot_use_predicts_the_jobs_again_analytically(tmp_path):
    """The service falls back to the analytic model (docs/service.md): the active jobs' curves follow it, so no job
    keeps a curve of the model no longer in use while GET /model says analytic."""
    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    curves = curves_from_profiles(synthetic_profiles(workloads=4))
    fit_and_register(curves, {"kind": "interp"}, registry, sources="test")
    analytic = pytest.approx(list(AnalyticModel().predict(ProbeFeatures(**PROBE), range(7))))
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        body = {"job_id": "u-a", "node": "u", "probe": PROBE, "max_workers": 6}
        assert http.post("/jobs", json=body, headers=AUTH).json()["curve_source"] == "adlrec-throughput v1"
        register_model_of_other_features(registry, curves)  # v2 @champion: it loads, it cannot predict
        info = http.post("/model/refresh", headers=AUTH).json()
        assert info["source"] == "analytic" and "v2 (@champion)" in info["note"], info
        job = http.get("/jobs/u-a").json()
        assert job["curve_source"] == "analytic" and job["predicted"] == analytic


def test_a_champion_that_cannot_be_loaded_is_not_loaded_again_until_the_alias_moves(tmp_path, caplog):
    """docs/service.md: that version is not tried again (each try downloads and unpickles it, at every tick); the
    error is logged once, as an error, and GET /model's note keeps saying why."""
    import logging

    from adlrec.service.predictor import Predictor

    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    curves = curves_from_profiles(synthetic_profiles(workloads=4))
    _unpicklable_champion(registry, curves, settings)
    predictor = Predictor(settings.resolved_tracking_uri, settings.artifact_root)
    with caplog.at_level(logging.INFO, logger="adlrec.service"):
        assert predictor.refresh() is False and predictor.info.source == "analytic"
        loads, load = [], predictor._registry.load
        predictor._registry.load = lambda alias: loads.append(alias) or load(alias)
        assert predictor.refresh() is False and loads == []  # still v1 @champion: not tried again
    assert "v1 (@champion)" in predictor.info.note and "cannot be loaded" in predictor.info.note
    said = [r.levelname for r in caplog.records if "analytic fallback" in r.getMessage()]
    assert said == ["ERROR"], caplog.messages
    registry.set_champion(fit_and_register(curves, {"kind": "interp"}, registry, sources="test").version)
    assert predictor.refresh() is True and loads == ["champion"] and predictor.info.version == "2"


def test_with_no_champion_the_fallback_is_logged_once_not_at_every_tick(tmp_path, caplog):
    import logging

    from adlrec.service.predictor import Predictor

    settings = service_settings(tmp_path)
    predictor = Predictor(settings.resolved_tracking_uri, settings.artifact_root)
    with caplog.at_level(logging.INFO, logger="adlrec.service"):
        for _ in range(3):  # the start, then two periodic ticks
            assert predictor.refresh() is False and predictor.info.source == "analytic"
    assert sum("analytic fallback" in m for m in caplog.messages) == 1, caplog.messages


def test_a_probe_of_tiny_rates_registers_with_a_learned_champion(tmp_path):
    """A probe the API accepts (rates > 0) whose ratios underflowed made the learned model's math.log raise:
    POST /jobs was an HTTP 500."""
    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    fit_and_register(curves, LearnedModel(n_estimators=20).spec(), registry, sources="test")
    probe = PROBE | {"prep_rate_0": 5e-324}
    with LiveServer(create_app(settings)) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        r = http.post("/jobs", json={"job_id": "t-a", "node": "t", "probe": probe, "max_workers": 6}, headers=AUTH)
        assert r.status_code == 201, r.text
        job = r.json()
        assert job["curve_source"] == "adlrec-throughput v1"
        assert job["predicted"][0] == 0.0 and all(0 < t <= PROBE["ceiling"] for t in job["predicted"][1:])


def test_heartbeats_are_logged_to_one_mlflow_run_per_job(tmp_path):
    from adlrec.tracking import LIVE_EXPERIMENT, LiveRuns

    settings = service_settings(tmp_path, service_live_runs=True, service_ttl_s=60)  # live runs: off in other tests
    clock = ManualClock()
    with LiveServer(create_app(settings, clock=clock)) as srv, httpx.Client(base_url=srv.url, timeout=30) as http:
        http.post("/jobs", json={"job_id": "live-c", "node": "live", "curve": [1.0, 2.0]}, headers=AUTH)
        http.post("/jobs/live-c/heartbeat", json={"workers": 1}, headers=AUTH)
        clock.advance(61)
        assert http.post("/plans/recompute", headers=AUTH).status_code == 200  # live-c expires: silent past its TTL
        for job_id in ("live-a", "live-b"):
            http.post("/jobs", json={"job_id": job_id, "node": "live", "curve": [1.0, 2.0, 3.0]}, headers=AUTH)
        for t in (10.0, 20.0, 30.0):
            http.post("/jobs/live-a/heartbeat", json={"throughput": t, "workers": 2, "data_wait": 0.5}, headers=AUTH)
        http.post("/jobs/live-b/heartbeat", json={"workers": 1}, headers=AUTH)
        http.post("/jobs/live-a/finish", headers=AUTH)
        job = http.get("/jobs/live-a").json()
    # the server flushed at shutdown
    client = LiveRuns(settings.resolved_tracking_uri).client
    exp = client.get_experiment_by_name(LIVE_EXPERIMENT)
    runs = {r.data.tags["adlrec.job_id"]: r for r in client.search_runs([exp.experiment_id])}
    assert set(runs) == {"live-a", "live-b", "live-c"}
    a, b = runs["live-a"], runs["live-b"]
    assert a.info.status == "FINISHED" and b.info.status == "RUNNING" and runs["live-c"].info.status == "KILLED"
    # one point per write: the mean of the heartbeats since the last write, at the last one's step
    # (usually one point for all three; two if a flush fell between them)
    means = sorted((m.step, m.value) for m in client.get_metric_history(a.info.run_id, "throughput"))
    counts = sorted((m.step, m.value) for m in client.get_metric_history(a.info.run_id, "heartbeats"))
    assert [s for s, _ in means] == [s for s, _ in counts]
    assert means[-1][0] == int(job["last_seen"] - job["registered_at"])  # seconds since it registered
    assert sum(n for _, n in counts) == 3 and sum(n * v for (_, n), (_, v) in zip(counts, means, strict=True)) == 60.0
    assert a.data.metrics["data_wait"] == 0.5 and "planned_workers" in a.data.metrics
    assert b.data.metrics == {"workers": 1.0, "planned_workers": 1.0, "heartbeats": 1.0}


def test_a_registry_that_stops_answering_keeps_the_model_in_use_and_the_jobs_curves(tmp_path, monkeypatch, caplog):
    """A registry that did not answer a refresh (a restart, the network) made the service fall back to the analytic
    model and predict every active job's curve again, then again with the model when the registry came back:
    plans, and the jobs' workers, changed for an outage of the registry alone."""
    import logging
    import socket

    from mlflow.tracking import MlflowClient

    from adlrec.service.predictor import Predictor

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    settings = service_settings(tmp_path)
    registry = ModelRegistry(settings.resolved_tracking_uri, settings.artifact_root)
    fit_and_register(curves_from_profiles(synthetic_profiles(workloads=4)), {"kind": "interp"}, registry, sources="t")
    predictor = Predictor(settings.resolved_tracking_uri, settings.artifact_root)
    with (
        LiveServer(create_app(settings, predictor=predictor)) as srv,
        httpx.Client(base_url=srv.url, timeout=30) as http,
    ):
        body = {"job_id": "r-a", "node": "r", "probe": PROBE, "max_workers": 6}
        before = http.post("/jobs", json=body, headers=AUTH).json()
        assert before["curve_source"] == "adlrec-throughput v1"
        working = predictor._registry.client
        with socket.socket() as s:  # a port nothing listens on: the registry's server is down
            s.bind(("127.0.0.1", 0))
            down = f"http://127.0.0.1:{s.getsockname()[1]}"
        predictor._registry.client = MlflowClient(tracking_uri=down, registry_uri=down)
        with caplog.at_level(logging.WARNING, logger="adlrec.service"):
            info = http.post("/model/refresh", headers=AUTH).json()
            again = http.post("/model/refresh", headers=AUTH).json()
        assert info["version"] == "1" and info["source"] == "adlrec-throughput v1"
        assert "did not answer" in info["note"] and again == info
        assert sum("did not answer" in m for m in caplog.messages) == 1  # said once, not at every refresh
        job = http.get("/jobs/r-a").json()
        assert job["curve_source"] == "adlrec-throughput v1" and job["predicted"] == before["predicted"]

        predictor._registry.client = working  # the registry answers again
        with caplog.at_level(logging.INFO, logger="adlrec.service"):
            back = http.post("/model/refresh", headers=AUTH).json()
            assert http.post("/model/refresh", headers=AUTH).json() == back
        assert back["version"] == "1" and back["note"] == ""
        assert sum("the registry answers again" in m for m in caplog.messages) == 1  # once, not at every refresh
        assert http.get("/jobs/r-a").json()["predicted"] == before["predicted"]
