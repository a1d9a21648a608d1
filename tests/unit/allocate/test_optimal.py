"""``optimal`` is the exact optimum: it equals brute force and is never below the other policies."""

import importlib

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
