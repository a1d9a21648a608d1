"""ResizableLoader's workers, threads and files end with the epoch that used them, however it ends.

Real fork workers; what is left is read from the process table (psutil), /proc/self/fd and
``threading.enumerate()``.
"""

from __future__ import annotations

import gc
import os
import re
import threading
import time

import psutil
import pytest
import torch

from adlrec.loader import ResizableLoader
from tests.factories import Indices

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="the workers start with fork"),
    pytest.mark.filterwarnings("ignore:ResizableLoader.*DataLoader workers on the:UserWarning"),
]


def workers() -> set[int]:
    """Child processes that have not been reaped (zombies included): workers, zygotes."""
    out = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if "multiprocessing.resource_tracker" not in " ".join(p.cmdline()):
                out.add(p.pid)
        except psutil.NoSuchProcess:  # gone meanwhile: not left behind
            pass
    return out


def loader_threads() -> set[threading.Thread]:
    """The loader's threads and its pools' (torch's queue feeders); an earlier test may have left some."""
    return {t for t in threading.enumerate() if t.name.startswith("adlrec-loader") or "Feeder" in t.name}


def threads_left(before: set[threading.Thread]) -> set[threading.Thread]:
    """The loader's threads beyond ``before``.  Its own must have ended already; a torch queue's feeder
    thread ends on its own a moment after the queue is closed (torch closes it without joining it: 1 run
    in 20 or so on a loaded machine still saw one), so feeders get a bounded wait."""
    deadline = time.monotonic() + 30  # a bound on waiting, not a timing check
    while True:
        left = loader_threads() - before
        if not any("Feeder" in t.name for t in left) or time.monotonic() > deadline:
            return left
        time.sleep(0.01)


def make(**kw) -> ResizableLoader:
    return ResizableLoader(Indices(40), 2, num_workers=2, multiprocessing_context="fork", **kw)


@pytest.mark.parametrize("persistent", [False, True])
def test_an_iterator_dropped_mid_epoch_stops_its_workers_as_a_dataloaders_does(persistent):
    before, threads_before = workers(), loader_threads()
    loader = make(persistent_workers=persistent)
    it = iter(loader)
    for _ in range(4):
        next(it)
    loader.resize(3)  # a pool starting beside the split pools running
    assert workers() - before  # while the loop holds the iterator, its epoch may go on
    del it  # its epoch cannot go on
    assert workers() <= before  # stopped and reaped
    assert not threads_left(threads_before)
    state = loader.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (0, 4)  # where the loop stood
    assert [b.tolist() for b in loader][0] == [0, 1]  # the next pass, as before (epoch 1 of no shuffle)
    loader.close()


def test_a_new_iter_stops_the_unfinished_epochs_workers_at_once_and_close_stops_kept_pools():
    before = workers()
    loader = make(persistent_workers=True)
    it = iter(loader)
    next(it)
    assert workers() - before
    again = iter(loader)  # the old iterator is still held: the new iter() itself abandons its epoch
    assert workers() <= before  # before the new epoch's first batch, which starts its own
    assert [b.tolist() for b in again][0] == [0, 1] and workers() - before  # ended: its pools are kept
    kept = list(loader._pools.kept)  # a reference elsewhere must not keep their workers alive
    loader.close()
    assert kept and workers() <= before
    del it


def test_a_loop_that_breaks_out_stops_the_epochs_workers():
    before, threads_before = workers(), loader_threads()
    loader = make()
    for i, _ in enumerate(loader):
        if i == 3:
            break
    assert workers() <= before
    assert not threads_left(threads_before)
    loader.close()


@pytest.mark.parametrize("fork_server", [False, True])
def test_persistent_workers_after_a_loop_broke_out_serve_later_epochs_and_their_resizes_exactly_once(fork_server):
    """A loop that breaks out of an epoch early (its workers stop), then epochs that resize: one with new
    pools (2 -> 4), then one with the persistent pools kept from it (4 -> 1).  Every index once per epoch."""
    before = workers()
    loader = make(persistent_workers=True, shuffle=True, seed=3, fork_server=fork_server, handover=2)
    for i, _ in enumerate(loader):
        if i == 5:
            break
    assert workers() <= before  # nothing kept from an epoch left early
    for epoch, resize_to in ((1, 4), (2, 1)):
        got = []
        for i, batch in enumerate(loader):
            got += batch.tolist()
            if i == 6:
                loader.resize(resize_to)
        assert sorted(got) == list(range(40)), epoch
        kept = loader._pools.kept
        assert sum(p.workers for p in kept) == resize_to  # the pools of the last count wait for the next epoch
        assert {w.pid for p in kept for w in p.loader._iterator._workers} <= workers() - before
    loader.close()
    assert workers() <= before


def test_a_step_that_raises_mid_epoch_leaves_no_worker_thread_or_file_open():
    fds = len(os.listdir("/proc/self/fd"))
    before, threads_before = workers(), loader_threads()
    loader = make()

    def train() -> None:
        for i, _ in enumerate(loader):
            if i == 5:
                raise ValueError("the step failed")

    with pytest.raises(ValueError, match="the step failed"):
        train()
    gc.collect()
    assert workers() <= before
    assert not threads_left(threads_before)
    assert len(os.listdir("/proc/self/fd")) <= fds
    loader.close()


def test_an_iterator_kept_by_the_loop_still_serves_after_another_is_dropped():
    """Only the live epoch's iterator stops it: an older one (replaced by a newer iter()) is a no-op."""
    loader = make()
    old = iter(loader)
    next(old)
    new = iter(loader)  # replaces the first epoch
    first = next(new)
    del old
    gc.collect()
    rest = [first, *new]
    assert sorted(i for b in rest for i in b.tolist()) == list(range(40))
    loader.close()


def test_an_unused_iter_dropped_uses_up_no_epoch_and_keeps_persistent_pools():
    """Lightning's check that a loader is iterable: ``iter(loader)`` dropped at once."""
    loader = make(persistent_workers=True, shuffle=True, seed=3)
    first = [b.tolist() for b in loader]  # epoch 0; its pools are kept
    kept = workers()
    iter(loader)  # dropped
    gc.collect()
    assert workers() == kept
    second = [b.tolist() for b in loader]
    plain = torch.utils.data.DataLoader(Indices(40), 2, shuffle=True, generator=torch.Generator().manual_seed(3))
    assert [first, second] == [[b.tolist() for b in plain] for _ in range(2)]  # epochs 0 and 1
    loader.close()


class FailsAt(torch.utils.data.Dataset):
    """Indices, except that loading ``bad`` raises."""

    def __init__(self, n: int, bad: int) -> None:
        self.n, self.bad = n, bad

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if i == self.bad:
            raise KeyError(f"sample {i} is unreadable")
        return i


def take_skipping_errors(it) -> tuple[list[int], list[str]]:
    """A loop that logs a failed batch and asks for the next one, as one may do with a DataLoader."""
    got, errors = [], []
    while True:
        try:
            got += next(it).tolist()
        except StopIteration:
            return got, errors
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            if len(errors) > 1:
                return got, errors


@pytest.mark.parametrize("workers_", [0, 2])
def test_after_a_dataset_error_the_next_batch_is_an_error_naming_it_not_a_silently_shorter_epoch(workers_):
    before = workers()
    loader = ResizableLoader(FailsAt(20, bad=7), 2, num_workers=workers_, multiprocessing_context="fork")
    it = iter(loader)  # held: its being dropped would stop the workers too
    got, errors = take_skipping_errors(it)
    assert got == list(range(6))  # batches 0-2; batch 3 holds sample 7
    assert "sample 7 is unreadable" in errors[0]
    assert len(errors) == 2, "the epoch ended silently after the error, 12 samples short"
    assert "stopped at batch 3 of 10" in errors[1] and "KeyError" in errors[1]
    assert not workers() - before, "the error stopped every worker"
    state = loader.state_dict()
    assert (state["epoch"], state["batches_consumed"]) == (0, 3)  # resuming retries the failed batch
    loader.close()


def test_a_killed_worker_is_named_and_later_batches_say_the_epoch_stopped():
    """A loop that logs each error and asks on, as it may with a DataLoader, is told which worker died,
    then that the epoch stopped: never a silently shorter epoch."""
    import signal

    before = workers()  # an earlier test's helpers (a fork server) are no victims
    loader = make()
    it = iter(loader)
    next(it)
    victim = min(workers() - before)
    errors = []
    try:
        os.kill(victim, signal.SIGKILL)  # torch's SIGCHLD handler may raise here already, as anywhere in a loop
    except RuntimeError as exc:
        errors.append(str(exc))
    for _ in range(len(loader) + 1):
        try:
            next(it)
        except RuntimeError as exc:
            errors.append(str(exc))
    named = re.compile(f"DataLoader worker \\(pid.*{victim}")
    stopped = "ResizableLoader: this epoch stopped at batch"
    assert named.search(errors[0]), errors
    assert errors[-1].startswith(stopped), errors
    assert all(named.search(e) or e.startswith(stopped) for e in errors), errors
    loader.close()
