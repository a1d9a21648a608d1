"""The switching penalty keeps current counts unless a change gains more than the threshold."""

from dataclasses import replace

from hypothesis import given, settings

from adlrec.allocate import even, greedy, optimal
from adlrec.allocate.objectives import full_value, objective_value
from adlrec.schemas import AllocationRequest, JobDemand
from tests.unit.allocate.strategies import requests


def _two_jobs(gain_b: float, threshold: float = 0.05) -> AllocationRequest:
    # a: 3 workers now; moving its third worker to b costs a 1% and gains b `gain_b` (both 1 GPU)
    a = JobDemand("a", (0.0, 0.5, 0.99, 1.0), current_workers=3)
    b = JobDemand("b", (0.0, 1.0 - gain_b, 1.0, 1.0), current_workers=1)
    return AllocationRequest(cores=6, memory_mb=0, jobs=(a, b), threshold=threshold)


def test_a_gain_under_the_threshold_keeps_current_counts():
    req = _two_jobs(gain_b=0.08)  # net gain 0.07 < 2 jobs x 0.05 of a GPU
    assert optimal(req).workers == {"a": 3, "b": 1}
    assert optimal(req).penalty == 0.0


def test_a_kept_count_is_said_as_one_count_not_a_change():
    plan = optimal(_two_jobs(gain_b=0.08))
    assert plan.reasons["a"].startswith("3 workers, ") and plan.reasons["b"].startswith("1 worker, ")


def test_a_gain_over_the_threshold_moves_the_worker():
    req = _two_jobs(gain_b=0.5)
    plan = optimal(req)
    assert plan.workers == {"a": 2, "b": 2}
    assert plan.penalty == 0.1  # both jobs changed
    assert "3 -> 2 workers" in plan.reasons["a"]


def test_a_change_to_one_worker_says_one_worker():
    a = JobDemand("a", (0.0, 1.0, 1.0), current_workers=2)  # its second worker gains nothing
    b = JobDemand("b", (0.0, 0.5, 1.0), current_workers=1)
    plan = optimal(AllocationRequest(cores=5, memory_mb=0, jobs=(a, b), threshold=0.0))
    assert plan.workers == {"a": 1, "b": 2}
    assert plan.reasons["a"].startswith("2 -> 1 worker, ") and plan.reasons["b"].startswith("1 -> 2 workers, ")


def test_without_a_threshold_any_gain_moves():
    assert optimal(_two_jobs(gain_b=0.08, threshold=0.0)).workers == {"a": 2, "b": 2}


def test_greedy_pays_the_penalty_too():
    assert greedy(_two_jobs(gain_b=0.08)).workers == {"a": 3, "b": 1}


@settings(max_examples=150, deadline=None)
@given(requests())
def test_current_counts_stay_when_no_change_can_clear_the_threshold(request):
    # every job runs now at the count `even` would give it, and is worth something at full speed
    jobs = tuple(
        replace(j, curve=tuple(t + 1 for t in j.curve), gpus=max(1, j.gpus), weight=max(1.0, j.weight))
        for j in request.jobs
    )
    base = replace(request, jobs=jobs, threshold=0.0)
    current = even(base).workers
    jobs = tuple(replace(j, current_workers=current[j.job_id]) for j in jobs)
    base = replace(base, jobs=jobs)
    gain = optimal(base).objective - objective_value(base, current)  # the most any change can gain
    cheapest = min((full_value(j, base.objective) for j in jobs), default=1.0)
    # any change costs at least threshold x the cheapest job's full-speed value: make that exceed the gain
    kept = replace(base, threshold=1.01 * gain / cheapest + 1e-6)
    assert optimal(kept).workers == current
