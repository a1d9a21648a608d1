"""A pool the system cannot start (out of files, processes or memory) never reaches the training loop.

The shortage is real where it can be: the process's open-file limit is lowered to the files it holds, so
the next pipe a new pool needs fails with EMFILE, exactly as on a machine out of file descriptors.  A fork
that fails at one chosen point (the second worker of a pool: EAGAIN, out of processes) cannot be had from
a limit without root, so there ``os.fork`` raises what the kernel would.  The loader must go on with the
workers it has, lose and repeat no sample, print no traceback and leave no worker or file behind.
"""

from __future__ import annotations

import errno
import gc
import logging
import multiprocessing.queues
import os
import resource
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing import resource_tracker

import pytest

import adlrec.loader.resizable as resizable
from adlrec.loader import ResizableLoader
from tests.factories import Indices
from tests.integration.test_loader_resize import live_children, wait_until

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc/self/fd"), reason="Linux, fork"),
    pytest.mark.filterwarnings("ignore:ResizableLoader.*DataLoader workers on the:UserWarning"),  # 2 cores here
    # torch's half-made iterator printed its __del__'s AttributeError; pytest reports such as this warning
    pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning"),
]


def free_fd(n: int) -> int:
    """The ``n``-th (from 0) file descriptor number not open in this process (``fstat`` opens nothing)."""
    fd = found = 0
    while True:
        try:
            os.fstat(fd)
        except OSError:
            if found == n:
                return fd
            found += 1
        fd += 1


@contextmanager
def open_files_left(n: int) -> Iterator[None]:
    """Allow this process only ``n`` more open files while the block runs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (free_fd(n), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def failing_forks(monkeypatch, *which: int) -> list[int]:
    """Make forks number ``which`` (0: the next one) fail with EAGAIN; returns the count of forks tried."""
    real, tried = os.fork, [0]

    def fork() -> int:
        k, tried[0] = tried[0], tried[0] + 1
        if k in which:
            raise OSError(errno.EAGAIN, "Resource temporarily unavailable")
        return real()

    monkeypatch.setattr(os, "fork", fork)
    return tried


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def loader(n: int = 40, workers: int = 1, **kw) -> ResizableLoader:
    # collate_fn=list: batches of plain ints, which cross the worker pipe without passing file descriptors
    kw = {"multiprocessing_context": "fork", "collate_fn": list, "fork_server": False} | kw
    return ResizableLoader(Indices(n), 2, num_workers=workers, **kw)


def flat(batches) -> list[int]:
    return [i for b in batches for i in b]


@pytest.mark.parametrize(
    "files,background",
    [
        (0, True),  # the new pool's first pipe fails inside resize(): the schedule must not name it after
        (4, True),  # its gates' pipes open, its start (in a thread) fails: found when the loop reaches it
        (4, False),  # started inside resize(), its start fails there
    ],
)
def test_a_grow_the_system_cannot_start_keeps_the_running_pool_and_loses_nothing(files, background, caplog):
    before = live_children()
    with loader(handover=2, background_start=background) as ld:
        it = iter(ld)
        got = [next(it) for _ in range(3)]
        with open_files_left(files), caplog.at_level(logging.WARNING, logger="adlrec.loader"):
            ld.resize(3)  # 1 -> 3: a pool of 2 beside the running one
            serving = []
            for _ in range(12):
                got.append(next(it))
                serving.append(ld.serving_workers)
        got += list(it)
        # the stand-in's share is loaded here, not by 3 workers; only the weave's first batch may say 3: the
        # running pool serves it before the new pool's turn shows that it never started
        assert set(serving) <= {1, 3} and serving.count(3) <= 1, serving
        assert flat(got) == list(range(40))
        assert ld.num_workers == 1  # the pool that runs, not the plan it could not run
        assert "could not start 2 DataLoader workers (OSError" in caplog.text
        assert "going on with 1 (no sample is lost), 3 again at the next epoch's start" in caplog.text
        assert len(caplog.records) == 1
        assert flat(ld) == list(range(40))  # the next epoch starts the 3 asked for, the shortage over
        assert ld.num_workers == 3 and len(caplog.records) == 1
    wait_until(lambda: live_children() <= before)


def test_an_epoch_whose_workers_cannot_start_runs_in_process_and_says_so(caplog):
    before = live_children()
    with loader(workers=4) as ld:  # split into pools of 2, 1 and 1: none can start
        got, serving = [], []
        with open_files_left(0), caplog.at_level(logging.WARNING, logger="adlrec.loader"):
            for batch in ld:
                got.append(batch)
                serving.append(ld.serving_workers)
        assert flat(got) == list(range(40))
        assert ld.num_workers == 0 and set(serving) == {0}  # loaded in-process: no worker served a batch
        assert "going on with 0" in caplog.text
        assert flat(ld) == list(range(40)) and ld.num_workers == 4  # the shortage over: the 4 asked for
        ld.resize(2)  # a count asked for since is what the next epoch starts, not the one that failed
        assert flat(ld) == list(range(40)) and ld.num_workers == 2
    wait_until(lambda: live_children() <= before)


def test_a_lasting_shortage_warns_once_and_logs_each_epochs_retry_at_info(caplog):
    with loader(workers=2, split_pools=False) as ld:
        with open_files_left(0), caplog.at_level(logging.INFO, logger="adlrec.loader"):
            for _ in range(3):  # each epoch retries the 2 asked for, and fails the same way
                assert flat(ld) == list(range(40))
        failed = [r for r in caplog.records if "could not start 2 DataLoader workers" in r.getMessage()]
        assert [r.levelno for r in failed] == [logging.WARNING, logging.INFO, logging.INFO]
        caplog.clear()
        with open_files_left(0), caplog.at_level(logging.INFO, logger="adlrec.loader"):
            ld.resize(1)  # another count: its own shortage is news, so a warning again
            assert flat(ld) == list(range(40))
        assert [r.levelno for r in caplog.records] == [logging.WARNING]
        assert "could not start 1 DataLoader worker " in caplog.text
        assert flat(ld) == list(range(40)) and ld.num_workers == 1  # the shortage over


def test_a_request_the_system_cannot_start_is_applied_by_the_loop_without_an_error(caplog):
    with loader(workers=2, split_pools=False, handover=1) as ld:
        it = iter(ld)
        got = [next(it)]
        with open_files_left(0), caplog.at_level(logging.WARNING, logger="adlrec.loader"):
            ld.request_resize(0)  # to 0 needs no process: it works under the shortage
            got += [next(it) for _ in range(3)]
            ld.request_resize(3)  # from 0 to 3: replacing, and cannot start
            got += [next(it) for _ in range(6)]
        got += list(it)
        assert flat(got) == list(range(40)) and ld.num_workers == 0
        assert "could not start 3 DataLoader workers" in caplog.text


@pytest.mark.parametrize("fork_server", [False, True])
@pytest.mark.parametrize("files", [0, 2, 4, 6, 8, 12, 18, 24])
def test_a_grow_from_0_under_any_shortage_of_files_loses_nothing_and_raises_nothing(files, fork_server):
    # from 0 to 4 (pools of 2, 1 and 1), by forks of this process or of a zygote (which needs files too,
    # and may itself run out of them mid-request): whatever step fails, the loop sees every sample
    before = live_children()
    with loader(workers=0, handover=2, fork_server=fork_server) as ld:
        it = iter(ld)
        got = [next(it) for _ in range(2)]
        with open_files_left(files):
            ld.resize(4)
            got += [next(it) for _ in range(12)]
        got += list(it)
        assert flat(got) == list(range(40))
    wait_until(lambda: live_children() <= before)


def test_a_zygote_that_cannot_fork_at_an_epochs_start_leaves_the_epoch_to_this_process(caplog):
    with loader(workers=2, fork_server=True) as ld:
        with open_files_left(0), caplog.at_level(logging.WARNING, logger="adlrec.loader"):
            assert flat(ld) == list(range(40))
        assert "could not fork the zygote" in caplog.text


def test_a_pool_whose_start_failed_part_way_leaves_no_worker_behind(monkeypatch, caplog):
    # its first worker forks, its second fails; then it is dropped before the loop reaches it
    before = live_children()
    with loader(60, handover=6) as ld:
        it = iter(ld)
        got = [next(it) for _ in range(3)]
        tried = failing_forks(monkeypatch, 1)
        ld.resize(3)  # a pool of 2 beside the running one, forked one per batch
        got += [next(it) for _ in range(2)]  # two turns: the first worker forks, the second fails
        wait_until(
            lambda: tried[0] == 2 and ld._pools.live[-1].starter is None or not ld._pools.live[-1].starter.is_alive()
        )
        ld.resize(1)  # back before the cut: the failed pool is stopped, never reached
        got += list(it)
        assert flat(got) == list(range(60))
    # its started worker stops with it, not when the garbage collector finds the half-made iterator
    wait_until(lambda: live_children() <= before, timeout_s=10)
    gc.collect()


def test_a_pool_stopped_after_some_of_its_forks_stops_the_workers_that_started():
    # the cancel path with one worker forked: torch's half-made iterator must not print from __del__
    before = live_children()
    with loader(60, workers=2, handover=6, split_pools=False) as ld:
        it = iter(ld)
        got = [next(it) for _ in range(3)]
        ld.resize(4)
        got.append(next(it))  # one turn: the new pool forks its first worker
        new = ld._pools.live[-1]
        wait_until(lambda: new.pacer.started == 1)
        ld.resize(2)  # back before the cut: the pool is stopped with one of its two workers forked
        got += list(it)
        assert flat(got) == list(range(60))
    wait_until(lambda: live_children() <= before, timeout_s=10)
    gc.collect()


def _a_grow_that_fails(monkeypatch, caplog, fail, **options) -> str:
    """Resize 1 -> 3 while ``fail()``'s patches are in place: the loop goes on with its one worker and loses
    no sample. Returns what the loader logged."""
    with loader(handover=2, **options) as ld:
        it = iter(ld)
        got = [next(it) for _ in range(3)]
        with caplog.at_level(logging.WARNING, logger="adlrec.loader"):
            fail()
            ld.resize(3)
            got += [next(it) for _ in range(6)]
            monkeypatch.undo()
        got += list(it)
        assert flat(got) == list(range(40)) and ld.num_workers == 1
    return caplog.text


def test_a_start_that_runs_out_of_threads_is_a_start_the_system_cannot_make(monkeypatch, caplog):
    # CPython raises RuntimeError("can't start new thread") when no thread can start (out of processes);
    # torch starts one per worker queue as it hands the pool its first batches, after the forks
    def no_thread(self):
        raise RuntimeError("can't start new thread")

    said = _a_grow_that_fails(
        monkeypatch,
        caplog,
        lambda: monkeypatch.setattr(multiprocessing.queues.Queue, "_start_thread", no_thread),
        background_start=False,
    )
    assert "could not start 2 DataLoader workers (BlockingIOError: [Errno 11] can't start new thread)" in said


def test_a_pools_starting_thread_that_cannot_start_is_a_start_the_system_cannot_make(monkeypatch, caplog):
    monkeypatch.setattr(resizable, "SPARE_STARTERS", 0)  # no thread started ahead: the pool starts its own
    start = threading.Thread.start

    def no_starting_thread(self):
        if self.name == "adlrec-loader-start":
            raise RuntimeError("can't start new thread")
        start(self)

    said = _a_grow_that_fails(
        monkeypatch, caplog, lambda: monkeypatch.setattr(threading.Thread, "start", no_starting_thread)
    )
    assert "could not start 2 DataLoader workers (BlockingIOError: [Errno 11] cannot start the pool's" in said


def test_failed_forks_leave_no_file_open(monkeypatch):
    resource_tracker.ensure_running()  # the zygote's fork starts it, kept for the process's life: not a leak
    fds = open_fds()
    with loader(workers=2, fork_server=True) as ld:
        failing_forks(monkeypatch, *range(100))  # the zygote's fork and every worker's
        assert flat(ld) == list(range(40))
        monkeypatch.undo()
    time.sleep(0.1)
    assert open_fds() == fds


def test_a_zygote_out_of_files_refuses_the_request_it_cannot_receive_whole_and_goes_on():
    """The kernel passes a request's descriptors only while the receiver has files left, and closes the rest
    (MSG_CTRUNC): the zygote closes those it got and goes on (``recvfds`` raised, which ended the zygote and
    made the workers it had forked look dead to the loop)."""
    import socket
    from multiprocessing import reduction

    from adlrec.loader.zygote import _receive_request

    ours, theirs = socket.socketpair()
    pipes = [os.pipe() for _ in range(4)]
    sent = [fd for pair in pipes for fd in pair]
    try:
        before = open_fds()
        reduction.sendfds(ours, sent)
        with open_files_left(3):
            assert _receive_request(theirs) is None
        assert open_fds() == before  # none of the three it got is left open
        reduction.sendfds(ours, sent)
        got = _receive_request(theirs)  # files enough: the whole request
        assert got is not None and len(got) == len(sent)
        for fd in got:
            os.close(fd)
    finally:
        for fd in sent:
            os.close(fd)
        ours.close()
        theirs.close()
