"""A job of ranks that step together: one curve over its total workers, worth only multiples of its ranks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adlrec.allocate import POLICIES, lockstep_curve, optimal
from adlrec.schemas import AllocationRequest, JobDemand


def test_each_rank_gets_the_floor_of_an_even_share_and_the_job_runs_at_the_slowest_ranks_pace():
    assert lockstep_curve([10.0, 50.0, 90.0], 2) == (20.0, 20.0, 100.0, 100.0, 180.0)
    assert lockstep_curve([10.0, 50.0], 1) == (10.0, 50.0)


@pytest.mark.parametrize("ranks", [0, -1, 1.5, True, "2"])
def test_a_rank_count_that_is_not_a_whole_number_from_1_is_refused(ranks):
    with pytest.raises(ValueError, match="ranks must be a whole number >= 1"):
        lockstep_curve([1.0, 2.0], ranks)


def test_a_rank_curve_without_its_first_point_is_refused():
    with pytest.raises(ValueError, match="at least the w=0 point"):
        lockstep_curve([], 2)


@given(
    st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=8),
    st.integers(1, 4),
    st.integers(0, 40),
)
def test_optimal_gives_a_lockstep_job_a_multiple_of_its_ranks(rank_curve, ranks, cores):
    curve = lockstep_curve(rank_curve, ranks)
    request = AllocationRequest(
        cores=cores + ranks, memory_mb=0, jobs=(JobDemand("j", curve, gpus=ranks, main_cores=ranks),)
    )
    assert optimal(request).workers["j"] % ranks == 0


STEEP = [10.0, 50.0, 90.0, 100.0, 100.0, 100.0]  # one rank's curve: its peak at 3 workers


def ranked_request(cores: int, threshold: float = 0.0, current: int | None = None) -> AllocationRequest:
    """A 2-rank job (its main processes 2 cores) beside a job of one process, on ``cores`` cores."""
    return AllocationRequest(
        cores=cores,
        memory_mb=0,
        jobs=(
            JobDemand(
                "ddp",
                lockstep_curve(STEEP, 2),
                gpus=2,
                main_cores=2,
                requested_workers=6,
                ranks=2,
                current_workers=current,
            ),
            JobDemand("solo", tuple(STEEP), requested_workers=3),
        ),
        objective="throughput",
        threshold=threshold,
    )


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("cores", [5, 6, 8, 9, 10, 12, 13, 20])
def test_every_policy_gives_a_job_of_ranks_a_multiple_of_them(policy, cores):
    """A worker past a multiple of the ranks is a core no rank uses: each rank gets the floor of its share."""
    plan = POLICIES[policy](ranked_request(cores))
    assert plan.workers["ddp"] % 2 == 0, plan.workers
    assert plan.cores_used <= cores or policy == "fixed"


@pytest.mark.parametrize("policy", ["greedy", "maxmin", "optimal"])
def test_the_curve_following_policies_give_a_job_of_ranks_its_peak_when_the_cores_allow(policy):
    # 13 cores, 3 main processes: 10 worker cores, 3 for the single job's peak, 6 for the 2 ranks' peak
    plan = POLICIES[policy](ranked_request(13))
    assert plan.workers == {"ddp": 6, "solo": 3}
    assert plan.throughput["ddp"] == 200.0


def test_a_job_of_ranks_keeps_a_multiple_under_the_hysteresis_threshold():
    for policy in ("greedy", "maxmin", "optimal"):
        plan = POLICIES[policy](ranked_request(13, threshold=0.05, current=4))
        assert plan.workers["ddp"] % 2 == 0, (policy, plan.workers)


@given(
    st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=8),
    st.integers(1, 4),
    st.integers(0, 40),
    st.sampled_from(sorted(POLICIES)),
)
def test_any_policy_gives_a_lockstep_job_a_multiple_of_its_ranks(rank_curve, ranks, cores, policy):
    curve = lockstep_curve(rank_curve, ranks)
    job = JobDemand("j", curve, gpus=ranks, main_cores=ranks, ranks=ranks, requested_workers=ranks * 2)
    other = JobDemand("k", tuple(rank_curve))
    request = AllocationRequest(cores=cores + ranks + 1, memory_mb=0, jobs=(job, other))
    assert POLICIES[policy](request).workers["j"] % ranks == 0


@pytest.mark.parametrize("ranks", [0, -1, True, 1.5])
def test_a_demands_ranks_must_be_a_whole_number_from_1(ranks):
    with pytest.raises(ValueError, match="ranks"):
        JobDemand("j", (1.0, 2.0, 3.0), ranks=ranks)


@pytest.mark.parametrize("field", ["min_workers", "requested_workers"])
def test_a_demands_worker_totals_must_be_multiples_of_its_ranks(field):
    # a total over 2 ranks of 3 would give one rank a worker more than the other
    with pytest.raises(ValueError, match=rf"job 'j': {field} \(3\) must be a multiple of ranks \(2\)"):
        JobDemand("j", lockstep_curve([1.0, 2.0, 3.0], 2), ranks=2, **{field: 3})
    assert JobDemand("j", lockstep_curve([1.0, 2.0, 3.0], 2), ranks=2, **{field: 4}).ranks == 2


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_plans_reason_for_a_new_job_of_ranks_says_what_each_rank_gets(policy):
    curve = lockstep_curve([10.0, 50.0, 90.0, 95.0], 2)
    jobs = (JobDemand("ddp", curve, gpus=2, main_cores=2, ranks=2, requested_workers=4),)
    plan = POLICIES[policy](AllocationRequest(cores=6, memory_mb=0, jobs=jobs))
    w = plan.workers["ddp"]
    assert plan.reasons["ddp"].startswith(f"{w} workers ({w // 2} per rank, 2 ranks)"), plan.reasons["ddp"]


@pytest.mark.parametrize("policy", sorted(set(POLICIES) - {"fixed"}))
def test_a_step_of_several_ranks_pays_the_memory_of_each_of_its_workers(policy):
    # 2 ranks at 100 MB a worker, 300 MB: a step of 2 takes 200 MB, the next would need 200 of the 100 left
    job = JobDemand("ddp", lockstep_curve(STEEP, 2), main_cores=2, ranks=2, mem_per_worker_mb=100)
    plan = POLICIES[policy](AllocationRequest(cores=12, memory_mb=300, jobs=(job,)))
    assert plan.workers == {"ddp": 2} and plan.memory_used_mb == 200


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_a_plans_reason_for_a_job_of_ranks_says_what_each_rank_gets(policy):
    curve = lockstep_curve([10.0, 50.0, 90.0, 95.0], 2)
    jobs = (JobDemand("ddp", curve, gpus=2, main_cores=2, ranks=2, current_workers=2, requested_workers=4),)
    plan = POLICIES[policy](AllocationRequest(cores=6, memory_mb=0, jobs=jobs, threshold=0.0))
    w = plan.workers["ddp"]
    said = "2 workers (1 per rank, 2 ranks)" if w == 2 else f"2 -> {w} workers (1 -> {w // 2} per rank, 2 ranks)"
    assert plan.reasons["ddp"].startswith(said), plan.reasons["ddp"]


@pytest.mark.parametrize("policy", sorted(set(POLICIES) - {"fixed"}))
def test_a_job_of_ranks_is_not_given_a_step_past_its_max_workers(policy):
    # 2 ranks, between 2 and 3 workers: another step of 2 would make 4, so 2 it is, cores to spare
    job = JobDemand("ddp", lockstep_curve([1.0, 2.0, 3.0], 2), main_cores=2, ranks=2, min_workers=2, max_workers=3)
    assert POLICIES[policy](AllocationRequest(cores=10, memory_mb=0, jobs=(job,))).workers == {"ddp": 2}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_gives_a_job_of_ranks_a_multiple_whatever_its_curve_and_max_workers(policy):
    """A JobDemand's curve need not be a lockstep one, nor its max_workers a multiple of its ranks (adlrec's own
    callers build both so): maxmin gave this 2-rank job 1 worker, where its curve peaks, and fixed its 3."""
    job = JobDemand("d", (0.0, 10.0, 10.0, 10.0, 10.0), ranks=2, main_cores=2, requested_workers=4, max_workers=3)
    for cores in (3, 5, 8):
        plan = POLICIES[policy](AllocationRequest(cores=cores, memory_mb=0, jobs=(job,)))
        assert plan.workers["d"] in {0, 2}, (cores, plan.workers)
