"""The schedule of which pool serves which batch: pure bookkeeping, checked against a position-by-position model."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adlrec.loader.resizable import MAX_POOLS, SPLIT_POOLS, kept_pools, split_workers
from adlrec.loader.schedule import Schedule, Stretch


def test_a_woven_stretch_gives_each_pool_its_weight_of_every_period():
    s = Stretch(10, (7, 3), (2, 1))
    assert [s.owner(p) for p in range(10, 19)] == [7, 7, 3] * 3
    assert s.next_for(3, 10, 100) == 12 and s.next_for(3, 13, 100) == 15 and s.next_for(7, 12, 100) == 13
    assert s.next_for(3, 13, 15) is None and s.next_for(9, 10, 100) is None
    assert s.count_for(7, 18) == 6 and s.count_for(3, 18) == 2 and s.count_for(3, 10) == 0
    assert Stretch(0, (5,), (0,)).owner(3) == 5  # one pool (here in-process) serves everything


def test_a_stretch_refuses_what_it_cannot_weave():
    with pytest.raises(ValueError, match="distinct"):
        Stretch(0, (1, 1), (1, 1))
    with pytest.raises(ValueError, match="weight >= 1"):
        Stretch(0, (1, 2), (0, 2))


stretch_specs = st.lists(
    st.tuples(st.integers(0, 30), st.lists(st.integers(1, 4), min_size=1, max_size=MAX_POOLS)), max_size=4
)


@settings(max_examples=200, deadline=None)
@given(length=st.integers(1, 60), first=st.integers(0, 3), rewrites=stretch_specs)
def test_next_for_and_count_for_agree_with_the_owner_of_every_position(length, first, rewrites):
    schedule = Schedule(length, Stretch(0, (0,), (first,)))
    next_id = 1
    for at, weights in sorted(rewrites):
        pools = tuple(range(next_id, next_id + len(weights)))
        next_id += len(weights)
        schedule.rewrite(at, pools, tuple(weights))
    owners = [schedule.owner(p) for p in range(length)]
    for pool in range(next_id):
        mine = [p for p in range(length) if owners[p] == pool]
        walked, cursor = [], 0
        while (found := schedule.next_for(pool, cursor)) is not None:
            walked.append(found)
            cursor = found + 1
        assert walked == mine
        assert schedule.count_for(pool) == len(mine)


def test_kept_pools_grow_beside_all_shrink_to_an_exact_subset_else_replace():
    now = Stretch(0, (1, 2, 3), (2, 1, 1))
    assert kept_pools(now, 6) == ((1, 2, 3), (2, 1, 1))  # a pool of 2 joins them
    assert kept_pools(now, 2) == ((1,), (2,))  # the fewest pools, oldest first
    assert kept_pools(now, 3) == ((1, 2), (2, 1))
    assert kept_pools(now, 2, done={1}) == ((2, 3), (1, 1))  # pool 1 has nothing more to take
    assert kept_pools(now, 6, done={3}) == ((), ())  # it cannot be given more: replace them all
    assert kept_pools(Stretch(0, (1,), (3,)), 2) == ((), ())  # no subset adds up to 2
    assert kept_pools(now, 0) == ((), ()) and kept_pools(Stretch(0, (1,), (0,)), 2) == ((), ())
    full = Stretch(0, tuple(range(MAX_POOLS)), (1,) * MAX_POOLS)
    assert kept_pools(full, MAX_POOLS + 1) == ((), ())  # no more pools woven: one replaces them


@given(st.integers(0, 40))
def test_split_workers_lets_a_shrink_to_any_smaller_count_drop_pools(workers):
    sizes = split_workers(workers)
    assert sum(sizes) == workers and len(sizes) <= SPLIT_POOLS and list(sizes) == sorted(sizes, reverse=True)
    reachable = {sum(c) for k in range(len(sizes) + 1) for c in itertools.combinations(sizes, k)}
    if workers < 2**SPLIT_POOLS:  # 1, 2, 4, ... and the rest reach every count
        assert set(range(workers + 1)) <= reachable
    now = Stretch(0, tuple(range(len(sizes))), sizes)
    for smaller in range(1, workers):
        kept, weights = kept_pools(now, smaller)
        assert (sum(weights) == smaller) == (smaller in reachable)  # a drop wherever the sizes allow


def test_split_workers_examples():
    assert [split_workers(n) for n in (0, 1, 2, 3, 4, 8)] == [(0,), (1,), (1, 1), (2, 1), (2, 1, 1), (4, 2, 1, 1)]
    assert split_workers(16) == (9, 4, 2, 1)  # at SPLIT_POOLS: 8 is not a drop, it replaces
    assert split_workers(4, max_pools=1) == (4,)
