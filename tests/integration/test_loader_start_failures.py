"""A pool the system cannot start (out of files, processes or memory) never reaches the training loop.

The shortage is real: the process's open-file limit is lowered to the files it holds, so the next pipe a
new pool needs fails with EMFILE, exactly as on a machine out of file descriptors.  The loader must go on
with the workers it has, lose and repeat no sample, and leave no worker behind.
"""

from __future__ import annotations

import logging
import os
import resource
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from adlrec.loader import ResizableLoader
from tests.factories import Indices
from tests.integration.test_loader_resize import live_children, wait_until

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc/self/fd"), reason="Linux, fork")


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
            got += [next(it) for _ in range(12)]
        got += list(it)
        assert flat(got) == list(range(40))
        assert ld.num_workers == 1  # the pool that runs, not the plan it could not run
        assert "could not start 2 DataLoader workers (OSError" in caplog.text and "going on with 1" in caplog.text
        assert len(caplog.records) == 1
        assert flat(ld) == list(range(40))  # the next epoch, at 1 worker
    wait_until(lambda: live_children() <= before)


def test_an_epoch_whose_workers_cannot_start_runs_in_process_and_says_so(caplog):
    before = live_children()
    with loader(workers=4) as ld:  # split into pools of 2, 1 and 1: none can start
        with open_files_left(0), caplog.at_level(logging.WARNING, logger="adlrec.loader"):
            got = list(ld)
        assert flat(got) == list(range(40))
        assert ld.num_workers == 0
        assert "going on with 0" in caplog.text
    wait_until(lambda: live_children() <= before)


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
