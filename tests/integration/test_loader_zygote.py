"""The zygote that forks a resize's workers (real processes): the training process forks once, not per worker."""

from __future__ import annotations

import gc
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
import weakref

import psutil
import pytest
import torch

from adlrec.loader import ResizableLoader
from adlrec.loader.zygote import Zygote, ZygoteContext, can_use_zygote
from tests.factories import Indices
from tests.integration.test_loader_resize import gone, live_children, pids_left_by_a_killed_trainer, wait_until

pytestmark = [
    pytest.mark.skipif(not can_use_zygote(), reason="the zygote needs fork and fd passing"),
    pytest.mark.filterwarnings("ignore:ResizableLoader.*DataLoader workers on the:UserWarning"),  # more than 2 cores
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),
]

FORKS = [0]  # forks this test process has made (the count goes up before each one)
os.register_at_fork(before=lambda: FORKS.__setitem__(0, FORKS[0] + 1))


@pytest.fixture(autouse=True)
def _no_leftover_processes():
    before = live_children()
    yield
    assert live_children() <= before, "a worker or a zygote outlived its test"


def zygote_loader(dataset, batch_size: int, **kw) -> ResizableLoader:
    """A loader whose resizes' workers its zygote forks."""
    return ResizableLoader(dataset, batch_size, multiprocessing_context="fork", fork_server=True, **kw)


def workers_of(loader: ResizableLoader) -> dict[int, set[int]]:
    """Pool id -> the pids of its workers."""
    return {p.id: {w.pid for w in p.it._workers} for p in loader._pools.live if p.it is not None and p.workers}


def split_pools_awaiting_a_zygote(loader: ResizableLoader, got: list[int], pause_s: float):
    """Take 5 batches of an epoch with no workers (its zygote retired after the first), then
    ``resize(4)``: pools of 2, 1 and 1 with the zygote to fork.  After ``pause_s`` (no batch), one pool's
    thread waits for the turn to fork the zygote and the others for that fork.  Returns the iterator."""
    it = iter(loader)
    got.extend(next(it).item() for _ in range(5))
    loader._pools.join_reapers()
    assert loader._pools.zygote is None or not loader._pools.zygote.running
    loader.resize(4)
    time.sleep(pause_s)
    return it


def test_the_epoch_forks_the_zygote_and_the_zygote_forks_every_resizes_workers():
    loader = zygote_loader(Indices(120), 1, num_workers=1, handover=2)
    with loader:
        forks = FORKS[0]
        it = iter(loader)
        got = [next(it).item() for _ in range(5)]
        assert FORKS[0] - forks == 2  # the zygote, then the epoch's one worker
        zygote = loader._pools.zygote
        assert zygote is not None and zygote.running
        zygote_pid = zygote.pid
        forks = FORKS[0]
        loader.resize(4)  # a pool of 3 woven beside the running one
        got += [next(it).item() for _ in range(12)]  # past the cut (2) and a whole period (4) after it
        assert FORKS[0] == forks  # the zygote forked the 3 workers: this process, none
        new = max(loader._pools.live, key=lambda p: p.id)
        assert new.zygote is zygote
        for pid in workers_of(loader)[new.id]:
            assert psutil.Process(pid).ppid() == zygote.pid
        forks = FORKS[0]
        loader.resize(6)  # the same zygote forks this pool too: no fork here at all
        got += [next(it).item() for _ in range(30)]  # past what the running pools hold, and a period
        assert len(workers_of(loader)) == 3  # the woven pools of 1, 3 and 2 workers all serve
        assert FORKS[0] == forks
        got += [b.item() for b in it]
        assert loader._pools.zygote is None and zygote.pid is None  # retired with the epoch, reaped
        assert not psutil.pid_exists(zygote_pid)  # the next epoch's resizes fork a fresh one
    assert got == list(range(120))


def test_a_loop_that_breaks_out_of_an_epoch_stops_its_zygote_with_its_workers():
    """A zygote none of whose workers run holds its own copy of every page training writes: it must not
    wait for the next iter() or close()."""
    loader = zygote_loader(Indices(40), 1, num_workers=1)
    for i, _ in enumerate(loader):
        if i == 3:
            zygote = loader._pools.zygote
            assert zygote is not None and zygote.running
            pid = zygote.pid
            break
    assert loader._pools.zygote is None and zygote.pid is None and gone(pid)
    loader.close()


def test_an_epoch_of_no_workers_forks_no_zygote_its_first_resize_does():
    """With ``fork_server=True`` an epoch of 0 workers forked its zygote at the start and stopped it at its
    first batch (no worker shares its pages: ``retire_idle_zygote``), a fork for nothing (helper-48 saw it);
    the first resize forks the zygote, which forks the resize's workers."""
    loader = zygote_loader(Indices(60), 1, num_workers=0, handover=2)
    with loader:
        forks = FORKS[0]
        it = iter(loader)
        got = [next(it).item() for _ in range(5)]
        assert FORKS[0] == forks  # no zygote, no worker: this process forked nothing
        assert loader._pools.zygote is None
        loader.resize(2)
        got += [next(it).item() for _ in range(12)]
        assert FORKS[0] - forks == 1  # the zygote, which forked the 2 workers
        zygote = loader._pools.zygote
        assert zygote is not None and zygote.running
        new = max(loader._pools.live, key=lambda p: p.id)
        assert {psutil.Process(pid).ppid() for pid in workers_of(loader)[new.id]} == {zygote.pid}
        got += [b.item() for b in it]
    assert got == list(range(60))


@pytest.mark.parametrize(
    ("large", "workers", "forks_at_epoch_start", "forks_at_resize"),
    [
        (False, 1, 1, 2),  # a small process forks the resize's 2 workers itself
        (True, 1, 2, 0),  # a large one: the zygote comes with the epoch and forks them
        (True, 0, 0, 1),  # a large one whose epoch starts with no workers: the zygote comes with the resize
    ],
)
def test_by_default_the_zygote_forks_a_resizes_workers_only_in_a_large_training_process(
    monkeypatch, large, workers, forks_at_epoch_start, forks_at_resize
):
    rss_gb = psutil.Process().memory_info().rss / 2**30
    # "large" is relative to this process's real resident memory, which the loader reads at the epoch's start
    monkeypatch.setattr("adlrec.loader.resizable.AUTO_ZYGOTE_GB", rss_gb / 2 if large else rss_gb + 1.0)
    loader = ResizableLoader(Indices(60), 1, num_workers=workers, multiprocessing_context="fork", handover=2)
    assert loader.fork_server is None
    with loader:
        forks = FORKS[0]
        it = iter(loader)
        got = [next(it).item() for _ in range(5)]
        assert FORKS[0] - forks == forks_at_epoch_start
        forks = FORKS[0]
        loader.resize(workers + 2)
        got += [next(it).item() for _ in range(12)]  # past the cut and a period after it
        assert FORKS[0] - forks == forks_at_resize
        zygote = loader._pools.zygote
        assert (zygote is not None) == large
        new = max(loader._pools.live, key=lambda p: p.id)
        parent = zygote.pid if large else os.getpid()
        assert {psutil.Process(pid).ppid() for pid in workers_of(loader)[new.id]} == {parent}
        got += [b.item() for b in it]
    assert got == list(range(60))


def test_by_default_kept_persistent_pools_fork_no_zygote_until_a_resize_needs_one(monkeypatch):
    # a large process: the zygote is the default, but kept pools hold an earlier epoch's pages, so a zygote
    # forked at the next epoch's start would share none of them and hold its own copy of what training writes
    monkeypatch.setattr("adlrec.loader.resizable.AUTO_ZYGOTE_GB", psutil.Process().memory_info().rss / 2**30 / 2)
    loader = ResizableLoader(
        Indices(40), 1, num_workers=2, persistent_workers=True, multiprocessing_context="fork", handover=2
    )
    with loader:
        forks = FORKS[0]
        first = [b.item() for b in loader]
        assert FORKS[0] - forks == 3  # the zygote, then the epoch's 2 workers (this process forks those)
        assert loader._pools.zygote is None  # none of the kept workers is its child: retired
        forks = FORKS[0]
        it = iter(loader)
        second = [next(it).item() for _ in range(5)]
        assert FORKS[0] == forks  # the kept pool serves: nothing forked
        loader.resize(4)  # a pool of 2 woven beside the kept one
        second += [next(it).item() for _ in range(12)]
        assert FORKS[0] - forks == 1  # the zygote, now, which forks the 2 new workers
        zygote = loader._pools.zygote
        new = max(loader._pools.live, key=lambda p: p.id)
        assert {psutil.Process(pid).ppid() for pid in workers_of(loader)[new.id]} == {zygote.pid}
        second += [b.item() for b in it]
    assert first == second == list(range(40))


@pytest.mark.parametrize("fork_server", [True, None])
def test_a_resize_to_no_workers_stops_the_zygote_and_the_next_resize_forks_a_fresh_one(monkeypatch, fork_server):
    # with no worker sharing its copy of this process's pages, it would hold every page training writes
    monkeypatch.setattr("adlrec.loader.resizable.AUTO_ZYGOTE_GB", 0.0)
    loader = ResizableLoader(
        Indices(80), 1, num_workers=1, multiprocessing_context="fork", fork_server=fork_server, handover=2
    )
    with loader:
        it = iter(loader)
        got = [next(it).item() for _ in range(3)]
        loader.resize(3)  # a pool of 2 the zygote forks, woven beside the epoch's own
        got += [next(it).item() for _ in range(10)]
        zygote = loader._pools.zygote
        pid = zygote.pid
        assert len(workers_of(loader)) == 2
        loader.resize(0)  # the pools drain what they hold, then shut down
        for _ in range(40):  # the loop retires it at a batch once its pools have shut down
            got.append(next(it).item())
            if loader._pools.zygote is None:
                break
            time.sleep(0.02)  # a step: the dropped pools shut down meanwhile, in threads
        assert loader._pools.zygote is None
        wait_until(lambda: gone(pid))  # stopped off the loop's thread
        assert zygote.pid is None
        forks = FORKS[0]
        loader.resize(2)
        got += [next(it).item() for _ in range(8)]
        assert FORKS[0] - forks == 1  # a fresh zygote, which forks the 2 workers
        fresh = loader._pools.zygote
        new = max(loader._pools.live, key=lambda p: p.id)
        assert {psutil.Process(w).ppid() for w in workers_of(loader)[new.id]} == {fresh.pid}
        got += [b.item() for b in it]
    assert got == list(range(80))


ZERO_WORKERS_THEN_SPAWN = """
import multiprocessing
import adlrec.loader.resizable as resizable
from adlrec.loader import ResizableLoader
from tests.factories import Indices
resizable.AUTO_ZYGOTE_GB = 0.0  # large: the zygote is the default
assert [b.item() for b in ResizableLoader(Indices(4), 1)] == [0, 1, 2, 3]
multiprocessing.set_start_method("spawn")  # the loader, with no workers to start, chose no start method
print("ok")
"""


def test_a_loader_with_no_workers_leaves_the_start_method_unset():
    done = subprocess.run([sys.executable, "-c", ZERO_WORKERS_THEN_SPAWN], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


class Unpicklable(Indices):
    """A dataset that cannot be pickled (it holds a lock): fork passes it, so must the zygote."""

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.lock = threading.Lock()


def test_the_dataset_and_functions_reach_the_workers_by_reference_not_by_pickling():
    tags = []
    loader = zygote_loader(
        Unpicklable(40),
        2,
        num_workers=1,
        collate_fn=lambda samples: torch.tensor([s * 10 for s in samples]),  # a lambda: not picklable
        worker_init_fn=lambda worker_id: tags.append(worker_id),  # runs in the worker: the list there
        handover=1,
    )
    with loader:
        out = []
        for i, batch in enumerate(loader):
            out += batch.tolist()
            if i == 3:
                loader.resize(3)
        assert loader.serving_workers == 3
    assert out == [10 * i for i in range(40)]


def test_a_zygote_stopped_with_its_epoch_lets_go_of_the_dataset_it_held():
    data = Indices(20)
    held = weakref.ref(data)
    loader = zygote_loader(data, 1, num_workers=1)
    assert [b.item() for b in loader] == list(range(20))  # the epoch's end stops its zygote
    del loader, data
    gc.collect()
    assert held() is None, "the training process still holds a stopped zygote's dataset"


def test_persistent_pools_keep_their_zygote_for_the_next_epoch_and_close_stops_it():
    loader = zygote_loader(Indices(40), 1, num_workers=1, persistent_workers=True, handover=1)
    with loader:
        first = []
        for i, b in enumerate(loader):
            first.append(b.item())
            if i == 2:
                loader.resize(3)
        zygote = loader._pools.zygote
        assert zygote is not None and zygote.running  # its workers are kept: so is it
        second = [b.item() for b in loader]
        assert loader._pools.zygote is zygote
    assert zygote.pid is None  # stopped and reaped by close()
    assert first == second == list(range(40))


class Shifted(Indices):
    """Index plus ``shift``: which copy of the dataset (from when) a worker holds shows in its samples."""

    shift = 0

    def __getitem__(self, i: int) -> int:
        return i + self.shift


def test_a_new_count_for_persistent_pools_retires_their_zygote_so_the_next_sees_the_dataset_now():
    data = Shifted(40)
    loader = zygote_loader(data, 1, num_workers=1, persistent_workers=True, handover=1)
    with loader:
        for i, _ in enumerate(loader):
            if i == 2:
                loader.resize(3)  # the zygote forks a pool of 2, kept with the first for the next epoch
        old = loader._pools.zygote
        assert old is not None and old.running
        data.shift = 1000  # changed between epochs: fresh workers must see it
        loader.resize(2)  # another count: the kept pools stop at the next epoch's start, so can their zygote
        second = []
        for i, b in enumerate(loader):
            second.append(b.item())
            if i == 2:
                loader.resize(4)  # forked by the epoch's zygote
        assert old.pid is None  # stopped and reaped at the epoch's start
    assert second == [i + 1000 for i in range(40)]


@pytest.mark.parametrize("split_pools", [False, True])
def test_resizes_before_the_next_batch_while_the_zygote_waits_for_its_turn_do_not_hang(monkeypatch, split_pools):
    # The epoch starts with no workers, so the first resize's pool forks the zygote, on the turn the next
    # batch grants.  Meanwhile the loop's thread opens more pools (a second resize; with split_pools the
    # same resize's second pool), each asking whether the zygote runs: that must not wait for the turn.
    monkeypatch.setattr("adlrec.loader.resizable.AUTO_ZYGOTE_GB", 0.0)
    loader = ResizableLoader(
        Indices(60), 1, num_workers=0, multiprocessing_context="fork", handover=2, split_pools=split_pools
    )
    got: list[int] = []

    def train() -> None:
        it = iter(loader)
        got.extend(next(it).item() for _ in range(3))
        loader.resize(2)  # split: pools of 1 and 1, both forked by the zygote
        time.sleep(0.2)  # the first pool's thread is now waiting for its turn to fork the zygote
        loader.resize(3)  # before the next batch, which grants that turn
        got.extend(b.item() for b in it)

    with loader:
        t = threading.Thread(target=train, daemon=True)
        t.start()
        t.join(60)
        assert not t.is_alive(), "the loop's thread hangs at a resize while a pool waits to fork the zygote"
        zygote = loader._pools.zygote
    assert got == list(range(60))
    assert zygote is None or zygote.pid is None  # retired with the epoch


@pytest.mark.parametrize("then", ["close", "switch"])
def test_split_pools_waiting_for_another_pools_turn_to_fork_the_zygote_are_let_go_when_stopped_or_due(
    monkeypatch, then
):
    # 0 -> 4 as 2+1+1 with the zygote still to fork: one pool's thread waits for the turn, the others
    # for its fork.  Stopping them all (close) or switching at once (handover=0) releases each pool in
    # turn, before any batch grants that turn: a pool released while waiting must go on by itself.
    from adlrec.loader import pool as pool_module

    start = pool_module.Pool._start

    def first_pool_late(self):  # so that the switch's pool is not the one whose thread holds the turn
        if self.id == 1:
            time.sleep(0.3)
        start(self)

    monkeypatch.setattr(pool_module.Pool, "_start", first_pool_late)
    loader = zygote_loader(Indices(100), 1, num_workers=0, handover=0)
    got: list[int] = []

    def train() -> None:
        it = split_pools_awaiting_a_zygote(loader, got, 0.6)
        if then == "close":
            loader.close()
        else:
            got.extend(b.item() for b in it)

    t = threading.Thread(target=train, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), f"the loop's thread hangs ({then}) while a pool waits for another's turn"
    loader.close()
    assert got == list(range(5 if then == "close" else 100))


def test_a_zygote_stopped_for_a_new_dataset_is_never_forked_again_by_pools_still_shutting_down(monkeypatch):
    # Pools replaced before they started are shut down in threads, which let their start threads go:
    # one may then fork the zygote.  A resize that needs a zygote for a new dataset must neither stop
    # the old one under them nor let them fork it after it was stopped (nothing would stop it again).
    fork = Zygote._fork

    def late_fork(self):  # a start thread descheduled just before it forks: the window, made wide
        if threading.current_thread().name == "adlrec-loader-start":
            time.sleep(0.05)
        fork(self)

    monkeypatch.setattr(Zygote, "_fork", late_fork)
    loader = zygote_loader(Indices(200), 1, num_workers=0, handover=2)
    got: list[int] = []
    with loader:
        it = split_pools_awaiting_a_zygote(loader, got, 0.5)
        old = loader._pools.zygote
        loader.resize(0)  # they are replaced before they started, and shut down in threads
        loader.dataset = Indices(200)  # a new object: a resize now needs a zygote holding it
        loader.resize(2)
        got += [b.item() for b in it]
    assert old.pid is None or gone(old.pid)
    assert got == list(range(200))


def test_a_resize_for_a_new_dataset_leaves_the_zygote_of_running_workers_alone():
    loader = zygote_loader(Indices(60), 1, num_workers=1, handover=2)
    with loader:
        it = iter(loader)
        got = [next(it).item() for _ in range(3)]
        loader.resize(2)  # the zygote forks a pool of 1, woven beside the epoch's own
        got += [next(it).item() for _ in range(10)]
        zygote = loader._pools.zygote
        assert len(workers_of(loader)) == 2
        loader.dataset = Shifted(60)
        loader.dataset.shift = 1000  # a new object: the zygote holds the old one, which its worker serves
        loader.resize(3)  # so this pool is forked here, and the zygote goes on
        got += [b.item() for b in it]
        assert zygote.pid is None  # retired with the epoch, not before
    assert [i % 1000 for i in got] == list(range(60))
    assert any(i >= 1000 for i in got)  # the new pool loads from the new dataset, not the zygote's old one


def test_a_pools_start_time_leaves_out_its_wait_for_another_pools_zygote_fork():
    # start_s (what the handover estimate learns from) is the time spent starting, not waiting: the
    # pacer's turns, and for the pools that wait for another's fork of the zygote, that wait too
    loader = zygote_loader(Indices(80), 1, num_workers=0, handover=10)
    got: list[int] = []
    with loader:
        it = split_pools_awaiting_a_zygote(loader, got, 1.0)  # a long step: all three wait through it
        new = loader._pools.live[1:]
        while any(p.start_s is None for p in new):
            got.append(next(it).item())
            time.sleep(0.02)
        assert all(p.start_s < 0.5 for p in new), [p.start_s for p in new]  # none counts the 1 s step
        got += [b.item() for b in it]
    assert got == list(range(80))


def test_a_zygote_that_died_is_forked_again_at_the_next_resize():
    loader = zygote_loader(Indices(60), 1, num_workers=1, handover=1)
    with loader:
        it = iter(loader)
        got = [next(it).item() for _ in range(3)]
        zygote = loader._pools.zygote
        assert zygote is not None and zygote.running
        first = zygote.pid
        os.kill(first, 9)  # the OOM killer, say: no worker of its runs yet
        wait_until(lambda: not zygote.running)  # reaped and cleaned up
        loader.resize(3)
        got += [next(it).item() for _ in range(10)]  # past the cut
        assert zygote.pid not in (None, first)  # forked again, then forked the new pool's workers
        new = max(loader._pools.live, key=lambda p: p.id)
        assert new.zygote is zygote
        for pid in workers_of(loader)[new.id]:
            assert psutil.Process(pid).ppid() == zygote.pid
        got += [b.item() for b in it]
    assert got == list(range(60))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts open files in /proc")
def test_a_request_to_a_zygote_that_died_fails_and_leaves_no_file_open():
    zygote = Zygote(())
    zygote.ensure_running()
    os.kill(zygote.pid, signal.SIGKILL)  # the OOM killer, say, between a start's check and its request
    wait_until(lambda: gone(zygote.pid))  # dead, not reaped: the zygote still looks running to a request
    fds = len(os.listdir("/proc/self/fd"))
    with pytest.raises(OSError):
        zygote.request([])
    assert len(os.listdir("/proc/self/fd")) == fds
    zygote.stop()


def test_stop_kills_a_zygote_that_does_not_exit():
    zygote = Zygote(())
    zygote.ensure_running()
    pid = zygote.pid
    os.kill(pid, signal.SIGSTOP)  # it cannot see its pipe close
    zygote.STOP_S = 0.2
    zygote.stop()
    assert zygote.pid is None and not psutil.pid_exists(pid)


def test_a_stopped_zygote_is_never_forked_again():
    """stop() is final: a pool still starting that asked a stopped zygote would fork one that nothing stops."""
    zygote, never_ran = Zygote(()), Zygote(())
    zygote.ensure_running()
    for stopped in (zygote, never_ran):
        stopped.stop()
        with pytest.raises(RuntimeError, match="the zygote was stopped"):
            stopped.ensure_running()
        assert stopped.pid is None


def exit_with(code: int) -> None:
    os._exit(code)


def test_exit_codes_and_signals_of_a_zygote_child_reach_the_training_process():
    zygote = Zygote(())
    ctx = ZygoteContext(zygote)
    try:
        p = ctx.Process(target=exit_with, args=(3,))
        p.start()
        p.join(30)
        assert p.exitcode == 3
        q = ctx.Process(target=time.sleep, args=(60,))
        q.start()
        assert psutil.Process(q.pid).ppid() == zygote.pid
        q.terminate()
        q.join(30)
        assert q.exitcode == -15
    finally:
        zygote.stop()


def test_ctrl_c_leaves_the_zygote_serving_the_training_process():
    """^C in a terminal signals the whole foreground process group, the zygote with it: what it means is
    the training process's to decide (its KeyboardInterrupt), and a loop that goes on still has its zygote."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a run from a terminal has it
    zygote = Zygote(())
    ctx = ZygoteContext(zygote)
    try:
        first = ctx.Process(target=exit_with, args=(3,))
        first.start()  # the zygote serves requests now
        first.join(30)
        pid = zygote.pid
        os.kill(pid, signal.SIGINT)
        second = ctx.Process(target=exit_with, args=(4,))
        second.start()
        second.join(30)
        assert (first.exitcode, second.exitcode) == (3, 4)
        assert zygote.running and zygote.pid == pid
    finally:
        zygote.stop()
        signal.signal(signal.SIGINT, previous)


def test_no_process_forked_later_holds_a_zygote_alive():
    zygote = Zygote(())
    zygote.STOP_S = 120.0  # past the join below: the zygote must exit by itself, not by stop()'s SIGKILL
    zygote.ensure_running()
    ctx = multiprocessing.get_context("fork")
    release = ctx.Event()
    later = ctx.Process(target=release.wait, args=(60,))  # forked after the zygote, alive meanwhile
    later.start()
    try:
        stopping = threading.Thread(target=zygote.stop, daemon=True)
        stopping.start()
        stopping.join(30)  # stop() reaps the zygote: it returns once the zygote has seen its pipe close
        assert not stopping.is_alive(), "a later fork kept the zygote's alive pipe open"
    finally:
        release.set()
        later.join(30)


ORPHAN = """
import os, sys, time
from adlrec.loader.zygote import Zygote, ZygoteContext
zygote = Zygote(())
p = ZygoteContext(zygote).Process(target=time.sleep, args=(120,))
p.start()
print(zygote.pid, p.pid, flush=True)
time.sleep(120)
"""


def test_the_zygote_and_its_workers_end_when_the_training_process_dies():
    zygote_pid, worker_pid = pids_left_by_a_killed_trainer(ORPHAN)
    wait_until(lambda: gone(zygote_pid))
    # the worker is orphaned: its parent changes, which a DataLoader worker's watchdog sees and ends it
    wait_until(lambda: gone(worker_pid) or psutil.Process(worker_pid).ppid() != zygote_pid)
    if not gone(worker_pid):
        os.kill(worker_pid, 9)  # this one sleeps: no watchdog
