"""How a resize's new pool warms up (real fork workers): one fork per batch, workers held until their turn.

These tests fork the workers from the training process (``fork_server=False``), so that the pacing
can be watched one fork at a time; the zygote that forks them by default is tested in
``test_loader_zygote.py``.  The loader's clock is injected (10 ms per batch), so the handover it
estimates, and with it where each pool starts and which workers are open when, depend on the batch
count only.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import threading
import time
import warnings

import psutil
import pytest

from adlrec.loader import ResizableLoader, handover_batches, warmup_leads
from adlrec.loader.pacing import FORK_LOCK, ForkPacer, paced
from adlrec.loader.zygote import can_use_zygote
from tests.factories import Indices
from tests.integration.test_loader_resize import live_children, plain_pass, wait_until

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="pacing applies to fork"),
    pytest.mark.filterwarnings("ignore:ResizableLoader.*DataLoader workers on the:UserWarning"),  # more than 2 cores
    pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning"),  # the rebuild's plain loader
]
FORK = "fork"


def ticking(step_s: float = 0.01):
    """A clock that advances ``step_s`` per reading: the loop's batch interval is exactly ``step_s``."""
    counter = itertools.count()
    return lambda: next(counter) * step_s


def loader_of(n: int, workers: int, **kw) -> ResizableLoader:
    """An epoch of ``n`` batches of one index, starting as one pool of ``workers`` (each test follows
    one resize from it; ``split_pools``, the default, is tested on its own)."""
    kw = {"fork_server": False, "split_pools": False} | kw
    return ResizableLoader(Indices(n), 1, num_workers=workers, multiprocessing_context=FORK, clock=ticking(), **kw)


def follow_warm_up(loader: ResizableLoader, it, new, got: list, before: set[int], running: int) -> None:
    """Take batches while ``new`` starts and warms up: one fork per batch the loop takes, each worker's
    gate open only from its turn on, until the loader serves its new count."""
    for k in range(1, new.workers + 1):
        got.append(next(it).tolist())
        wait_until(lambda k=k: new.pacer.started == k)  # the k-th fork, granted with the k-th batch
        wait_until(lambda k=k: len(live_children() - before) == running + k)
    while loader.serving_workers != loader.num_workers:
        consumed = len(got)
        assert new.gate.opened == [consumed >= o for o in new.opens]  # held until their turn
        got.append(next(it).tolist())
    assert all(new.gate.opened)


@pytest.fixture(autouse=True)
def _no_leftover_workers():
    before = live_children()
    yield
    assert live_children() <= before, "a worker process outlived its test"


def test_growing_weaves_a_pool_of_the_difference_beside_the_running_one():
    before = live_children()
    loader = loader_of(80, 2)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(5)]
        loader.resize(4)
        old, new = loader._pools.live
        at = loader._pools.schedule.last.start
        assert loader._pools.schedule.last.pools == (old.id, new.id) and new.workers == 2
        assert at == 5 + handover_batches(
            FORK, 2, 0.01, process_gb=loader._process_gb
        )  # the new pool's start, then its warm-up
        assert new.opens == (at + 2 - 4, at + 3 - 4)  # each worker 4 batches before its first (at + 2 + i)
        assert new.pacer is not None and new.pacer.started == 0  # no fork inside resize
        follow_warm_up(loader, it, new, got, before, running=2)  # the old pool's 2 stay
        assert len(got) == at + 1
        assert loader._pools.live == [old, new]  # both serve: every 4 batches, 2 from each
        got += [b.tolist() for b in it]
    assert got == plain_pass(80, 1, False, False, 0, 1)[0]


def test_a_pool_that_replaces_forks_one_worker_per_batch_and_opens_each_gate_on_its_turn():
    before = live_children()
    loader = loader_of(80, 4)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(5)]
        loader.resize(3)  # no running pool adds up to 3: a pool of 3 replaces the pool of 4
        old, new = loader._pools.live
        at = loader._pools.schedule.last.start
        assert loader._pools.schedule.last.pools == (new.id,)
        assert at == 5 + handover_batches(FORK, 3, 0.01, old_workers=4, process_gb=loader._process_gb)
        assert new.opens == tuple(at - lead for lead in warmup_leads(3, 4))
        follow_warm_up(loader, it, new, got, before, running=4)
        assert len(got) == at + 1
        got += [b.tolist() for b in it]
    assert got == plain_pass(80, 1, False, False, 0, 1)[0]


def test_a_grows_workers_whose_turn_is_already_past_open_inside_resize():
    loader = loader_of(80, 1, handover=0)  # cut at the 2 batches in flight: a pool of 3 joins at once
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(5)]
        loader.resize(4)
        new = loader._pools.live[-1]
        assert new.workers == 3 and new.gate.opened == [5 >= o for o in new.opens]
        assert any(new.gate.opened)  # those whose turn was past: not held a batch more
        got += [b.tolist() for b in it]
    assert got == plain_pass(80, 1, False, False, 0, 1)[0]


@pytest.mark.skipif(not can_use_zygote(), reason="the zygote needs fork and fd passing")
def test_a_zygotes_forks_are_paced_one_per_batch_as_the_training_processs_are():
    """Its forks cost this process no GIL, but they and the workers' start-up take cores."""
    before = live_children()
    loader = loader_of(80, 4, fork_server=True)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(5)]
        zygote = loader._pools.zygote
        assert zygote is not None and zygote.running  # forked at the epoch's start
        loader.resize(3)
        old, new = loader._pools.live
        assert new.zygote is zygote and new.pacer is not None
        follow_warm_up(loader, it, new, got, before, running=4 + 1)  # the epoch's 4 workers and the zygote
        for pid in {w.pid for w in new.it._workers}:
            assert psutil.Process(pid).ppid() == zygote.pid
        got += [b.tolist() for b in it]
    assert got == plain_pass(80, 1, False, False, 0, 1)[0]


def test_shrinking_to_running_pools_drops_the_others_and_forks_nothing():
    before = live_children()
    loader = loader_of(80, 2)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(3)]
        loader.resize(3)  # 2 + a pool of 1
        while loader.serving_workers != 3:
            got.append(next(it).tolist())
        wait_until(lambda: len(live_children() - before) == 3)
        first, added = loader._pools.live
        loader.resize(1)  # the pool of 1 goes on alone; the pool of 2 serves what it holds, then stops
        assert loader._pools.schedule.last.pools == (added.id,)
        got.append(next(it).tolist())
        assert [p.id for p in loader._pools.live] in ([first.id, added.id], [added.id])
        for _ in range(8):
            got.append(next(it).tolist())
        assert loader._pools.live == [added] and loader.serving_workers == 1
        loader._pools.join_reapers()
        assert len(live_children() - before) == 1  # nothing forked, the pool of 2 stopped
        loader.resize(4)  # 1 + a pool of 3
        got += [b.tolist() for b in it]
    assert got == plain_pass(80, 1, False, False, 0, 1)[0]


def test_resizes_requested_while_earlier_pools_still_warm_up_keep_the_order_and_the_state():
    n = 120
    schedule = {5: 4, 8: 1, 10: 0, 12: 3, 14: 2}  # each before the previous pool has taken over
    (expected,) = plain_pass(n, 1, True, False, 3, 1)
    loader = loader_of(n, 2, shuffle=True, seed=3)
    got, state = [], None
    with loader:
        for i, batch in enumerate(loader, start=1):
            got.append(batch.tolist())
            if i in schedule:
                loader.resize(schedule[i])
            if i == 13:
                assert len(loader._pools.live) > 1  # a resize is pending
                state = loader.state_dict()
    assert got == expected
    assert state is not None and state["batches_consumed"] == 13
    resumed = loader_of(n, 3, shuffle=True, seed=99)  # the seed comes from the state
    resumed.load_state_dict(state)
    with resumed:
        rest = [b.tolist() for b in resumed]
    assert got[:13] + rest == expected


def test_closing_or_leaving_an_epoch_while_workers_are_held_stops_them_all():
    for leave in ("close", "new iter"):
        before = live_children()
        loader = loader_of(60, 1)
        it = iter(loader)
        for _ in range(3):
            next(it)
        loader.resize(3)  # 1 + a pool of 2
        for _ in range(2):
            next(it)  # both forked, none of them open yet
        pending = loader._pools.live[-1]
        wait_until(lambda p=pending: p.pacer.started == 2)
        assert not any(pending.gate.opened)
        if leave == "close":
            loader.close()
        else:
            assert next(iter(loader)).tolist() == [0]  # the next epoch starts cleanly
            loader.close()
        assert live_children() <= before


def test_a_pool_started_inside_resize_is_not_paced_and_a_resize_to_0_holds_nothing():
    loader = loader_of(60, 2, background_start=False)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(4)]
        loader.resize(3)
        assert loader._pools.live[-1].pacer is None  # pacing by the loop would block it here
        assert loader._pools.live[-1].gate is not None
        got.append(next(it).tolist())
        loader.resize(0)
        assert loader._pools.live[-1].gate is None
        got += [b.tolist() for b in it]
    assert got == [[i] for i in range(60)]


def test_a_paced_context_starts_a_process_only_per_permit():
    pacer = ForkPacer()
    ctx = paced(multiprocessing.get_context(FORK), pacer)
    assert ctx is not None and paced(multiprocessing.get_context("spawn"), ForkPacer()) is None
    procs = [ctx.Process(target=os.getpid) for _ in range(3)]
    starter = threading.Thread(target=lambda: [p.start() for p in procs])
    starter.start()
    pacer.allow_at(0)
    wait_until(lambda: procs[0].pid is not None)  # set once the first fork is done
    assert pacer.started == 1 and procs[1].pid is None and starter.is_alive()
    pacer.release(starter)  # the rest without permits
    starter.join()
    for p in procs:
        p.join()
    assert [p.exitcode for p in procs] == [0, 0, 0]


def test_more_workers_than_cores_is_the_callers_decision_and_warned_of_once_per_count_not_per_pool():
    many = (os.cpu_count() or 1) + 1
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = ResizableLoader(Indices(12), 2, num_workers=many, multiprocessing_context=FORK)
        with loader:
            it = iter(loader)
            got = [next(it).tolist()]
            loader.resize(many + 1)
            got += [b.tolist() for b in it]
    assert [i for b in got for i in b] == list(range(12))
    assert not [w for w in caught if "worker processes" in str(w.message)]  # torch's, at every pool's iter()
    ours = [str(w.message) for w in caught if "ResizableLoader" in str(w.message)]
    assert [m.split(" DataLoader")[0] for m in ours] == [f"ResizableLoader: {many}", f"ResizableLoader: {many + 1}"]


MARKS: list[str] = []  # the file each forked worker writes its pid to (set by the test; fork inherits it)


def mark_start(worker_id: int) -> None:
    with open(MARKS[0], "a") as f:
        f.write(f"{os.getpid()}\n")


@pytest.mark.parametrize(
    "fork_server", [False, pytest.param(True, marks=pytest.mark.skipif(not can_use_zygote(), reason="no zygote"))]
)
def test_a_pool_stopped_before_it_started_forks_no_worker(tmp_path, fork_server):
    MARKS[:] = [str(tmp_path / "forked")]
    loader = loader_of(60, 1, worker_init_fn=mark_start, handover=10, fork_server=fork_server)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(3)]
        loader.resize(3)  # a pool of 2 beside the running one, its forks paced one per batch: none yet
        new = loader._pools.live[-1]
        time.sleep(0.2)  # its thread waits for its first turn
        loader.resize(1)  # back before the next batch: the new pool is stopped before it started
        wait_until(lambda: new.it is None and new.starter is None)
        got += [b.tolist() for b in it]
    assert got == [[i] for i in range(60)]
    assert len((tmp_path / "forked").read_text().split()) == 1  # the first pool's worker only


def test_persistent_woven_pools_serve_the_next_epoch_as_they_are():
    loader = loader_of(40, 2, persistent_workers=True)
    with loader:
        first = []
        for i, batch in enumerate(loader, start=1):
            first.append(batch.tolist())
            if i == 3:
                loader.resize(3)  # 2 + a pool of 1, woven
        kept = list(loader._pools.kept)
        assert [p.workers for p in kept] == [2, 1]
        pids = {w.pid for p in kept for w in p.loader._iterator._workers}
        assert len(pids) == 3
        second = [b.tolist() for b in loader]
        assert loader._pools.kept == kept  # the same pools, kept again
        assert {w.pid for p in kept for w in p.loader._iterator._workers} == pids  # no worker restarted
    assert first == second == [[i] for i in range(40)]


def test_a_grow_whose_new_pool_would_serve_nothing_is_left_to_the_next_epoch():
    # 1 worker, handover 0, 3 batches before the end: the weave [1, 3] from the cut gives the new
    # pool none of the epoch's last batches.  Starting it anyway left a paced start waiting for
    # permits; kept for the next epoch, its reset then waited on the loop forever.
    n = 10
    loader = ResizableLoader(
        Indices(n), 1, num_workers=1, persistent_workers=True, handover=0, multiprocessing_context=FORK
    )
    with loader:
        for i, _ in enumerate(loader, start=1):
            if i == n - 3:
                loader.resize(4)
                assert [p.workers for p in loader._pools.live] == [1]  # nothing started
        out: list = []
        t = threading.Thread(target=lambda: out.append([b.item() for b in loader]), daemon=True)
        t.start()
        t.join(30)
        assert not t.is_alive(), "the next epoch hung"
        assert loader.serving_workers == 4
    assert out == [list(range(n))]


def test_a_kept_persistent_pool_is_stopped_when_the_count_changes():
    loader = ResizableLoader(Indices(8), 2, num_workers=2, persistent_workers=True, multiprocessing_context=FORK)
    with loader:
        before = live_children()
        list(loader)
        old = live_children() - before
        assert len(old) == 2
        kept = list(loader._pools.kept)  # a reference elsewhere must not keep the workers alive
        loader.resize(1)
        next(iter(loader))  # the epoch's first batch starts its workers: the kept pool of 2 is stopped
        assert not (live_children() & old), "the kept pool's workers outlived their shutdown"
        del kept


def test_resizing_back_before_a_pending_cut_keeps_the_serving_pool_and_starts_nothing():
    before = live_children()
    loader = loader_of(60, 3, handover=6)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(3)]
        serving = loader._pools.live[0]
        loader.resize(2)  # a pool of 2 replaces the pool of 3 at the cut, 6 batches past those in flight
        loader.resize(3)  # back, before the cut: the pool of 3 goes on, the pool of 2 is dropped
        assert loader._pools.schedule.last.pools == (serving.id,)
        got.append(next(it).tolist())
        assert loader._pools.live == [serving]
        loader._pools.join_reapers()
        assert len(live_children() - before) == 3
        got += [b.tolist() for b in it]
    assert got == [[i] for i in range(60)]


def test_a_pool_that_has_handed_out_nothing_serves_from_an_earlier_cut():
    # 3 -> 2 replaces at a cut 11 batches ahead (start, warm-up, the old pool's 3; a few more in a
    # larger process); 4 right after grows beside the pending pool of 2, whose paced start has not
    # taken a batch yet, at a cut 3 fewer ahead.  The pending pool must serve its share from that earlier cut, not from where it opened.
    loader = loader_of(80, 3)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(5)]
        gb = loader._process_gb
        replace, grow = (
            handover_batches(FORK, 2, 0.01, old_workers=3, process_gb=gb),
            handover_batches(FORK, 2, 0.01, process_gb=gb),
        )
        assert grow < replace
        loader.resize(2)
        pending = loader._pools.live[-1]
        assert pending.range.handed == 0 and pending.start == 5 + replace
        loader.resize(4)
        assert loader._pools.schedule.last.start == 5 + grow
        assert loader._pools.schedule.last.pools[0] == pending.id
        got += [b.tolist() for b in it]
    assert got == [[i] for i in range(80)]


def test_pools_of_one_resize_share_a_pacer_that_grants_one_fork_per_batch():
    pacer = ForkPacer()
    for position in (5, 5, 5, 6, 6, 4, 7):  # three pools advancing at each batch, and a stale position
        pacer.allow_at(position)
    assert pacer._allowed == 3  # positions 5, 6 and 7


@pytest.mark.parametrize("fork_server", [False, True])
def test_a_replacing_resize_starts_split_pools_forked_one_per_batch_in_all_and_numbered_as_one(fork_server):
    if fork_server and not can_use_zygote():
        pytest.skip("the zygote needs fork and fd passing")
    before = live_children()
    from tests.integration.test_loader_resize import WorkerNumber

    loader = ResizableLoader(
        WorkerNumber(120), 1, num_workers=0, multiprocessing_context=FORK, clock=ticking(), fork_server=fork_server
    )
    with loader:
        it = iter(loader)
        got = [next(it)[0].tolist() for _ in range(5)]
        loader.resize(4)  # from 0 workers: a replace, started as an epoch's would be
        new = loader._pools.live[1:]
        assert [p.workers for p in new] == [2, 1, 1]
        assert all((p.zygote is not None) == fork_server for p in new)  # whose workers the zygote forks
        assert len({id(p.pacer) for p in new}) == 1 and new[0].pacer is not None
        at = loader._pools.schedule.last.start
        assert [p.opens for p in new] == [
            (at - 4, at - 3),
            (at + 2 - 4,),
            (at + 3 - 4,),
        ]  # worker i of the weave opens 4 batches (its lead) before its first batch at + i
        pacer = new[0].pacer
        assert pacer.started == 0  # nothing forked inside resize
        for k in range(1, 5):  # the k-th fork, of whichever pool, granted with the k-th batch
            got.append(next(it)[0].tolist())
            wait_until(lambda k=k: pacer.started == k)
            time.sleep(0.02)
            assert pacer.started == k  # and no more until the next batch
        while loader.serving_workers != 4:
            got.append(next(it)[0].tolist())
        got += [b[0].tolist() for b in it]
        assert {(w, n) for _, w, n in got[-12:]} == {(w, 4) for w in range(4)}
        assert [i for i, _, _ in got] == list(range(120))
    assert live_children() <= before


@pytest.mark.skipif(not can_use_zygote(), reason="the zygote needs fork and fd passing")
def test_split_pools_that_fork_the_zygote_take_one_turn_for_it_and_one_per_worker(monkeypatch):
    # the epoch has no workers, so the resize's first pool forks the zygote on a turn; the other pools
    # wait for that fork instead of each taking a turn only to find the zygote running (turns lost)
    monkeypatch.setattr("adlrec.loader.resizable.AUTO_ZYGOTE_GB", 0.0)
    loader = loader_of(200, 0, split_pools=True, fork_server=None)  # the default: the zygote from 0 GB
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(5)]
        loader.resize(4)
        new = loader._pools.live[1:]
        assert [p.workers for p in new] == [2, 1, 1] and all(p.zygote is not None for p in new)
        pacer = new[0].pacer
        time.sleep(0.3)  # every pool's thread is waiting now, for a turn or for the zygote
        for k in range(1, 6):  # 5 batches grant 5 turns: the zygote's fork, then the 4 workers'
            got.append(next(it).tolist())
            wait_until(lambda k=k: pacer.started == k)
            time.sleep(0.05)
        # every turn forked something, so every pool has started all its workers (none waits for a 6th)
        wait_until(lambda: all(p.it is not None for p in new), timeout_s=5)
        assert pacer.started == 5
        zygote = loader._pools.zygote
        for p in new:
            assert {psutil.Process(w.pid).ppid() for w in p.it._workers} == {zygote.pid}  # the zygote's
        got += [b.tolist() for b in it]
    assert got == [[i] for i in range(200)]


def test_dropping_a_pool_that_has_not_started_lets_only_its_own_thread_go():
    loader = loader_of(200, 0, split_pools=True)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(5)]
        loader.resize(4)  # pools of 2, 1 and 1, sharing a pacer, none forked yet
        a, b, c = loader._pools.live[1:]
        time.sleep(0.2)  # their threads wait for turns
        loader.resize(3)  # before the next batch: the pools of 2 and 1 go on, the last one is dropped
        assert [p.id for p in loader._pools.live if p.workers] == [a.id, b.id]
        wait_until(lambda: c.it is None and c.starter is None)  # stopped: its thread was let go
        time.sleep(0.2)
        assert a.pacer.started == 0  # the kept pools' forks still wait for the loop (the next batch)
        got += [b.tolist() for b in it]
    assert got == [[i] for i in range(200)]


def test_a_replace_whose_split_pools_would_not_all_serve_starts_one_pool():
    loader = loader_of(10, 0, split_pools=True, handover=0)
    with loader:
        it = iter(loader)
        got = [next(it).tolist() for _ in range(8)]
        loader.resize(4)  # 2 batches left: pools of 2, 1 and 1 would leave the last two nothing
        assert [p.workers for p in loader._pools.live if p.workers] == [4]
        got += [b.tolist() for b in it]
    assert got == [[i] for i in range(10)]


def sentinel_holders(workers) -> dict[int, set[int]]:
    """Per worker: the other workers that hold the write end of its sentinel pipe (multiprocessing sees a
    worker exit when every write end of that pipe has closed; the read ends every later fork inherits from
    the training process do not matter)."""
    pipes = {os.fstat(w.sentinel).st_ino: w.pid for w in workers}
    held: dict[int, set[int]] = {w.pid: set() for w in workers}
    for w in workers:
        for fd in os.listdir(f"/proc/{w.pid}/fd"):
            try:
                target = os.readlink(f"/proc/{w.pid}/fd/{fd}")
                with open(f"/proc/{w.pid}/fdinfo/{fd}") as info:
                    flags = next(int(line.split()[1], 8) for line in info if line.startswith("flags:"))
            except FileNotFoundError:
                continue
            owner = pipes.get(int(target[6:-1])) if target.startswith("pipe:[") else None
            if owner is not None and owner != w.pid and flags & os.O_ACCMODE == os.O_WRONLY:
                held[owner].add(w.pid)
    return held


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="reads /proc")
def test_pools_starting_at_once_fork_one_at_a_time_so_no_worker_holds_anothers_sentinel():
    """Two pools start at once when a resize comes while an earlier one's pool still starts (and the
    pools of a split replace start together).  A worker forked while another thread's new worker still
    had its pipe open in the parent kept a copy: that worker's exit then went unseen until the other
    exited, and stopping the pool waited out torch's 5 s join timeout."""
    for _ in range(4):
        loader = loader_of(200, 1)
        with loader:
            it = iter(loader)
            for _ in range(5):
                next(it)
            loader.resize(3)
            next(it)
            loader.resize(6)  # the pool of 2 still starts: a second pool of 3 starts beside it

            def forked(loader=loader):
                return [w for p in loader._pools.live if p.it is not None and p.workers for w in p.it._workers]

            # forks are paced, one per batch the loop takes: on a loaded machine the schedule reaches its
            # stretch of 6 before the last worker is forked (the loop then waits for its batches)
            while loader.serving_workers != 6 or len(forked()) < 6:
                next(it)
            workers = forked()
            assert len(workers) == 6
            assert sentinel_holders(workers) == {w.pid: set() for w in workers}


@pytest.mark.skipif(not hasattr(os, "register_at_fork"), reason="needs fork hooks")
def test_a_process_forked_while_the_fork_lock_is_held_starts_with_it_free():
    # every worker and zygote is forked under the lock: one that builds a loader of its own must not hang
    with FORK_LOCK:
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os._exit(0 if FORK_LOCK.acquire(timeout=2) else 3)
    assert os.waitpid(pid, 0)[1] == 0
