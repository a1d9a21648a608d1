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


def test_interpolation_weighs_the_nearer_point_and_ends_at_the_curve_s_end():
    assert interpolate(CURVE, 0.25) == 12.5  # 10 + 0.25 x (20 - 10)
    assert interpolate(CURVE, 3.0) == 40.0


def test_busy_model_share_past_a_job_s_saturation_kink():
    """g(s) = 2s + min(8s, 1) + min(8s, 8): the first job's workers saturate at s = 1/8 (g = 2.25), past
    which g(s) = 10s + 1, and g(s) = 8 cores at s = 0.7 (a chord from 0 to 1 would give 8/11)."""
    assert cpu_share(8, [8, 8], [1, 1], saturation=[1, 8]) == pytest.approx(0.7)


def test_a_main_process_needing_part_of_a_core_runs_at_share_over_its_need():
    # 3 workers at 0.4 load like 1.2, past the peak at 1; the main process needs 0.5 of a core and gets
    # 0.4: 0.8 of its step rate, 32 of 40
    assert effective_throughput((10.0, 40.0, 40.0, 40.0), 3, 0.4, main_cpu=0.5) == pytest.approx(32.0)


def test_the_main_process_caps_a_job_at_its_peak_not_at_its_current_count():
    # 1 worker at 0.5 loads like 0.5: 15/s; the cap is T(max) x 0.5 = 20, not T(1) x 0.5 = 10
    assert effective_throughput(CURVE, 1, 0.5) == 15.0


def test_saturation_allows_for_rounding_below_the_peak():
    # a sum over ranks can miss the peak by a rounding error: that point still counts as saturated
    assert saturation_workers((10.0, 40.0 * (1 - 1e-9), 40.0)) == 1
