"""A job of ranks that step together: one curve over its total workers, worth only multiples of its ranks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adlrec.allocate import lockstep_curve, optimal
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
