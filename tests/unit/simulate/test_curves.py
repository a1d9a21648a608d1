"""Curves extended to a node from a profile's measured parameters."""

from dataclasses import replace

import pytest

from adlrec.simulate.curves import PipelineParams, job_curve, pipeline_params, rank_rate
from tests.factories import make_profile


def test_parameters_come_from_the_profile():
    p = pipeline_params(make_profile())  # ceiling 25, in-process 12, loader-alone 20/40/30 at w=0/1/2
    assert (p.ceiling, p.serial_rate) == (25.0, 12.0)
    assert p.worker_rate == pytest.approx((40 / 1 + 30 / 2) / 2)  # median over the uncontended points
    assert p.mem_per_worker_mb == 10


def test_rank_model_serial_at_zero_then_pipelined():
    p = pipeline_params(make_profile())
    assert rank_rate(p, 0) == pytest.approx(1 / (1 / 25 + 1 / 12))
    assert rank_rate(p, 1) == 25.0 and rank_rate(p, 8) == 25.0


def test_multi_gpu_job_spreads_workers_over_ranks():
    p = PipelineParams(ceiling=100.0, serial_rate=20.0, worker_rate=30.0, mem_per_worker_mb=1)
    curve = job_curve(p, gpus=2, max_workers=8)
    t0 = rank_rate(p, 0)
    assert len(curve) == 9
    assert curve[0] == pytest.approx(2 * t0)
    assert curve[1] == pytest.approx(t0 + 30.0)  # one rank with a worker, one loading in-process
    assert curve[3] == pytest.approx(60.0 + 30.0)  # 2 + 1 workers
    assert curve[8] == pytest.approx(200.0)


def test_ranks_in_lockstep_run_at_the_pace_of_the_rank_with_fewest_workers():
    p = PipelineParams(ceiling=100.0, serial_rate=20.0, worker_rate=30.0, mem_per_worker_mb=1)
    independent = job_curve(p, gpus=2, max_workers=8)
    lockstep = job_curve(p, gpus=2, max_workers=8, lockstep=True)
    t0 = rank_rate(p, 0)
    assert lockstep[1] == pytest.approx(2 * t0)  # one rank with a worker still waits for the other
    assert lockstep[3] == pytest.approx(2 * 30.0)  # 2 + 1 workers: both ranks step at one worker's pace
    assert lockstep[2] == pytest.approx(independent[2]) and lockstep[4] == pytest.approx(independent[4])
    assert all(lockstep[w] == lockstep[w - 1] for w in (1, 3, 5, 7))  # an odd worker adds nothing
    assert all(a <= b + 1e-9 for a, b in zip(lockstep, independent, strict=True))
    assert job_curve(p, gpus=1, max_workers=8, lockstep=True) == job_curve(p, gpus=1, max_workers=8)


def test_a_worker_s_rate_comes_only_from_points_that_fit_the_measuring_machine():
    # 2 logical cores: only w = 1 fits beside the main process, loader-alone 40/s; w = 2 (30 / 2) is contended
    profile = make_profile()
    two_cores = replace(profile, hardware=replace(profile.hardware, logical_cores=2))
    assert pipeline_params(two_cores).worker_rate == 40.0


def test_a_profile_without_loader_alone_rates_falls_back_to_training_at_the_fewest_workers():
    profile = make_profile()  # training 20/s at w = 1, 15/s at w = 2
    unmeasured = replace(profile, points=tuple(replace(p, prep_rate=0.0) for p in profile.points))
    assert pipeline_params(unmeasured).worker_rate == 20.0


def test_memory_per_worker_is_the_median_rounded_up_to_whole_mb():
    profile = make_profile()
    uss = {1: 10.2, 2: 30.0}  # the median of the points with workers: 20.1 MB
    measured = replace(profile, points=tuple(replace(p, worker_uss_mb=uss.get(p.workers, 0.0)) for p in profile.points))
    assert pipeline_params(measured).mem_per_worker_mb == 21


def test_a_profile_without_a_positive_ceiling_is_refused():
    profile = make_profile()
    with pytest.raises(ValueError, match="lacks a positive ceiling"):
        pipeline_params(replace(profile, baseline=replace(profile.baseline, ceiling=0.0)))


def test_a_lockstep_curve_reaches_max_workers_when_the_ranks_do_not_divide_it():
    p = PipelineParams(ceiling=100.0, serial_rate=20.0, worker_rate=30.0, mem_per_worker_mb=1)
    curve = job_curve(p, gpus=3, max_workers=8, lockstep=True)
    # 8 // 3 = 2 workers per rank at most: workers 6..8 all run at 3 x min(100, 60)
    assert len(curve) == 9 and curve[6:] == (180.0, 180.0, 180.0)
