"""watch_parent in a throwaway interpreter: a parent already gone when the watch starts (the service
died while its child started) ends the child at once; a child that does not stop by itself within
its grace is ended then."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from adlrec.service.lifeline import EXIT_ORPHANED

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="getppid() does not change on Windows")


def _run(body: str) -> subprocess.CompletedProcess:
    code = "import os, time\nfrom adlrec.service.lifeline import watch_parent\n" + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_a_parent_gone_before_the_watch_starts_ends_the_child_at_once():
    done = _run(
        """
        watch_parent(os.getppid() + 1_000_000, "the test child", poll_s=0.05)  # not its parent: gone already
        time.sleep(30)
        """
    )
    assert done.returncode == EXIT_ORPHANED, done.stderr
    assert "the test child (pid " in done.stderr and "is gone; exiting" in done.stderr


def test_on_orphan_is_called_and_a_child_that_does_not_stop_is_ended_after_its_grace():
    done = _run(
        """
        watch_parent(os.getppid() + 1_000_000, "the test child", on_orphan=lambda: print("asked", flush=True),
                     grace_s=0.3, poll_s=0.05)
        time.sleep(30)  # never stops by itself
        """
    )
    assert done.returncode == EXIT_ORPHANED and done.stdout == "asked\n", done.stderr
    assert "stopping (at most 0 s)" in done.stderr and "did not stop within 0 s; exiting" in done.stderr


def test_an_on_orphan_that_raises_ends_the_child_at_once_not_after_its_grace():
    done = _run(
        """
        def fails():
            raise RuntimeError("cannot stop")
        watch_parent(os.getppid() + 1_000_000, "the test child", on_orphan=fails, grace_s=3600, poll_s=0.05)
        time.sleep(30)  # never stops by itself: a child left to its grace would exit 0 here
        """
    )
    assert done.returncode == EXIT_ORPHANED, done.stderr
    assert "the test child: stopping after the service's death failed; exiting" in done.stderr
    assert "RuntimeError: cannot stop" in done.stderr


def test_a_child_that_stops_by_itself_exits_normally_and_a_living_parent_ends_nothing():
    done = _run(
        """
        import threading
        stop = threading.Event()
        watch_parent(os.getppid() + 1_000_000, "the test child", on_orphan=stop.set, grace_s=30, poll_s=0.05)
        watch_parent(os.getppid(), "the watched child", poll_s=0.05)  # its parent lives: nothing happens
        assert stop.wait(10)
        """
    )
    assert done.returncode == 0, done.stderr
    assert "the watched child" not in done.stderr
