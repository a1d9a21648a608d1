"""The service's child processes end when the service dies, SIGKILL included.

A SIGKILL runs none of the service's shutdown, so nothing stops its children (the live-metrics writer,
the recompute process, spawned by :mod:`multiprocessing`): they lived on as orphans, reparented to
init, holding their memory and MLflow's store.  Each child calls :func:`watch_parent` as it starts: a
daemon thread that polls ``os.getppid()`` and, once it is no longer the service's pid, logs one line
and ends the child, at once or, with ``on_orphan``, after letting it stop by itself for at most
``grace_s``.  The service's pid comes from the service (an argument of the child), not from the child's
first ``getppid()``, so a service that died before the thread started is seen too.

Not ``prctl(PR_SET_PDEATHSIG)``: Linux sends that signal when the *thread* that started the child ends,
and the service starts and restarts its children from worker threads (the write-behind thread, a
recompute's thread, anyio's request threads, which end after 10 s idle) that may end while it lives.
Polling works on any POSIX system; on Windows ``getppid()`` does not change, and this does nothing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator

__all__ = ["EXIT_ORPHANED", "POLL_S", "children_ignore_interrupts", "ignore_interrupts", "init_child", "watch_parent"]

log = logging.getLogger("adlrec.service")

POLL_S = 0.5  # how often a child looks for its parent: it notices the death within about this
EXIT_ORPHANED = 3  # the exit code of a child ended because the service is gone (nobody reads it but tests)


def ignore_interrupts() -> None:
    """In a child, first thing: ignore SIGINT and SIGTERM.  A terminal's Ctrl-C goes to the whole foreground
    process group, and so does a stop by systemd (its default kills the service's whole control group) or
    ``timeout``: each child took it as its own, died (after a KeyboardInterrupt traceback, for a Ctrl-C),
    the writer without writing the samples it held, while the service shut down and would have stopped it
    in order.  The service stops its children itself (SIGKILL if one hangs); without it, :func:`watch_parent`
    ends them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@contextlib.contextmanager
def children_ignore_interrupts() -> Iterator[None]:
    """Around starting children on the main thread: SIGINT ignored, which a spawned child inherits through
    exec and, as Python leaves an ignored SIGINT ignored, keeps from its first instruction; its own
    :func:`ignore_interrupts` comes only after its interpreter and imports have started.  Elsewhere (a thread
    that restarts a dead child) signal handlers cannot be set, and this does nothing; nor when the current
    handler was not set from Python, as it could not be put back."""
    old = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or old is None:
        yield
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def init_child(parent_pid: int, what: str, nice: int = 0) -> None:
    """A child's start (a ``ProcessPoolExecutor``'s initializer): ignore a Ctrl-C, exit once the service
    (``parent_pid``) is gone, even killed by SIGKILL, then run ``nice`` steps lower."""
    ignore_interrupts()
    watch_parent(parent_pid, what)  # before the nice: the watcher keeps its priority
    if nice:
        try:
            os.nice(nice)
        except OSError:  # not allowed here: it runs at the service's priority
            log.warning("could not lower %s's CPU priority", what, exc_info=True)


def watch_parent(
    parent_pid: int,
    what: str,
    on_orphan: Callable[[], None] | None = None,
    grace_s: float = 5.0,
    poll_s: float = POLL_S,
) -> threading.Thread:
    """Start the daemon thread that ends this process once ``parent_pid`` is no longer its parent.

    Without ``on_orphan`` it exits at once (``os._exit``: nothing of the dead service's work is worth
    finishing).  With it, it calls ``on_orphan`` (which should make the process stop by itself) and
    exits after ``grace_s`` if the process still runs then."""
    thread = threading.Thread(
        target=_watch, args=(parent_pid, what, on_orphan, grace_s, poll_s), name="adlrec-parent-watch", daemon=True
    )
    thread.start()
    return thread


def _watch(parent_pid: int, what: str, on_orphan: Callable[[], None] | None, grace_s: float, poll_s: float) -> None:
    while os.getppid() == parent_pid:
        time.sleep(poll_s)
    if on_orphan is None:
        log.warning("%s (pid %d): the service (pid %d) is gone; exiting", what, os.getpid(), parent_pid)
        os._exit(EXIT_ORPHANED)
    log.warning(
        "%s (pid %d): the service (pid %d) is gone; stopping (at most %.0f s)", what, os.getpid(), parent_pid, grace_s
    )
    try:
        on_orphan()
    except Exception:
        log.exception("%s: stopping after the service's death failed; exiting", what)
        os._exit(EXIT_ORPHANED)
    time.sleep(grace_s)
    log.warning("%s (pid %d) did not stop within %.0f s; exiting", what, os.getpid(), grace_s)
    os._exit(EXIT_ORPHANED)
