"""Binding rules and the metrics text, without a server."""

from __future__ import annotations

import pytest

from adlrec.config import load_settings
from adlrec.errors import UsageError
from adlrec.service.metrics import Metrics
from adlrec.service.server import check_bind, is_loopback


@pytest.mark.parametrize(
    ("host", "loop"), [("127.0.0.1", True), ("::1", True), ("localhost", True), ("0.0.0.0", False)]
)
def test_loopback_is_recognised(host, loop):
    assert is_loopback(host) is loop


def test_without_a_token_only_loopback_may_be_bound(tmp_path):
    with pytest.raises(UsageError, match="without a token"):
        check_bind(load_settings(data_dir=tmp_path, service_host="0.0.0.0"))
    assert "loopback only" in check_bind(load_settings(data_dir=tmp_path))
    assert "bearer token" in check_bind(load_settings(data_dir=tmp_path, service_host="0.0.0.0", service_token="t"))


def test_settings_reject_unknown_policies_and_the_token_stays_secret(tmp_path):
    with pytest.raises(ValueError, match="service_policy"):
        load_settings(service_policy="random")
    s = load_settings(service_token="hunter2")
    assert "hunter2" not in repr(s) and s.service_token.get_secret_value() == "hunter2"
    assert load_settings(data_dir=tmp_path).resolved_store_url == f"sqlite:///{tmp_path.resolve() / 'service.db'}"


def test_metrics_render_counters_gauges_and_a_cumulative_histogram_per_route():
    m = Metrics()
    m.inc("adlrec_heartbeats_total")
    m.inc("adlrec_recomputes_total", trigger='we"ird')
    for s in (0.0008, 0.003, 9.0):
        m.observe(s, "/a")
    m.observe(0.02, "/b")
    text = m.render({"adlrec_jobs": {(("status", "active"),): 2.0}})
    assert "adlrec_heartbeats_total 1\n" in text
    assert 'adlrec_recomputes_total{trigger="we\\"ird"} 1' in text
    assert 'adlrec_http_request_seconds_bucket{route="/a",le="0.001"} 1' in text
    assert 'adlrec_http_request_seconds_bucket{route="/a",le="0.005"} 2' in text
    assert 'adlrec_http_request_seconds_bucket{route="/a",le="+Inf"} 3' in text
    assert 'adlrec_http_request_seconds_bucket{route="/b",le="0.01"} 0' in text
    assert 'adlrec_http_request_seconds_count{route="/b"} 1' in text
    assert 'adlrec_jobs{status="active"} 2' in text


def test_adlrec_serve_refuses_open_writes_on_a_public_interface(tmp_path, capsys):
    from adlrec.cli import main

    assert main(["serve", "--host", "0.0.0.0", "--data-dir", str(tmp_path)]) == 2
    assert "refusing to listen on 0.0.0.0 without a token" in capsys.readouterr().err
    assert main(["serve", "--policy", "random", "--data-dir", str(tmp_path)]) == 2
    assert "service_policy" in capsys.readouterr().err
