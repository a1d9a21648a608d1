import numpy as np
import pytest
import torch

from adlrec.callbacks._build import batch_samples
from adlrec.callbacks.meter import LoopMeter


def test_throughput_and_wait_share_from_timestamps():
    m = LoopMeter(window=10)
    assert m.stats() is None
    t = 100.0
    m.done(t, 8)  # the first step only sets the origin
    for _ in range(5):
        m.fetched(t + 0.01)  # 10 ms waiting for the batch
        t += 0.04  # then a 30 ms step
        m.done(t, 8)
    s = m.stats()
    assert s.throughput == pytest.approx(8 / 0.04)
    assert s.data_wait == pytest.approx(0.25)
    assert s.steps == 5 and s.samples_total == 48


def test_a_loaders_own_waiting_total_is_the_wait_not_the_gap_between_steps():
    m = LoopMeter(window=10)
    t, waited = 100.0, 7.0
    m.done(t, 8, waited=waited)  # the origin: its total only starts the count
    for _ in range(4):
        m.fetched(t + 0.03)  # 30 ms between the step's end and the batch ...
        waited += 0.01  # ... of which the loader spent 10 ms getting it (the rest: a framework's own work)
        t += 0.05
        m.done(t, 8, waited=waited)
    assert m.stats().data_wait == pytest.approx(0.2)
    m.pause()
    waited += 5.0  # waiting while paused (an epoch's workers starting) is not counted
    m.done(t + 9.0, 8, waited=waited)
    m.done(t + 9.1, 8, waited=waited + 0.5)  # more than the step took: clamped to the step
    m.done(t + 9.2, 8, waited=waited + 0.4)  # a total that fell (another loader): no negative wait
    s = m.stats()
    assert s.steps == 6
    assert s.data_wait == pytest.approx((4 * 0.01 + 0.1 + 0.0) / (4 * 0.05 + 0.2))


def test_window_keeps_only_recent_steps():
    m = LoopMeter(window=2)
    m.done(0.0, 1)
    m.done(1.0, 1)  # slow step, pushed out of the window below
    m.done(1.1, 1)
    m.done(1.2, 1)
    assert m.stats().throughput == pytest.approx(10.0)
    with pytest.raises(ValueError):
        LoopMeter(window=1)


def test_steps_that_took_no_time_on_a_coarse_clock_are_no_figure():
    """A clock that did not move over the window's steps: no figure (dividing by the window's zero seconds
    would raise in the heartbeat thread, which reads the stats outside its guard, and end its heartbeats)."""
    m = LoopMeter(window=10)
    for _ in range(4):
        m.fetched(5.0)
        m.done(5.0, 8)
    assert m.stats() is None


def test_batch_samples_reads_the_first_tensor():
    assert batch_samples((torch.zeros(7, 3), torch.zeros(7))) == 7
    assert batch_samples({"x": torch.zeros(5, 2)}) == 5
    assert batch_samples([1, 2, 3]) == 3


@pytest.mark.parametrize(
    ("batch", "samples"),
    [
        (torch.zeros(6, 3), 6),
        ((torch.zeros(6, 3), torch.zeros(6)), 6),
        ([torch.zeros(6, 3), torch.zeros(6)], 6),  # default_collate makes a sample's tuple a list
        ({"x": torch.zeros(6, 2), "y": torch.zeros(6)}, 6),
        ({"text": ["a", "b", "c"], "y": torch.zeros(3)}, 3),  # a tensor field, wherever it is
        ({"text": ["a", "b", "c"]}, 3),
        ((["a", "b", "c"], torch.zeros(3)), 3),  # collated strings stay a list: not 1 (its first string's length)
        (["a", "b", "c"], 3),
        ([{"x": torch.zeros(4)}, {"x": torch.zeros(4)}], 2),  # samples not collated: not 4 (a sample's size)
        ([(torch.zeros(4), 0), (torch.zeros(4), 1), (torch.zeros(4), 0)], 3),
        ([1, 2, 3], 3),
        ([], 0),
        (torch.tensor(5.0), 1),  # a scalar
        (np.zeros((5, 2)), 5),
    ],
)
def test_batch_samples_counts_the_samples_of_each_kind_of_batch(batch, samples):
    assert batch_samples(batch) == samples


def test_a_pause_leaves_the_next_step_out():
    """Validation or a checkpoint between two steps is neither a step nor a wait for data."""
    m = LoopMeter(window=10)
    t = 0.0
    m.done(t, 8)
    for _ in range(3):
        m.fetched(t + 0.01)
        t += 0.04
        m.done(t, 8)
    m.pause()  # validation: 5 s
    t += 5.0
    m.fetched(t + 0.01)
    t += 0.04
    m.done(t, 8)  # the origin again, as the first step
    m.fetched(t + 0.01)
    t += 0.04
    m.done(t, 8)
    s = m.stats()
    assert s.steps == 4 and s.data_wait == pytest.approx(0.25) and s.throughput == pytest.approx(8 / 0.04)
    assert s.samples_total == 6 * 8


def test_a_new_worker_count_starts_a_new_window_without_the_switching_step():
    m = LoopMeter(window=10)
    t = 0.0
    for _ in range(4):
        t += 0.1
        m.done(t, 8, tag=1)
    assert m.stats().tag == 1 and m.stats().steps == 3 and m.stats().throughput == pytest.approx(80.0)
    t += 0.5  # the batch that came from the new pool, after the switch
    m.done(t, 8, tag=3)
    assert m.stats() is None  # nothing measured at 3 yet: the switching step is left out
    for _ in range(2):
        t += 0.05
        m.done(t, 8, tag=3)
    s = m.stats()
    assert s.tag == 3 and s.steps == 2 and s.throughput == pytest.approx(160.0)
    assert s.samples_total == 7 * 8
