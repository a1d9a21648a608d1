"""``optimal`` is the exact optimum: it equals brute force and is never below the other policies."""

import importlib
from dataclasses import replace

import pytest
from hypothesis import given, settings

from adlrec.allocate import POLICIES, greedy, optimal
from adlrec.allocate.optimal import max_memory_use
from adlrec.schemas import AllocationRequest, JobDemand
from tests.unit.allocate.brute import brute_force, feasible
from tests.unit.allocate.strategies import requests

optimal_module = importlib.import_module("adlrec.allocate.optimal")  # the package's `optimal` is the function


def net(plan) -> float:
    return plan.objective - plan.penalty


@settings(max_examples=250, deadline=None)
@given(requests())
def test_optimal_equals_brute_force(request):
    # curves of any shape, the memory budget and the hysteresis penalty all included
    assert net(optimal(request)) == pytest.approx(brute_force(request), abs=1e-9)


@settings(max_examples=150, deadline=None)
@given(requests())
def test_optimal_is_never_below_another_budgeted_policy(request):
    best = net(optimal(request))
    for name in ("even", "proportional", "greedy", "maxmin"):
        assert best >= net(POLICIES[name](request)) - 1e-9, name


def test_greedy_is_trapped_by_a_non_concave_curve_and_optimal_is_not():
    # job b gains nothing from its first worker and everything from its second
    a = JobDemand("a", (0.0, 6.0, 7.0, 7.5))
    b = JobDemand("b", (0.0, 0.0, 10.0, 10.0))
    req = AllocationRequest(cores=2 + 2, memory_mb=0, jobs=(a, b), objective="throughput")
    assert greedy(req).workers == {"a": 2, "b": 0}
    assert optimal(req).workers == {"a": 0, "b": 2}
    assert optimal(req).objective == 10.0 > greedy(req).objective


def test_memory_dimension_is_used_only_when_memory_can_bind():
    a = JobDemand("a", (0.0, 5.0, 9.0, 12.0), mem_per_worker_mb=300)
    b = JobDemand("b", (0.0, 4.0, 8.0, 12.0), mem_per_worker_mb=100)
    loose = AllocationRequest(cores=6, memory_mb=10_000, jobs=(a, b), objective="throughput")
    assert max_memory_use(loose) == 3 * 300 + 1 * 100
    assert "DP over cores)" in optimal(loose).reasons["a"]
    tight = AllocationRequest(cores=6, memory_mb=700, jobs=(a, b), objective="throughput")
    plan = optimal(tight)
    assert "cores and memory" in plan.reasons["a"]
    assert plan.memory_used_mb <= 700
    assert plan.workers == {"a": 1, "b": 3}  # 5 + 12 beats 9 + 8 (a's workers cost 3x the memory)


@settings(max_examples=150, deadline=None)
@given(requests())
def test_with_coarse_memory_steps_the_plan_still_fits_and_is_at_most_the_optimum(request):
    exact = optimal(request)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(optimal_module, "MEMORY_CELLS", 1)  # the coarsest steps: one memory cell per table
        coarse = optimal(request)
    assert feasible(request, list(coarse.workers.values()))
    assert net(coarse) <= net(exact) + 1e-9


def test_a_memory_table_too_large_is_counted_in_coarser_steps_and_says_so():
    # 60 jobs, per-worker memory in whole MB (gcd 1), 150 GB: exact tables would hold 61 x 69 x 150,001 cells
    jobs = tuple(
        JobDemand(f"j{i}", tuple(min(1000.0, 120.0 * w) for w in range(17)), mem_per_worker_mb=1500 + 25 * i + 1)
        for i in range(60)
    )
    request = AllocationRequest(cores=128, memory_mb=150_000, jobs=jobs)
    assert max_memory_use(request) > request.memory_mb  # the memory dimension is needed
    unit = optimal_module.memory_unit(request)
    assert unit > 1 and 61 * 69 * (150_000 // unit + 1) <= optimal_module.MEMORY_CELLS
    plan = optimal(request)
    assert plan.memory_used_mb <= 150_000 and plan.cores_used <= 128
    assert f"memory counted in {unit} MB steps, per-worker memory rounded up" in plan.reasons["j0"]


def test_ties_go_to_the_fewest_workers():
    flat = JobDemand("a", (3.0, 3.0, 3.0, 3.0))
    assert optimal(AllocationRequest(cores=4, memory_mb=0, jobs=(flat,))).workers == {"a": 0}


def test_node_scale_request_is_solved():
    curves = [tuple(min(100.0 * (k % 5 + 1), 30.0 * w) for w in range(129)) for k in range(64)]
    jobs = tuple(JobDemand(f"j{k}", c) for k, c in enumerate(curves))
    plan = optimal(AllocationRequest(cores=128, memory_mb=0, jobs=jobs))
    assert sum(plan.workers.values()) <= 128 - 64


def test_a_plan_better_only_by_rounding_does_not_take_more_cores():
    # a at 1 worker is 0.3; b at 2 workers with a at 0 is 0.1 + 0.2, which rounds to 0.30000000000000004:
    # the same value, so the plan with fewer workers is the optimum (with memory a DP dimension too)
    a = JobDemand("a", (0.1, 0.3), mem_per_worker_mb=1)
    b = JobDemand("b", (0.0, 0.0, 0.2), mem_per_worker_mb=1)
    assert 0.1 + 0.2 > 0.3
    cores_only = AllocationRequest(cores=2 + 2, memory_mb=2, jobs=(a, b), objective="throughput")
    # c is worth nothing but could hold 10 MB: memory can bind, so the DP counts memory
    c = JobDemand("c", (0.0, 0.0), mem_per_worker_mb=10, main_cores=0)
    with_memory = AllocationRequest(cores=2 + 2, memory_mb=2, jobs=(a, b, c), objective="throughput")
    assert "DP over cores)" in optimal(cores_only).reasons["a"]
    assert "cores and memory" in optimal(with_memory).reasons["a"]
    assert optimal(cores_only).workers == {"a": 1, "b": 0}
    assert optimal(with_memory).workers == {"a": 1, "b": 0, "c": 0}


def test_ties_go_to_the_fewest_cores_then_the_least_memory():
    # a at 1 worker (4 MB) and b at 2 workers (2 MB) are both worth 1: the fewest cores win, though
    # they use more memory; b's single worker is worth nothing, and both plans together do not fit
    a = JobDemand("a", (0.0, 1.0), mem_per_worker_mb=4)
    b = JobDemand("b", (0.0, 0.0, 1.0), mem_per_worker_mb=1)
    request = AllocationRequest(cores=2 + 2, memory_mb=4, jobs=(a, b), objective="throughput")
    plan = optimal(request)
    assert "cores and memory" in plan.reasons["a"]  # a's 4 MB and one of b's could pass the 4 MB
    assert plan.workers == {"a": 1, "b": 0}
    # the same tie where memory cannot bind (the DP over cores alone)
    loose = replace(request, memory_mb=100)
    assert "DP over cores)" in optimal(loose).reasons["a"]
    assert optimal(loose).workers == {"a": 1, "b": 0}


@pytest.mark.parametrize("memory_mb", [1, 100])
def test_a_tie_between_jobs_goes_to_the_earlier_job(memory_mb):
    # one worker is worth 1 to either job; with 1 MB only one fits (a DP over memory), with 100 MB
    # memory cannot bind but one core is all there is
    a = JobDemand("a", (0.0, 1.0), mem_per_worker_mb=1)
    b = JobDemand("b", (0.0, 1.0), mem_per_worker_mb=1)
    cores = 2 + (2 if memory_mb == 1 else 1)
    assert optimal(AllocationRequest(cores=cores, memory_mb=memory_mb, jobs=(a, b))).workers == {"a": 1, "b": 0}
    assert optimal(AllocationRequest(cores=cores, memory_mb=memory_mb, jobs=(b, a))).workers == {"b": 1, "a": 0}


def test_memory_that_is_exactly_the_most_a_plan_could_use_cannot_bind():
    a = JobDemand("a", (0.0, 5.0, 9.0, 12.0), mem_per_worker_mb=300)
    b = JobDemand("b", (0.0, 4.0, 8.0, 12.0), mem_per_worker_mb=100)
    request = AllocationRequest(cores=6, memory_mb=1000, jobs=(a, b), objective="throughput")
    assert max_memory_use(request) == 1000
    assert "DP over cores)" in optimal(request).reasons["a"]


def test_the_most_memory_a_plan_could_use_counts_the_minimum_workers_once():
    # 4 worker cores: a's minimum (300 MB), then its 2 more up to 3 (600 MB), then 1 of b's (100 MB)
    a = JobDemand("a", (0.0, 5.0, 9.0, 12.0), min_workers=1, mem_per_worker_mb=300)
    b = JobDemand("b", (0.0, 4.0, 8.0, 12.0), mem_per_worker_mb=100)
    assert max_memory_use(AllocationRequest(cores=6, memory_mb=0, jobs=(a, b))) == 1000


def test_the_memory_tables_stay_within_memory_cells_at_the_edge():
    # 3 tables (before each job, and after) of 128 core rows leave 2**23 // 384 = 21,845 memory cells
    # each: 65,535 MB in 3 MB steps would need 21,846 (one too many), so the step must be 4 MB
    jobs = tuple(JobDemand(f"j{i}", tuple(float(w) for w in range(128)), mem_per_worker_mb=1000 + i) for i in range(2))
    request = AllocationRequest(cores=127 + 2, memory_mb=65_535, jobs=jobs)
    assert max_memory_use(request) > request.memory_mb  # the memory dimension is needed
    unit = optimal_module.memory_unit(request)
    assert (len(jobs) + 1) * (request.worker_cores + 1) * (65_535 // unit + 1) <= optimal_module.MEMORY_CELLS
    assert unit == 4


def test_an_exact_memory_dp_says_exact():
    a = JobDemand("a", (0.0, 5.0, 9.0, 12.0), mem_per_worker_mb=300)
    b = JobDemand("b", (0.0, 4.0, 8.0, 12.0), mem_per_worker_mb=100)
    plan = optimal(AllocationRequest(cores=6, memory_mb=700, jobs=(a, b), objective="throughput"))
    assert all(r.endswith("; exact optimum (DP over cores and memory)") for r in plan.reasons.values())


def test_coarse_memory_steps_round_each_jobs_memory_up_so_the_plan_fits():
    # one memory cell per table: 4 MB in one step of 4 MB. One 3 MB worker fits; two need 6 MB, 1.5 steps,
    # which rounded down would be the 1 step there is
    job = JobDemand("a", (0.0, 1.0, 2.0, 3.0, 4.0), mem_per_worker_mb=3)
    request = AllocationRequest(cores=1 + 4, memory_mb=4, jobs=(job,), objective="throughput")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(optimal_module, "MEMORY_CELLS", 1)
        assert optimal_module.memory_unit(request) == 4
        plan = optimal(request)
    assert plan.workers == {"a": 1} and plan.memory_used_mb == 3


def test_jobs_allowed_more_workers_than_there_are_cores_when_memory_binds():
    # the service's default max_workers (32) on a node of 8 cores (6 for workers) where memory binds: b's one
    # worker takes 1000 of the 1060 MB, a's 10 MB workers take the rest of the cores; counts past the cores
    # are not tried (they cost the DP time, and did not fit its tables)
    b = JobDemand("b", tuple(10.0 * w for w in range(33)), mem_per_worker_mb=1000)
    a = JobDemand("a", tuple(float(w) for w in range(33)), mem_per_worker_mb=10)
    plan = optimal(AllocationRequest(cores=8, memory_mb=1060, jobs=(b, a), objective="throughput"))
    assert "cores and memory" in plan.reasons["a"]
    assert plan.workers == {"b": 1, "a": 5} and plan.memory_used_mb == 1050
