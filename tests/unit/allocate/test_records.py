import re

import pytest

from adlrec.allocate import optimal
from adlrec.schemas import AllocationPlan, AllocationRequest, JobDemand


def _request() -> AllocationRequest:
    return AllocationRequest(
        cores=8,
        memory_mb=4096,
        jobs=(
            JobDemand("a", (1.0, 2.0, 3.0), gpus=2, mem_per_worker_mb=512, current_workers=1, main_cores=2),
            JobDemand("b", (5.0, 5.0), weight=2.0, min_workers=1),
        ),
        objective="weighted",
        threshold=0.07,
    )


def test_request_and_plan_round_trip_through_dicts():
    req = _request()
    assert AllocationRequest.from_dict(req.to_dict()) == req
    plan = optimal(req)
    assert AllocationPlan.from_dict(plan.to_dict()) == plan
    assert plan.policy == "optimal" and set(plan.reasons) == {"a", "b"}


@pytest.mark.parametrize("field", ["cores", "memory_mb"])
def test_a_request_read_back_with_a_fraction_is_refused_not_truncated(field):
    stored = _request().to_dict() | {field: 7.9}
    with pytest.raises(ValueError, match=f"request: {field} must be a whole number, got 7.9"):
        AllocationRequest.from_dict(stored)


def test_core_budget_takes_off_every_main_process():
    assert _request().worker_cores == 8 - 2 - 1


BOUNDS = "need 0 <= min_workers ({}) <= max_workers ({}) <= len(curve) - 1 ({})"
WEIGHT = "weight must be a finite number >= 0, got {}"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"curve": ()}, "curve must have at least the w=0 point"),
        ({"curve": (1.0, -1.0)}, "curve values must be finite and >= 0"),
        ({"curve": (1.0, float("nan"))}, "curve values must be finite and >= 0"),
        ({"curve": (1.0, 2.0), "max_workers": 2}, BOUNDS.format(0, 2, 1)),
        ({"curve": (1.0, 2.0), "min_workers": 2}, BOUNDS.format(2, 1, 1)),
        ({"curve": (1.0, 2.0), "min_workers": 1, "max_workers": 0}, BOUNDS.format(1, 0, 1)),
        ({"curve": (1.0,), "main_cores": -1}, "main_cores must be >= 0, got -1"),
        ({"curve": (1.0, float("inf"))}, "curve values must be finite and >= 0"),
        ({"curve": (1.0,), "gpus": -1}, "gpus must be >= 0, got -1"),
        ({"curve": (1.0,), "weight": -1.0}, WEIGHT.format(-1.0)),
        ({"curve": (1.0,), "weight": float("nan")}, WEIGHT.format("nan")),  # passed a `< 0` check
        ({"curve": (1.0,), "weight": float("inf")}, WEIGHT.format("inf")),
        ({"curve": (1.0,), "mem_per_worker_mb": -1}, "mem_per_worker_mb must be >= 0, got -1"),
        ({"curve": (1.0, 2.0), "min_workers": -1}, BOUNDS.format(-1, 1, 1)),
        ({"curve": (1.0,), "current_workers": -1}, "current_workers must be >= 0, got -1"),
        ({"curve": (1.0,), "requested_workers": -1}, "requested_workers must be >= 0, got -1"),
    ],
)
def test_bad_jobs_are_refused_naming_what_was_expected(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(f"job 'x': {message}")):
        JobDemand("x", **kwargs)


def test_a_stored_job_with_a_field_this_version_does_not_know_reads_back():
    job = _request().jobs[0]  # e.g. a plan a newer adlrec wrote to a store it shares
    assert JobDemand.from_dict(job.to_dict() | {"added_later": 1}) == job


@pytest.mark.parametrize(
    "name",
    [
        "gpus",
        "min_workers",
        "max_workers",
        "mem_per_worker_mb",
        "current_workers",
        "requested_workers",
        "main_cores",
        "ranks",
    ],
)
@pytest.mark.parametrize("value", [1.0, 49.5, True, "2"])
def test_counts_and_megabytes_of_a_job_must_be_whole_numbers(name, value):
    with pytest.raises(ValueError, match=f"job 'x': {name} must be a whole number, got {value!r}"):
        JobDemand("x", (1.0, 2.0), **{name: value})


@pytest.mark.parametrize("kwargs", [{"cores": 8.0}, {"memory_mb": 150.5}])
def test_cores_and_memory_of_a_request_must_be_whole_numbers(kwargs):
    with pytest.raises(ValueError, match="must be a whole number"):
        AllocationRequest(**({"cores": 8, "memory_mb": 100, "jobs": ()} | kwargs))


@pytest.mark.parametrize(("kwargs", "message"), [({"cores": -1}, "cores"), ({"memory_mb": -2}, "memory_mb")])
def test_negative_cores_or_memory_of_a_request_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=f"request: {message} must be >= 0, got {kwargs[message]}$"):
        AllocationRequest(**({"cores": 8, "memory_mb": 100, "jobs": ()} | kwargs))


def test_a_request_from_a_dict_without_objective_or_threshold_takes_the_defaults():
    req = AllocationRequest.from_dict({"cores": 4, "memory_mb": 0, "jobs": []})
    assert req == AllocationRequest(cores=4, memory_mb=0, jobs=())
    assert req.objective == "busy_gpus" and req.threshold == 0.0


def test_bad_requests_are_refused():
    j = JobDemand("x", (1.0, 2.0))
    with pytest.raises(ValueError, match="objective"):
        AllocationRequest(4, 100, (j,), objective="speed")
    with pytest.raises(ValueError, match="unique"):
        AllocationRequest(4, 100, (j, j))
    for bad in (-0.1, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="threshold"):
            AllocationRequest(4, 100, (j,), threshold=bad)
