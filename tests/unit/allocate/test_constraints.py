"""Every plan of every policy respects every constraint (``fixed`` only the per-job bounds, by design)."""

from dataclasses import replace

import pytest
from hypothesis import given, settings

from adlrec.allocate import POLICIES, InfeasibleRequest, fixed
from adlrec.allocate.objectives import objective_value
from adlrec.schemas import AllocationRequest, JobDemand
from tests.unit.allocate.strategies import requests

BUDGETED = sorted(set(POLICIES) - {"fixed"})


@settings(max_examples=150, deadline=None)
@given(requests())
def test_budgeted_policies_respect_cores_memory_and_bounds(request):
    for name in BUDGETED:
        plan = POLICIES[name](request)
        w = [plan.workers[j.job_id] for j in request.jobs]
        assert list(plan.workers) == [j.job_id for j in request.jobs]
        assert sum(w) <= request.worker_cores, name
        assert plan.cores_used == sum(w) + sum(j.main_cores for j in request.jobs) <= request.cores, name
        assert plan.memory_used_mb == sum(x * j.mem_per_worker_mb for x, j in zip(w, request.jobs, strict=True))
        assert plan.memory_used_mb <= request.memory_mb, name
        assert all(j.min_workers <= x <= j.hi and x % j.ranks == 0 for x, j in zip(w, request.jobs, strict=True)), name
        assert plan.objective == pytest.approx(objective_value(request, plan.workers))
        assert plan.throughput == {j.job_id: j.curve[plan.workers[j.job_id]] for j in request.jobs}
        assert plan.policy == name and set(plan.reasons) == set(plan.workers)


@settings(max_examples=60, deadline=None)
@given(requests())
def test_fixed_gives_what_scripts_ask_within_bounds_only(request):
    plan = fixed(request)
    for j in request.jobs:  # a job of ranks: its bound is the largest multiple of them up to max_workers
        assert plan.workers[j.job_id] == min(max(j.requested_workers, j.min_workers), j.hi - j.hi % j.ranks)


def test_fixed_oversubscribes_and_says_so():
    jobs = tuple(JobDemand(f"j{i}", tuple(float(w) for w in range(9)), requested_workers=8) for i in range(3))
    plan = fixed(AllocationRequest(cores=8, memory_mb=0, jobs=jobs))
    assert plan.cores_used == 27
    assert "oversubscribed: 27 processes on 8 cores" in plan.reasons["j0"]


def test_fixed_names_both_cores_and_memory_when_both_are_oversubscribed():
    jobs = (JobDemand("a", tuple(float(w) for w in range(9)), requested_workers=8, mem_per_worker_mb=100),)
    plan = fixed(AllocationRequest(cores=4, memory_mb=300, jobs=jobs))
    assert "(node oversubscribed: 9 processes on 4 cores; workers need 800 MB of 300 MB)" in plan.reasons["a"]


def test_fixed_says_nothing_of_oversubscription_when_the_node_is_exactly_full():
    # 2 main processes + 6 workers on 8 cores, 6 x 100 MB of 600 MB
    jobs = tuple(
        JobDemand(f"j{i}", tuple(float(w) for w in range(9)), requested_workers=3, mem_per_worker_mb=100)
        for i in range(2)
    )
    plan = fixed(AllocationRequest(cores=8, memory_mb=600, jobs=jobs))
    assert plan.cores_used == 8 and plan.memory_used_mb == 600
    assert plan.reasons["j0"] == "3 workers, 38% of its peak; as its script asked"  # 3 of 8 samples/s


def test_fixed_says_when_workers_need_more_memory_than_the_node_has():
    jobs = (JobDemand("a", tuple(float(w) for w in range(9)), requested_workers=4, mem_per_worker_mb=100),)
    plan = fixed(AllocationRequest(cores=8, memory_mb=300, jobs=jobs))
    assert plan.workers == {"a": 4} and plan.memory_used_mb == 400
    assert "(node oversubscribed: workers need 400 MB of 300 MB)" in plan.reasons["a"]


@pytest.mark.parametrize("name", BUDGETED)
def test_requests_that_cannot_fit_are_refused(name):
    mains = AllocationRequest(cores=1, memory_mb=100, jobs=(JobDemand("a", (1.0, 2.0), main_cores=2),))
    minimum = AllocationRequest(
        cores=4, memory_mb=100, jobs=(JobDemand("a", (1.0, 2.0), min_workers=1, mem_per_worker_mb=200),)
    )
    for req in (mains, minimum):
        with pytest.raises(InfeasibleRequest):
            POLICIES[name](req)


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_no_jobs_gives_an_empty_plan(name):
    plan = POLICIES[name](AllocationRequest(cores=4, memory_mb=0, jobs=()))
    assert plan.workers == {} and plan.objective == 0.0


@pytest.mark.parametrize("name", BUDGETED)
def test_a_refused_request_says_what_does_not_fit(name):
    # 2 main processes and 3 minimum workers on 4 cores; then 3 minimum workers of 100 MB in 250 MB
    jobs = (JobDemand("a", (1.0, 2.0, 3.0), min_workers=2), JobDemand("b", (1.0, 2.0), min_workers=1))
    with pytest.raises(InfeasibleRequest) as cores:
        POLICIES[name](AllocationRequest(cores=4, memory_mb=0, jobs=jobs))
    assert str(cores.value) == "4 cores cannot hold the jobs' 2 main processes and 3 minimum workers"
    jobs = tuple(replace(j, mem_per_worker_mb=100) for j in jobs)
    with pytest.raises(InfeasibleRequest) as memory:
        POLICIES[name](AllocationRequest(cores=5, memory_mb=250, jobs=jobs))
    assert str(memory.value) == "minimum workers need 300 MB, only 250 MB available"
