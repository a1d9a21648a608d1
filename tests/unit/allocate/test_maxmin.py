"""``maxmin`` reaches the highest level of normalised throughput every job can have at once, and keeps it."""

from itertools import product

from hypothesis import given, settings

from adlrec.allocate import maxmin
from adlrec.schemas import AllocationRequest, JobDemand
from tests.unit.allocate.brute import feasible
from tests.unit.allocate.strategies import requests


def share(job: JobDemand, w: int) -> float:
    return job.curve[w] / job.peak if job.peak > 0 else 1.0


def best_level(request: AllocationRequest) -> float:
    """The max-min share over every feasible plan (brute force)."""
    ranges = [range(j.min_workers, j.hi + 1) for j in request.jobs]
    return max(
        min((share(j, w) for j, w in zip(request.jobs, ws, strict=True)), default=1.0)
        for ws in product(*ranges)
        if feasible(request, ws)
    )


@settings(max_examples=300, deadline=None)
@given(requests(max_jobs=3, max_len=5))
def test_no_job_ends_below_the_best_max_min_level_hysteresis_included(request):
    plan = maxmin(request)
    assert feasible(request, [plan.workers[j.job_id] for j in request.jobs])
    level = best_level(request)
    assert all(share(j, plan.workers[j.job_id]) >= level - 1e-12 for j in request.jobs)


def test_keeping_a_current_count_does_not_take_a_job_below_its_fair_share():
    # 3 workers now (89% of the peak); 2 reach 100%: the switching cost must not keep it at 3
    job = JobDemand("a", (5.0, 7.0, 9.0, 8.0), current_workers=3)
    plan = maxmin(AllocationRequest(cores=5, memory_mb=0, jobs=(job,), threshold=0.2))
    assert plan.workers == {"a": 2}
    assert "fair level 100% of peak" in plan.reasons["a"]


def test_the_reason_gives_the_lowest_share_the_fair_level_reached():
    # 2 worker cores: 100% for both needs a 1 + b 2 = 3, so the level is 50% (a 1, b 1); a is at 100%
    a = JobDemand("a", (0.0, 10.0))
    b = JobDemand("b", (0.0, 5.0, 10.0))
    plan = maxmin(AllocationRequest(cores=2 + 2, memory_mb=0, jobs=(a, b)))
    assert plan.workers == {"a": 1, "b": 1}
    assert all("fair level 50% of peak" in r for r in plan.reasons.values())


def test_a_job_whose_curve_is_zero_is_at_its_fair_share_and_gets_no_spare_core():
    # z gains nothing from any count (its share counts as 100%): the level is a's 100%, and the core
    # left after a's one worker stays idle rather than go to z
    z = JobDemand("z", (0.0, 0.0, 0.0))
    a = JobDemand("a", (0.0, 10.0))
    plan = maxmin(AllocationRequest(cores=2 + 2, memory_mb=0, jobs=(z, a)))
    assert plan.workers == {"z": 0, "a": 1}
    assert all("fair level 100% of peak" in r for r in plan.reasons.values())


def test_the_cores_left_after_the_fair_level_go_by_gain():
    # 3 worker cores: 100% for both needs 4, so the level is 50% (1 worker each); the third core goes by gain,
    # to a (a tie: the earlier job), not left idle
    a = JobDemand("a", (0.0, 5.0, 10.0))
    b = JobDemand("b", (0.0, 5.0, 10.0))
    plan = maxmin(AllocationRequest(cores=2 + 3, memory_mb=0, jobs=(a, b)))
    assert plan.workers == {"a": 2, "b": 1}
    assert all("fair level 50% of peak, then gain" in r for r in plan.reasons.values())


def test_the_switching_cost_keeps_no_job_below_its_own_fair_share_even_above_the_level():
    # the level is b's 50% (its max_workers); a reaches 100% with 1 worker. a runs 2 now (80%): keeping them gains
    # 0.1 net of the 0.3 switching cost, and 80% is above the level, but below a's own fair share
    a = JobDemand("a", (0.0, 10.0, 8.0), current_workers=2)
    b = JobDemand("b", (0.0, 1.0, 2.0, 3.0, 4.0), max_workers=2)
    plan = maxmin(AllocationRequest(cores=2 + 4, memory_mb=0, jobs=(a, b), threshold=0.3))
    assert plan.workers == {"a": 1, "b": 2}
    assert all("fair level 50% of peak" in r for r in plan.reasons.values())
