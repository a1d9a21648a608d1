"""Each objective's exact value per worker count, and the full-speed value a threshold is a fraction of."""

import pytest

from adlrec.allocate import optimal
from adlrec.allocate.objectives import full_value, job_values, objective_value
from adlrec.schemas import AllocationRequest, JobDemand

# gpus and weight differ, and the peak (10 at 1 worker) is not at the last count: each objective and
# the full-speed value can be told apart
JOB = JobDemand("a", (0.0, 10.0, 5.0), gpus=2, weight=3.0)


def test_busy_gpus_is_gpus_times_the_share_of_the_peak():
    assert job_values(JOB, "busy_gpus") == [0.0, 2.0, 1.0]  # 2 GPUs x (0, 10, 5) / 10


def test_weighted_is_weight_times_the_share_of_the_peak():
    assert job_values(JOB, "weighted") == [0.0, 3.0, 1.5]  # weight 3 x (0, 10, 5) / 10


def test_throughput_is_the_raw_samples_per_second():
    assert job_values(JOB, "throughput") == [0.0, 10.0, 5.0]


@pytest.mark.parametrize(("objective", "value"), [("busy_gpus", 2.0), ("weighted", 3.0), ("throughput", 10.0)])
def test_full_value_is_the_value_at_the_peak_not_at_the_last_count(objective, value):
    assert full_value(JOB, objective) == value  # at the last count it would be half of this


def test_a_job_whose_curve_is_zero_is_worth_nothing_under_the_normalised_objectives():
    zero = JobDemand("z", (0.0, 0.0), gpus=2, weight=3.0)
    assert job_values(zero, "busy_gpus") == job_values(zero, "weighted") == [0.0, 0.0]
    assert full_value(zero, "busy_gpus") == full_value(zero, "weighted") == 0.0


def test_an_unknown_objective_is_refused():
    with pytest.raises(ValueError, match="unknown objective 'speed'"):
        job_values(JOB, "speed")


def test_busy_gpus_favours_the_job_on_more_gpus_and_weighted_the_heavier_job():
    # one worker core for two jobs of the same curve: a holds 4 GPUs and weight 1, b 1 GPU and weight 4
    a = JobDemand("a", (0.0, 1.0), gpus=4, weight=1.0)
    b = JobDemand("b", (0.0, 1.0), gpus=1, weight=4.0)
    for objective, winner in (("busy_gpus", "a"), ("weighted", "b")):
        request = AllocationRequest(cores=3, memory_mb=0, jobs=(a, b), objective=objective)
        plan = optimal(request)
        assert plan.workers[winner] == 1 and sum(plan.workers.values()) == 1, objective
        assert plan.objective == objective_value(request, plan.workers) == 4.0  # 4 GPUs busy, or weight 4 at full speed


@pytest.mark.parametrize("objective", ["busy_gpus", "weighted"])
def test_a_subnormal_peak_is_still_a_share_of_it_not_an_overflow(objective):
    """gpus / peak overflowed to inf for a peak of 5e-324: every objective was inf, and optimal's was NaN."""
    tiny = JobDemand("t", (0.0, 5e-324, 5e-324), gpus=2, weight=2.0)
    assert job_values(tiny, objective) == [0.0, 2.0, 2.0]
    assert full_value(tiny, objective) == 2.0
    request = AllocationRequest(cores=8, memory_mb=0, jobs=(tiny, JobDemand("b", (0.0, 1.0, 2.0))), objective=objective)
    plan = optimal(request)
    assert plan.workers == {"t": 1, "b": 2} and plan.objective == objective_value(request, plan.workers) == 3.0
