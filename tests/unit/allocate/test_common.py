"""What every policy shares: the switching cost and the plan's record of it, and the plan's reasons."""

import pytest

from adlrec.allocate import POLICIES, fixed, optimal
from adlrec.allocate.common import penalty
from adlrec.schemas import AllocationRequest, JobDemand


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_a_new_job_pays_no_switching_cost(name):
    job = JobDemand("a", (0.0, 1.0, 2.0), requested_workers=2)  # no current_workers: a new job
    request = AllocationRequest(cores=3, memory_mb=0, jobs=(job,), threshold=0.3)
    assert penalty(job, request) == 0.0
    assert POLICIES[name](request).penalty == 0.0


def test_the_switching_cost_is_the_threshold_times_the_full_speed_value_in_objective_units():
    # busy_gpus on 2 GPUs: values (0, 1, 2) GPUs; a cost of 0.1 x 2 GPUs = 0.2 (not 0.1 x 10 samples/s)
    job = JobDemand("a", (0.0, 5.0, 10.0), gpus=2, current_workers=1)
    request = AllocationRequest(cores=3, memory_mb=0, jobs=(job,), threshold=0.1)
    assert penalty(job, request) == 0.2
    plan = optimal(request)
    assert plan.workers == {"a": 2}  # 2 - 0.2 beats staying at 1
    assert plan.penalty == 0.2 and plan.objective == 2.0


def test_a_reason_gives_the_share_of_the_curves_peak():
    # the peak (10) is at 1 worker, not at the last count: 2 workers are at half of it
    job = JobDemand("a", (0.0, 10.0, 5.0), requested_workers=2)
    assert (
        fixed(AllocationRequest(cores=3, memory_mb=0, jobs=(job,)))
        .reasons["a"]
        .startswith("2 workers, 50% of its peak")
    )
