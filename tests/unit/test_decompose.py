import pytest

from adlrec.profile.decompose import decompose


def _total(s):
    return s.compute_share + s.prep_share + s.fetch_share


def test_compute_bound_job_has_no_stall():
    s = decompose(throughput=100.0, ceiling=100.0, prep_rate=1000.0, fetch_extra_s=0.0, workers=4)
    assert s.stall_fraction == 0.0
    assert s.prep_share == 0.0 and s.fetch_share == 0.0
    assert s.compute_share == pytest.approx(1.0)


def test_loader_bound_job_stalls_on_prep():
    # ceiling 100/s (10 ms), measured 50/s (20 ms): half the step is waiting for preprocessing
    s = decompose(throughput=50.0, ceiling=100.0, prep_rate=50.0, fetch_extra_s=0.0, workers=2)
    assert s.stall_fraction == pytest.approx(0.5)
    assert s.prep_share == pytest.approx(0.5)
    assert s.fetch_share == 0.0
    assert _total(s) == pytest.approx(1.0)


def test_cold_fetch_is_spread_over_workers_and_hidden_when_loader_has_slack():
    # loader alone 400/s (2.5 ms) + 10 ms cold fetch over 4 workers = 5 ms < 10 ms step: hidden
    s = decompose(throughput=100.0, ceiling=100.0, prep_rate=400.0, fetch_extra_s=0.010, workers=4)
    assert s.fetch_share == 0.0
    # over 1 worker: 2.5 + 10 = 12.5 ms per sample > 10 ms: 2.5 ms of 12.5 ms is fetch stall
    s = decompose(throughput=100.0, ceiling=100.0, prep_rate=400.0, fetch_extra_s=0.010, workers=1)
    assert s.fetch_share == pytest.approx(2.5 / 12.5)
    assert _total(s) == pytest.approx(1.0)


def test_in_process_loading_adds_fetch_serially():
    s = decompose(throughput=50.0, ceiling=100.0, prep_rate=100.0, fetch_extra_s=0.005, workers=0)
    # 10 ms compute + 10 ms prep + 5 ms fetch
    assert s.compute_share == pytest.approx(10 / 25)
    assert s.prep_share == pytest.approx(10 / 25)
    assert s.fetch_share == pytest.approx(5 / 25)


def test_throughput_above_ceiling_is_clipped_not_negative():
    s = decompose(throughput=110.0, ceiling=100.0, prep_rate=500.0, fetch_extra_s=0.0, workers=1)
    assert s.stall_fraction == 0.0
    assert s.prep_share == 0.0
    assert _total(s) == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kw",
    [
        {"throughput": 0.0},
        {"ceiling": -1.0},
        {"prep_rate": 0.0},
        {"fetch_extra_s": -0.1},
        {"workers": -1},
    ],
)
def test_bad_input_raises(kw):
    args = {"throughput": 10.0, "ceiling": 10.0, "prep_rate": 10.0, "fetch_extra_s": 0.0, "workers": 1} | kw
    with pytest.raises(ValueError):
        decompose(**args)


def test_no_fetch_cost_means_no_fetch_share_even_when_the_loader_alone_measured_slower():
    # loader alone 80/s (noise: training with it reached 100/s); with f = 0 nothing is fetch
    s = decompose(throughput=100.0, ceiling=120.0, prep_rate=80.0, fetch_extra_s=0.0, workers=1)
    assert s.fetch_share == 0.0
    assert _total(s) == pytest.approx(1.0)


def test_fetch_share_never_exceeds_what_the_fetch_cost_explains():
    # 10 ms step, loader alone 12.5 ms (noise), 1 ms cold fetch over 1 worker: at most 1 ms of 11 ms
    s = decompose(throughput=100.0, ceiling=100.0, prep_rate=80.0, fetch_extra_s=0.001, workers=1)
    assert s.fetch_share == pytest.approx(1 / 11)
    assert _total(s) == pytest.approx(1.0)
