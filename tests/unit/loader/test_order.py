"""Epoch order and batching: pure functions of (seed, epoch), checked against torch's own samplers."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from adlrec.loader import EpochSampler, batches_of, handover_batches, warmup_leads
from tests.factories import Indices


@settings(max_examples=50, deadline=None)
@given(n=st.integers(0, 50), bs=st.integers(1, 9), drop_last=st.booleans())
def test_batches_are_cut_as_batch_sampler_cuts_them(n, bs, drop_last):
    expected = list(BatchSampler(SequentialSampler(range(n)), bs, drop_last))
    assert batches_of(list(range(n)), bs, drop_last) == expected


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 40), seed=st.integers(0, 2**31), epochs=st.integers(1, 4))
def test_shuffled_epochs_replay_a_seeded_shuffling_dataloader(n, seed, epochs):
    plain = DataLoader(Indices(n), batch_size=n, shuffle=True, generator=torch.Generator().manual_seed(seed))
    passes = [[i for b in plain for i in b.tolist()] for _ in range(epochs)]
    sampler = EpochSampler(n, shuffle=True, seed=seed)
    for e in reversed(range(epochs)):  # any order of epochs, jumps back included
        sampler.set_epoch(e)
        assert sampler.order() == passes[e]
        assert sampler.order() == passes[e]  # asking twice replays nothing


def test_a_sampler_gets_set_epoch_forwarded_and_shuffle_with_a_sampler_is_refused():
    dist = torch.utils.data.DistributedSampler(Indices(10), num_replicas=2, rank=1, shuffle=True, seed=3)
    sampler = EpochSampler(10, shuffle=False, seed=0, sampler=dist)
    sampler.set_epoch(4)
    assert dist.epoch == 4 and sampler.order() == list(dist) and len(sampler) == 5
    with pytest.raises(ValueError, match="either sampler or shuffle"):
        EpochSampler(10, shuffle=True, seed=0, sampler=dist)


def test_handover_covers_the_new_pools_start_then_its_warm_up_in_batch_times():
    assert handover_batches("fork", 0, 0.01) == 0  # an in-process loader is ready at once
    assert handover_batches("fork", 2, None) == 0  # no batch interval measured yet
    assert handover_batches("fork", 2, 0.0) == 0  # batches closer than the clock resolves: none measured
    assert handover_batches("fork", 2, 0.1) == 4  # one fork per batch (55 ms of start is less), then 2 of warm-up
    assert handover_batches("fork", 4, 0.01) == 14  # 95 ms of start, then 4
    assert handover_batches("fork", 4, 0.024, old_workers=2) == 10  # the old pool's 2 share the cores meanwhile
    assert handover_batches("spawn", 2, 0.1) == 32  # seconds of start: tens of batches
    assert handover_batches("fork", 2, 0.01, extra_forks=1) == 10  # a zygote to fork first: 75 ms, then 2
    assert handover_batches("fork", 2, 0.01, start_s=0.06, extra_forks=1) == 11  # 30 ms per fork measured
    assert handover_batches("fork", 1, 1.0, extra_forks=1) == 3  # slow batches: one fork each, the zygote's too
    assert handover_batches("spawn", 2, 0.1, start_s=0.25) == 5  # what starting one took here wins
    # a 4 GB process: each fork copies its page tables, 100 ms more per fork (255 ms), then 2 of warm-up
    assert handover_batches("fork", 2, 0.01, process_gb=4.0) == 28
    assert handover_batches("fork", 2, 0.01, start_s=0.06, process_gb=4.0) == 8  # measured: already counted


def test_new_workers_open_one_per_batch_the_first_furthest_ahead_of_the_switch():
    assert warmup_leads(4, 2) == (6, 5, 4, 3)  # worker i's first batch is the i-th after the switch
    assert warmup_leads(1, 4) == (5,)
    assert warmup_leads(2, 0) == (2, 1)
    assert warmup_leads(0, 2) == ()
