"""ResizableLoader without worker processes: contract errors, epochs, len, state (in-process loading)."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset

from adlrec.loader import ResizableLoader
from tests.factories import Indices


class Stream(IterableDataset):
    def __iter__(self):
        yield from range(3)


def flat(batches) -> list[int]:
    return [i for b in batches for i in b.tolist()]


def test_an_iterable_dataset_or_a_dataset_without_len_is_refused_by_name():
    with pytest.raises(TypeError, match="map-style dataset.*IterableDataset Stream"):
        ResizableLoader(Stream())

    class NoLen:
        def __getitem__(self, i):
            return i

    with pytest.raises(TypeError, match="NoLen lacks __len__"):
        ResizableLoader(NoLen())
    with pytest.raises(ValueError, match="batch_size"):
        ResizableLoader(Indices(3), batch_size=0)


def test_epochs_advance_per_iter_like_a_shuffling_dataloader_and_set_epoch_picks_one():
    plain = DataLoader(Indices(13), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(9))
    passes = [flat(plain) for _ in range(4)]
    loader = ResizableLoader(Indices(13), batch_size=4, shuffle=True, seed=9)
    assert [flat(loader) for _ in range(2)] == passes[:2]
    loader.sampler.set_epoch(3)  # what Lightning calls each epoch
    assert flat(loader) == passes[3]
    loader.set_epoch(0)
    assert flat(loader) == passes[0]


def test_an_empty_epoch_run_to_its_end_is_used_up_like_any_other():
    """drop_last with fewer samples than a batch: each pass yields nothing, and a pass run to its end starts
    the next epoch, as a full one does.  It replayed epoch 0 while state_dict said epoch 1."""
    loader = ResizableLoader(Indices(3), batch_size=4, drop_last=True, shuffle=True, seed=2)
    assert len(loader) == 0
    seen = []
    for _ in range(3):
        assert flat(loader) == []
        seen.append((loader.sampler.epoch, loader.state_dict()["epoch"]))
    assert seen == [(0, 1), (1, 2), (2, 3)]
    iter(loader)  # an unused iter(), as Lightning's check that a loader is iterable, uses up no epoch
    assert flat(loader) == [] and loader.sampler.epoch == 3


def test_len_is_the_epochs_batch_count_and_does_not_change_mid_epoch():
    loader = ResizableLoader(Indices(10), batch_size=3, drop_last=True)
    assert len(loader) == 3
    it = iter(loader)
    next(it)
    loader.resize(0)
    assert len(loader) == 3 and len(list(it)) == 2
    assert len(ResizableLoader(Indices(10), batch_size=3)) == 4


def test_state_dict_resumes_mid_epoch_and_after_an_epoch_ends():
    loader = ResizableLoader(Indices(11), batch_size=2, shuffle=True, seed=1)
    full = flat(loader), flat(loader)
    loader = ResizableLoader(Indices(11), batch_size=2, shuffle=True, seed=1)
    it = iter(loader)
    head = flat([next(it) for _ in range(2)])
    state = loader.state_dict()
    assert state["epoch"] == 0 and state["batches_consumed"] == 2 and state["batches"] == 6
    fresh = ResizableLoader(Indices(11), batch_size=2, shuffle=True, seed=777)  # the seed comes from the state
    fresh.load_state_dict(state)
    assert fresh.state_dict() == state
    assert head + flat(fresh) == full[0]
    assert fresh.state_dict()["epoch"] == 1 and fresh.state_dict()["batches_consumed"] == 0
    assert flat(fresh) == full[1]


def test_a_state_from_another_epoch_shape_is_refused():
    state = ResizableLoader(Indices(11), batch_size=2).state_dict()
    with pytest.raises(ValueError, match="had 11 samples in 6 batches of 2, this loader has 11 in 4 of 3"):
        ResizableLoader(Indices(11), batch_size=3).load_state_dict(state)
    with pytest.raises(ValueError, match="had 11 samples in 6 batches of 2, this loader has 12 in 6 of 2"):
        ResizableLoader(Indices(12), batch_size=2).load_state_dict(state)  # as many batches, another dataset
    old = {k: state[k] for k in ("version", "epoch", "batches_consumed", "batches", "seed")}
    ResizableLoader(Indices(12), batch_size=2).load_state_dict(old)  # saved before samples were recorded
    with pytest.raises(ValueError, match="version"):
        ResizableLoader(Indices(11), batch_size=2).load_state_dict({**state, "version": 99})


def test_negative_worker_counts_are_refused():
    loader = ResizableLoader(Indices(4))
    with pytest.raises(ValueError):
        loader.resize(-1)
    with pytest.raises(ValueError):
        loader.request_resize(-1)


def test_serving_workers_tells_when_the_new_pool_has_taken_over():
    loader = ResizableLoader(Indices(64), batch_size=4, num_workers=0, multiprocessing_context="fork", handover=0)
    with loader:
        it = iter(loader)
        assert loader.serving_workers is None
        next(it)
        assert loader.serving_workers == 0
        loader.resize(2)
        assert loader.num_workers == 2
        seen = [next(it) for _ in range(6)]
        assert loader.serving_workers == 2
        assert len(seen) == 6


def test_an_iterator_replaced_mid_epoch_by_a_newer_iter_is_an_error_not_a_shorter_epoch():
    loader = ResizableLoader(Indices(10), batch_size=2)
    first = iter(loader)
    next(first)
    second = iter(loader)  # a second loop over the same loader: it starts the next epoch
    with pytest.raises(RuntimeError, match=r"replaced by a newer iter\(\) of the same loader after 1 of its 5 batches"):
        next(first)
    assert flat(second) == list(range(10))
    with pytest.raises(StopIteration):  # an iterator that reached its epoch's end stays ended
        next(second)
    unused = iter(loader)  # what Lightning does to check a loader is iterable: replaced, never used
    assert flat(loader) == list(range(10))
    with pytest.raises(RuntimeError, match="after 0 of its 5"):
        next(unused)
    it = iter(loader)
    loader.close()  # closing (or loading a state) ends the epoch on purpose: its iterator just stops
    assert list(it) == []
    whole = iter(loader)
    taken = [next(whole) for _ in range(len(loader))]  # every batch, without asking past the last
    iter(loader)
    with pytest.raises(StopIteration):  # it cut nothing short: it just ends
        next(whole)
    assert flat(taken) == list(range(10))


def test_shuffle_none_is_dataloaders_default_no_shuffling():
    assert flat(ResizableLoader(Indices(6), batch_size=2, shuffle=None)) == list(range(6))


def test_waited_s_counts_the_time_inside_next_and_nothing_between_batches(monkeypatch):
    from adlrec.loader import resizable

    now = [0.0]

    class Ticking(Indices):
        def __getitem__(self, i):
            now[0] += 1.0  # loading a sample takes 1 s of the loader's clock (in-process: 0 workers)
            return super().__getitem__(i)

    monkeypatch.setattr(resizable, "wait_clock", lambda: now[0])
    ld = ResizableLoader(Ticking(10), batch_size=2, num_workers=0)
    assert ld.waited_s == 0.0
    for _ in ld:
        now[0] += 100.0  # the step: not a wait for data
    assert ld.waited_s == 10.0


def test_a_state_of_another_seed_loaded_after_epochs_were_drawn_replays_that_seeds_order():
    with ResizableLoader(Indices(12), batch_size=3, shuffle=True, seed=2) as ref:
        flat(ref)
        state = ref.state_dict()  # epoch 1 of seed 2, nothing of it taken
        expected = flat(ref)
    with ResizableLoader(Indices(12), batch_size=3, shuffle=True, seed=1) as loader:
        flat(loader), flat(loader)  # epochs 0 and 1 of seed 1 drawn: its generator stands at epoch 1
        loader.load_state_dict(state)
        assert flat(loader) == expected


def test_a_state_saved_after_set_epoch_and_before_iter_resumes_that_epoch():
    with ResizableLoader(Indices(12), batch_size=3, shuffle=True, seed=4) as ref:
        ref.set_epoch(5)
        expected = flat(ref)
    with ResizableLoader(Indices(12), batch_size=3, shuffle=True, seed=4) as loader:
        flat(loader)  # epoch 0
        loader.set_epoch(5)  # the next epoch picked (as Lightning does), then a checkpoint before its iter()
        state = loader.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (5, 0)
    with ResizableLoader(Indices(12), batch_size=3, shuffle=True, seed=4) as resumed:
        resumed.load_state_dict(state)
        assert flat(resumed) == expected


def test_a_resize_estimates_its_switch_from_the_smoothed_batch_interval_of_this_epoch(monkeypatch):
    from adlrec.loader import resizable

    intervals = []

    def spy(*args, **kwargs):
        intervals.append(args[2])  # the batch interval the switch is estimated from
        return real(*args, **kwargs)

    real = resizable.handover_batches
    monkeypatch.setattr(resizable, "handover_batches", spy)
    times = iter([0.0, 1.0, 2.0, 100.0, 102.0, 103.0])  # the clock as each batch is handed out
    with ResizableLoader(Indices(3), batch_size=1, clock=lambda: next(times), fork_server=False) as loader:
        flat(loader)  # 1 s, 1 s: 1.0
        it = iter(loader)
        next(it), next(it)  # the 98 s between epochs is no batch interval; then 2 s: 0.8 * 1.0 + 0.2 * 2.0
        loader.resize(1)  # switching after the epoch's end: nothing starts, this epoch keeps 0 workers
        assert intervals == [pytest.approx(1.2)] and flat(it) == [2]


@pytest.mark.parametrize(("to", "served"), [(2, [1] * 5 + [2]), (0, [1, 1, 0, 0, 0, 0])])
def test_a_grow_switches_handover_batches_after_those_in_flight_and_a_drop_right_after_them(to, served):
    """One worker has ``prefetch_factor`` (2) batches in flight; ``handover`` (3) more are the old pool's only
    when a pool must start (a grow), not when the loader drops to 0 workers, which starts nothing."""
    kw = {"num_workers": 1, "handover": 3, "multiprocessing_context": "fork", "fork_server": False}
    with ResizableLoader(Indices(20), batch_size=1, **kw) as loader:
        it = iter(loader)
        head = [next(it) for _ in range(5)]
        loader.resize(to)
        serving = []
        for _ in range(6):
            head.append(next(it))
            serving.append(loader.serving_workers)
        assert serving == served
        assert flat(head) + flat(it) == list(range(20))


def test_loading_a_state_mid_epoch_stops_the_live_iterator_and_the_next_iter_resumes_the_state():
    with ResizableLoader(Indices(12), batch_size=2, shuffle=True, seed=6) as ref:
        whole = flat(ref)
        state = ref.state_dict() | {"epoch": 0, "batches_consumed": 4}
    with ResizableLoader(Indices(12), batch_size=2, shuffle=True, seed=6) as loader:
        it = iter(loader)
        next(it)
        loader.load_state_dict(state)
        assert list(it) == []  # the epoch it served was left: it just stops, serving nothing more
        assert flat(loader) == whole[8:]


def test_set_epoch_on_the_callers_own_distributed_sampler_picks_the_epoch_as_with_a_dataloader():
    """The DDP idiom calls ``set_epoch`` on its own ``DistributedSampler``, not on the loader; a
    ``DataLoader`` iterates the sampler as set.  The loader's own count overrode it: a run resumed at
    epoch 5 got the orders of epochs 0 and 1, and its state named them."""

    def passes(make, epochs=(5, 6, 2)):
        sampler = DistributedSampler(Indices(12), num_replicas=2, rank=1, shuffle=True, seed=3)
        loader = make(sampler)
        out = []
        for epoch in epochs:
            sampler.set_epoch(epoch)
            out.append(flat(loader))
        sampler.set_epoch(7)
        return out, loader

    expected, _ = passes(lambda s: DataLoader(Indices(12), batch_size=2, sampler=s))
    got, loader = passes(lambda s: ResizableLoader(Indices(12), batch_size=2, sampler=s))
    assert got == expected
    assert loader.state_dict()["epoch"] == 7  # set before its iter(): a checkpoint now resumes epoch 7
    auto = ResizableLoader(Indices(12), batch_size=2, sampler=DistributedSampler(Indices(12), 2, 1, seed=3))
    assert [flat(auto) for _ in range(2)] == expected_auto(), "without set_epoch each iter() is the next epoch"


def expected_auto() -> list[list[int]]:
    out = []
    for epoch in range(2):
        sampler = DistributedSampler(Indices(12), 2, 1, seed=3)
        sampler.set_epoch(epoch)
        out.append(list(sampler))
    return out


class FailsOnce(Indices):
    """Indices, except that loading ``bad`` raises the first time (a file that was briefly unreadable)."""

    def __init__(self, n: int, bad: int) -> None:
        super().__init__(n)
        self.bad, self.failed = bad, False

    def __getitem__(self, i: int):
        if i == self.bad and not self.failed:
            self.failed = True
            raise KeyError(f"sample {i} is unreadable")
        return super().__getitem__(i)


def test_after_an_epoch_stopped_by_an_error_a_resume_and_the_next_epoch_serve_every_batch():
    """The error says that iter() starts the next epoch and load_state_dict(state_dict()) resumes this one
    at the failed batch: only the failed epoch's iterator keeps raising."""
    with ResizableLoader(FailsOnce(20, bad=7), 2) as loader:
        it = iter(loader)
        head = [next(it) for _ in range(3)]
        with pytest.raises(KeyError, match="sample 7"):
            next(it)
        with pytest.raises(RuntimeError, match="stopped at batch 3 of 10"):
            next(it)
        loader.load_state_dict(loader.state_dict())
        assert flat(head) + flat(loader) == list(range(20))
        assert flat(loader) == list(range(20))


def test_a_ranks_state_resumes_its_shard_of_a_distributed_sampler():
    def make() -> ResizableLoader:
        sampler = DistributedSampler(Indices(12), num_replicas=2, rank=1, shuffle=True, seed=3)
        return ResizableLoader(Indices(12), batch_size=2, sampler=sampler)

    ref = make()
    ref.set_epoch(4)
    whole = flat(ref)
    first = make()
    first.set_epoch(4)
    it = iter(first)
    head = flat([next(it) for _ in range(2)])
    state = first.state_dict()
    assert state["samples"] == 6  # the rank's shard, not the dataset
    second = make()
    second.load_state_dict(state)
    assert head + flat(second) == whole


def test_a_resize_requested_between_epochs_is_the_count_asked_for_at_once():
    with ResizableLoader(Indices(8), batch_size=2) as loader:
        flat(loader)
        loader.request_resize(1)  # as the callbacks ask, between epochs
        assert loader.num_workers == 1
