"""``greedy``: the next step goes to the best gain per core, ties to the earlier job, past jobs that cannot fit."""

from adlrec.allocate import greedy, lockstep_curve
from adlrec.schemas import AllocationRequest, JobDemand


def test_a_step_of_several_ranks_is_weighed_by_its_gain_per_core():
    # ddp's step of 2 workers gains 6 (3 per core); each single job's first worker gains 4 (4 per core).
    # 2 worker cores: per core, both single jobs (8) beat the one ddp step (6)
    ddp = JobDemand("ddp", lockstep_curve([0.0, 3.0], 2), main_cores=2, ranks=2)
    a = JobDemand("a", (0.0, 4.0))
    b = JobDemand("b", (0.0, 4.0))
    plan = greedy(AllocationRequest(cores=2 + 4, memory_mb=0, jobs=(ddp, a, b), objective="throughput"))
    assert plan.workers == {"ddp": 0, "a": 1, "b": 1}


def test_equal_gains_go_to_the_earlier_job():
    a = JobDemand("a", (0.0, 1.0))
    b = JobDemand("b", (0.0, 1.0))
    assert greedy(AllocationRequest(cores=3, memory_mb=0, jobs=(a, b))).workers == {"a": 1, "b": 0}
    assert greedy(AllocationRequest(cores=3, memory_mb=0, jobs=(b, a))).workers == {"b": 1, "a": 0}


def test_a_job_whose_next_worker_does_not_fit_memory_does_not_stop_the_others():
    # a's worker gains the most but needs 100 MB of the 50: b still gets both cores
    a = JobDemand("a", (0.0, 10.0), mem_per_worker_mb=100)
    b = JobDemand("b", (0.0, 1.0, 2.0))
    plan = greedy(AllocationRequest(cores=2 + 2, memory_mb=50, jobs=(a, b), objective="throughput"))
    assert plan.workers == {"a": 0, "b": 2}
