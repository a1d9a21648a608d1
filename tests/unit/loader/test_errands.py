"""Errands: a loader's background work, in one thread started ahead of time."""

from __future__ import annotations

import logging
import threading
import time

import pytest
import torch
from torch.utils.data import Dataset

import adlrec.loader.resizable as resizable
from adlrec.loader import ResizableLoader
from adlrec.loader.errands import Errands, Spare


def test_errands_run_in_order_in_the_one_thread_started_ahead():
    errands = Errands("test-errands")
    assert errands.ensure_thread()
    threads_before = threading.active_count()
    ran: list[tuple[int, int]] = []
    gate = threading.Event()
    errands.submit(gate.wait)  # holds the thread: the next ones queue behind it
    for i in range(5):
        errands.submit(lambda i=i: ran.append((i, threading.get_ident())))
    assert threading.active_count() == threads_before  # submitting started no thread
    assert errands.busy()
    gate.set()
    errands.join()
    assert not errands.busy()
    assert [i for i, _ in ran] == list(range(5))
    assert len({ident for _, ident in ran}) == 1
    assert ran[0][1] != threading.get_ident()
    errands.close()
    assert not any(t.name == "test-errands" for t in threading.enumerate())


def test_an_errand_that_fails_is_logged_and_the_next_one_runs(caplog):
    errands = Errands("test-errands")
    errands.ensure_thread()
    done = threading.Event()

    def broken() -> None:
        raise ValueError("boom")

    with caplog.at_level(logging.ERROR, logger="adlrec.loader.errands"):
        errands.submit(broken)
        errands.submit(done.set)
        errands.join()
    assert done.is_set()
    assert any("boom" in (r.exc_text or "") or (r.exc_info and "boom" in str(r.exc_info[1])) for r in caplog.records)
    errands.close()


def test_without_its_thread_an_errand_still_runs_off_the_callers_thread():
    errands = Errands("test-errands")  # ensure_thread never called, or closed since
    where: list[int] = []
    errands.submit(lambda: where.append(threading.get_ident()))
    errands.join()
    assert where and where[0] != threading.get_ident()
    errands.ensure_thread()
    errands.close()
    errands.submit(lambda: where.append(threading.get_ident()))  # after close: a thread of its own again
    errands.join()
    assert len(where) == 2 and where[1] != threading.get_ident()
    assert errands.ensure_thread()  # and it can start again
    errands.close()


class Squares(Dataset):
    def __len__(self) -> int:
        return 400

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor([i * i])


@pytest.mark.filterwarnings("ignore:.*DataLoader workers on the.*:UserWarning")
def test_a_drop_stops_the_drained_pools_in_the_errand_thread_the_epoch_started(monkeypatch):
    stopped_in: list[str] = []
    real = resizable.shutdown

    def recording(pool):  # the real shutdown, noting which thread ran it
        stopped_in.append(threading.current_thread().name)
        real(pool)

    monkeypatch.setattr(resizable, "shutdown", recording)
    loader = ResizableLoader(Squares(), 4, num_workers=4, multiprocessing_context="fork", split_pools=True)
    with loader:
        it = iter(loader)
        seen = [next(it) for _ in range(5)]
        errand_thread = loader._pools.errands._thread
        assert errand_thread is not None and errand_thread.is_alive()  # started with the epoch's workers
        threads_before = {t.ident for t in threading.enumerate()}
        loader.resize(1)  # 2+1+1 -> the pool of 1 goes on; the others drain and are stopped
        for _ in range(20):
            seen.append(next(it))
            assert {t.ident for t in threading.enumerate()} <= threads_before  # no thread started on the way
        loader._pools.join_reapers()
        assert stopped_in and set(stopped_in) == {"adlrec-loader-reaper"}
        assert loader._pools.errands._thread is errand_thread
        seen += list(it)
    assert torch.cat(seen).flatten().tolist() == [i * i for i in range(400)]
    assert loader._pools.errands._thread is None  # the epoch's end stopped it


@pytest.mark.parametrize("close_early", [False, True])
def test_the_errand_thread_ends_with_the_epoch_or_the_loader(close_early):
    loader = ResizableLoader(Squares(), 50, num_workers=1, multiprocessing_context="fork")
    it = iter(loader)
    next(it)
    assert loader._pools.errands._thread is not None
    if close_early:
        loader.close()
    else:
        list(it)
    assert not any(t.name == "adlrec-loader-reaper" for t in threading.enumerate())
    loader.close()


def test_a_grow_starts_its_pool_in_a_spare_thread_started_before_the_resize():
    loader = ResizableLoader(Squares(), 4, num_workers=1, multiprocessing_context="fork")
    with loader:
        it = iter(loader)
        seen = []
        for _ in range(3):  # a training step between batches: without one the measured batch time is the
            seen.append(next(it))  # prefetch's (~0.1 ms under load), and the handover would reach past the epoch
            time.sleep(0.02)
        spares = {t.ident for t in threading.enumerate() if t.name == "adlrec-loader-start"}
        assert len(spares) == resizable.SPARE_STARTERS  # started with the epoch's workers
        loader.resize(2)
        grown = loader._pools.live[-1]
        assert grown.workers == 1 and grown.starter is not None and grown.starter.ident in spares
        seen += list(it)
    assert torch.cat(seen).flatten().tolist() == [i * i for i in range(400)]
    assert not any(t.name in ("adlrec-loader-start", "adlrec-loader-reaper") for t in threading.enumerate())


@pytest.mark.filterwarnings("ignore:.*DataLoader workers on the.*:UserWarning")
def test_a_spare_a_resize_takes_is_replaced_so_that_later_grows_start_in_spares_too():
    loader = ResizableLoader(Squares(), 4, num_workers=1, multiprocessing_context="fork", handover=0)
    with loader:
        it = iter(loader)
        seen = [next(it) for _ in range(3)]
        for grow in (2, 3, 4):  # more grows than spares kept: each takes one, the errand thread starts another
            deadline = time.monotonic() + 30  # only a guard against a hang
            while loader._pools.errands.spare_count() < resizable.SPARE_STARTERS:
                assert time.monotonic() < deadline, "the spare taken by the last resize was not replaced"
                time.sleep(0.005)
            spares = {t.ident for t in threading.enumerate() if t.name == "adlrec-loader-start"}
            loader.resize(grow)
            grown = loader._pools.live[-1]
            assert grown.starter is not None and grown.starter.ident in spares
            seen += [next(it) for _ in range(3)]
        seen += list(it)
    assert torch.cat(seen).flatten().tolist() == [i * i for i in range(400)]


def test_no_spare_thread_waits_for_a_loader_that_starts_its_pools_in_the_loop():
    loader = ResizableLoader(Squares(), 50, num_workers=1, multiprocessing_context="fork", background_start=False)
    with loader:
        it = iter(loader)
        next(it)
        assert not any(t.name == "adlrec-loader-start" for t in threading.enumerate())
        loader.resize(2)
        assert [x for x in it]


def test_an_errand_that_closes_its_errands_does_not_wait_for_itself():
    errands = Errands("test-errands")
    errands.ensure_thread()
    closed = threading.Event()

    def closing() -> None:  # as a loader's finalizer run by a collection in the errand thread would
        errands.close()
        closed.set()

    errands.submit(closing)
    assert closed.wait(10)
    errands.join()
    assert not errands.busy()


def test_an_errand_running_counts_as_busy_until_it_is_done():
    """A running errand (taken off the queue) is work under way: the loader asks ``busy()`` before it stops a
    zygote that a pool still shutting down in that errand may use."""
    errands = Errands("test-errands")
    errands.ensure_thread()
    started, release = threading.Event(), threading.Event()

    def holding() -> None:
        started.set()
        release.wait()

    errands.submit(holding)
    assert started.wait(10)  # off the queue, running
    assert errands.busy()
    release.set()
    errands.join()
    assert not errands.busy()
    errands.close()


@pytest.mark.parametrize("call", ["join", "close"])
def test_join_and_close_wait_for_errands_that_got_a_thread_of_their_own(call):
    errands = Errands("test-errands")  # no errand thread: each errand gets a thread of its own
    started, release, done = threading.Event(), threading.Event(), threading.Event()

    def holding() -> None:
        started.set()
        release.wait()
        done.set()

    errands.submit(holding)
    assert started.wait(10)
    threading.Timer(0.1, release.set).start()  # let it finish while join() or close() waits
    getattr(errands, call)()
    assert done.is_set()


def test_an_errand_runs_in_the_callers_thread_when_no_thread_can_start(monkeypatch):
    errands = Errands("test-errands")

    def no_thread(self) -> None:
        raise RuntimeError("can't start new thread")  # CPython's words when out of processes

    monkeypatch.setattr(threading.Thread, "start", no_thread)
    where: list[int] = []
    errands.submit(lambda: where.append(threading.get_ident()))  # rather here than not at all
    assert where == [threading.get_ident()]
    assert not errands.ensure_thread()


def test_a_spare_retired_without_a_job_ends_without_an_error(monkeypatch):
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    spare = Spare("test-spare")
    spare.thread.start()
    spare.retire()  # an epoch's end: the spares nobody used
    spare.thread.join(10)
    assert not spare.thread.is_alive() and errors == []
