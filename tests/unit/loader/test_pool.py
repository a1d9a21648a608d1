"""A pool's worker iterator (``PoolIterator``) with real fork workers."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from adlrec.loader.pool import InnerLoader, PoolIterator
from tests.factories import Indices

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the workers start with fork")


def test_a_pipe_reset_by_a_worker_killed_meanwhile_names_that_worker():
    """The race seen in CI: the batch's socket is reset before the worker's exit shows.  Here the
    reset comes first for sure (raised in place of the batch), and the kill a moment later.  Patched
    before the first batch is asked for, as a batch received out of order would be served unasked.
    The name comes from this check, or from torch's SIGCHLD handler when the loop is the main thread."""
    it = iter(InnerLoader(Indices(40), batch_size=2, num_workers=2, multiprocessing_context="fork"))
    try:
        assert isinstance(it, PoolIterator)
        victim = it._workers[0]
        get = it._data_queue.get

        def reset(*args, **kwargs):
            it._data_queue.get = get
            threading.Timer(0.2, os.kill, (victim.pid, signal.SIGKILL)).start()
            raise ConnectionResetError(104, "Connection reset by peer")

        it._data_queue.get = reset
        with pytest.raises(RuntimeError, match=rf"DataLoader worker \(pid.*{victim.pid}"):
            next(it)
    finally:
        it._shutdown_workers()


def test_a_pipe_reset_with_every_worker_alive_is_not_blamed_on_one():
    it = iter(InnerLoader(Indices(40), batch_size=2, num_workers=2, multiprocessing_context="fork"))
    try:

        def reset(*args, **kwargs):
            raise ConnectionResetError(104, "Connection reset by peer")

        it._data_queue.get = reset
        with pytest.raises(ConnectionResetError):
            next(it)
        assert all(w.is_alive() for w in it._workers)
    finally:
        it._shutdown_workers()


def test_the_modules_a_pool_start_imports_are_imported_with_the_loader():
    """A first import inside a resize's start thread, when the process is out of files, failed, and left the
    module half made for the next start thread (an ImportError reached the loop): a fresh interpreter that
    imports the loader has them already."""
    import subprocess
    import sys

    code = "import sys, adlrec.loader; print('multiprocessing.synchronize' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "True"
