import pytest

from adlrec.simulate.contention import cpu_share, effective_throughput, interpolate, saturation_workers

CURVE = (10.0, 20.0, 40.0, 40.0)


def test_interpolation_between_integer_worker_counts():
    assert interpolate(CURVE, 1.5) == 30.0
    assert interpolate(CURVE, 0.0) == 10.0 and interpolate(CURVE, 9.0) == 40.0


def test_share_is_cores_over_demand_when_oversubscribed():
    assert cpu_share(8, [2, 2], [1, 1]) == 1.0
    assert cpu_share(8, [8, 8], [1, 1]) == pytest.approx(8 / 18)


def test_busy_model_counts_only_workers_a_job_can_use():
    # each job saturates at 2 workers: at full speed they need 2 + 1 cores each, so 6 of 8 cores
    assert cpu_share(8, [8, 8], [1, 1], saturation=[2, 2]) == 1.0
    # 3 jobs needing 3 + 1 cores each on 8: none reaches saturation, so every worker stays busy
    assert cpu_share(8, [8] * 3, [1] * 3, saturation=[3] * 3) == pytest.approx(cpu_share(8, [8] * 3, [1] * 3))
    # 2 jobs needing 2 + 1 each, 6 of 8 cores, but only 1 worker + 1 main for the third: fits
    assert cpu_share(8, [8, 8, 1], [1, 1, 1], saturation=[2, 2, 1]) == 1.0


def test_effective_throughput_slows_loader_and_main_process():
    assert effective_throughput(CURVE, 2, 1.0) == 40.0
    assert effective_throughput(CURVE, 3, 0.5) == min(interpolate(CURVE, 1.5), 40.0 * 0.5)
    assert effective_throughput(CURVE, 3, 0.5, main_cpu=0.0) == interpolate(CURVE, 1.5)
    assert effective_throughput(CURVE, 0, 0.5) == 5.0  # the main process loads and steps alone


def test_saturation_point():
    assert saturation_workers(CURVE) == 2
