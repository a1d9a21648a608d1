"""Forking a new pool's workers one at a time, when the training loop lets it.

``os.fork`` holds the GIL for the whole fork, and forking a process with torch loaded takes
milliseconds to tens of milliseconds (page tables in proportion to its memory).  Torch's
``_MultiProcessingDataLoaderIter.__init__`` forks all its workers in one loop, so even a pool
started from a thread stops the training loop's thread for ``workers x fork``.  A
:class:`PacedForkContext` is a fork context whose processes wait for a permit in ``start()``; the
loop grants one per batch it takes, so each batch is held up by at most one fork.  Only ``fork``
is paced: its ``Process`` objects are never pickled, and with spawn or forkserver the parent's
side of a start is cheap (the cost is in the child).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.context import BaseContext
from typing import Any

__all__ = ["FORK_LOCK", "ForkPacer", "StartCancelled", "deferred_sigint", "interruptible", "paced", "sheltered_fork"]


class StartCancelled(Exception):
    """Raised in a pool's starting thread at its next fork once the pool was stopped before it started:
    its workers would be forked only to be stopped."""


class ForkPacer:
    """Permits to fork, granted by the loop's thread and taken by the threads starting pools.

    Pools started by one resize share a pacer, so that all their forks together come one per batch:
    :meth:`allow_at` grants one permit per loop position, however many pools ask at that position, and
    :meth:`release` lets one pool's starting thread go on without permits (its pool switches or stops)
    while the others stay paced.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._allowed = 0
        self._started = 0
        self._position: int | None = None  # the loop position the last allow_at granted at
        self._waited: dict[int, float] = {}  # per starting thread: time spent waiting for permits
        self._released: set[int | None] = set()  # starting threads whose starts need no permit
        self._cancelled: set[int | None] = set()  # starting threads whose pools stopped: they fork no more

    @property
    def started(self) -> int:
        """Permits taken: processes started or starting."""
        return self._started

    @property
    def waited_s(self) -> float:
        """Time the calling thread has spent waiting for permits (not starting anything)."""
        with self._cond:
            return self._waited.get(threading.get_ident(), 0.0)

    def allow_at(self, position: int) -> None:
        """One permit for loop position ``position``, unless one was granted there already."""
        with self._cond:
            if self._position is not None and position <= self._position:
                return
            self._position = position
            self._allowed += 1
            self._cond.notify_all()

    def release(self, thread: threading.Thread) -> None:
        """From now on ``thread`` starts its processes without permits (they count in no one's turns)."""
        with self._cond:
            self._released.add(thread.ident)
            self._cond.notify_all()

    def cancel(self, thread: threading.Thread) -> None:
        """``thread``'s pool was stopped before it started: its next turn raises :class:`StartCancelled`."""
        with self._cond:
            self._cancelled.add(thread.ident)
            self._released.add(thread.ident)  # what waits for a released thread (the zygote's turn) goes on
            self._cond.notify_all()

    def check_cancelled(self) -> None:
        """Raise :class:`StartCancelled` in a starting thread whose pool was stopped."""
        with self._cond:
            if threading.get_ident() in self._cancelled:
                raise StartCancelled("the pool was stopped before its workers started")

    def add_waited(self, seconds: float) -> None:
        """Count ``seconds`` the calling thread spent waiting elsewhere for its start (another pool's
        fork of the zygote) as waiting, not starting."""
        with self._cond:
            me = threading.get_ident()
            self._waited[me] = self._waited.get(me, 0.0) + seconds

    def released(self) -> bool:
        """Whether the calling thread starts its processes without permits (:meth:`release`)."""
        with self._cond:
            return threading.get_ident() in self._released

    def turn(self) -> None:
        """Block until a permit is free, then take it."""
        t = time.perf_counter()
        me = threading.get_ident()
        with self._cond:
            self._cond.wait_for(lambda: me in self._released or self._started < self._allowed)
            if me in self._cancelled:
                raise StartCancelled("the pool was stopped before its workers started")
            if me not in self._released:
                self._started += 1
            self._waited[me] = self._waited.get(me, 0.0) + time.perf_counter() - t


try:  # POSIX only
    from multiprocessing import util
    from multiprocessing.context import ForkContext, ForkProcess
    from multiprocessing.popen_fork import Popen as ForkPopen
except ImportError:  # pragma: no cover - Windows has no fork
    ForkContext = ForkProcess = ForkPopen = None  # type: ignore[assignment,misc]


# One fork of the loader's at a time, whichever thread makes it.  A start makes the worker's pipes, forks,
# and closes the child's ends in the parent; a fork from another thread in between would give its worker
# a copy of those ends, and multiprocessing sees a worker exit when its sentinel pipe's write end closes:
# that exit would go unseen until the other worker exits too (torch's shutdown then waits out its 5 s
# join timeout).  Pools start at once in threads when a resize comes while an earlier one's pool still
# starts, when one resize opens several pools, and beside the loop's own at an epoch's start.  The zygote
# takes it too, for its own fork and the pipes of each request (:mod:`adlrec.loader.zygote`).
FORK_LOCK = threading.Lock()


def _unlock_in_child() -> None:
    """A child starts with the lock as its parent held it, by a thread the child does not have."""
    if FORK_LOCK.locked():
        FORK_LOCK.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_unlock_in_child)

_SIGINT = {signal.SIGINT}
# What the forking thread had before sheltered_fork (copied into the child by the fork): whether it blocked
# SIGINT itself, and the main thread's handler (None where the fork was not in the main thread).
_before_fork: tuple[bool, Any] = (False, None)


@contextlib.contextmanager
def deferred_sigint() -> Iterator[list[int]]:
    """In the main thread, which runs Python's signal handlers: while the block runs, SIGINT's handler only
    notes a ^C in the list yielded (elsewhere, or under a handler installed from C, which reads as None and
    could not be put back, nothing changes).  The caller delivers it afterwards, where raising is safe."""
    deferred: list[int] = []
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is None:
        yield deferred
        return
    old = signal.signal(signal.SIGINT, lambda signum, _frame: deferred.append(signum))
    try:
        yield deferred
    finally:
        signal.signal(signal.SIGINT, old)


@contextlib.contextmanager
def sheltered_fork() -> Iterator[None]:
    """Around a fork of the loader's (a worker, the zygote): a ^C (SIGINT to the whole process group) at that
    moment is neither lost in the training process nor seen by the child before it can take it quietly.

    In the child: SIGINT stays blocked (the signal mask is inherited), so one arriving while the child runs
    the at-fork hooks or reads its arguments is only pending; :func:`interruptible` takes it inside the
    worker's run, which ends quietly.  Before, the child raised KeyboardInterrupt there, outside torch's
    worker loop, and printed a traceback beside the training process's.
    In the parent's main thread: ^C while the at-fork hooks run (logging's, say) raised KeyboardInterrupt
    inside a hook, where Python prints it as "Exception ignored" and drops it: the training loop went on
    without its ^C (its workers, which got it too, had exited).  Here it is raised once the fork is done.
    """
    global _before_fork
    handler = signal.getsignal(signal.SIGINT) if threading.current_thread() is threading.main_thread() else None
    with deferred_sigint() as deferred:  # (the child gets the handler noting a ^C: it puts back ``handler``)
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
        _before_fork = (signal.SIGINT in mask, handler)
        try:
            yield  # (a child leaves with os._exit, never through here)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if deferred:
        signal.raise_signal(signal.SIGINT)  # the real handler's turn: KeyboardInterrupt, as usual


def interruptible(run: Callable[[], None]) -> None:
    """In a worker forked under :func:`sheltered_fork` (by this process or by a zygote forked so): ``run()``
    with the training process's SIGINT handler and mask, a ^C ending it quietly (torch's worker loop does the
    same inside it: the training process raises KeyboardInterrupt, and a traceback per worker would bury
    it).  Afterwards SIGINT is ignored: a ^C while the worker exits (``multiprocessing``'s exit functions)
    printed a traceback too."""
    blocked, handler = _before_fork
    try:
        try:
            if handler is not None:  # not sheltered_fork's, which only notes a ^C
                signal.signal(signal.SIGINT, handler)
            if not blocked:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)  # one pending since the fork is raised here
            run()
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    except KeyboardInterrupt:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # if one came before the line above changed it


if ForkContext is not None:

    class ClosingForkPopen(ForkPopen):  # type: ignore[misc,valid-type]
        """The standard library's fork ``Popen``, which leaves its four pipe ends open when ``os.fork``
        fails (EAGAIN, ENOMEM): the loader goes on after such a failure and tries again, so each would
        leak them.  The same steps as CPython's ``_launch`` (3.8 to 3.13), closing them on a failure."""

        def _launch(self, process_obj: object) -> None:
            code = 1
            parent_r, child_w = os.pipe()
            child_r, parent_w = os.pipe()
            try:
                self.pid = os.fork()
            except BaseException:
                for fd in (parent_r, child_w, child_r, parent_w):
                    os.close(fd)
                raise
            if self.pid == 0:
                try:
                    os.close(parent_r)
                    os.close(parent_w)
                    code = process_obj._bootstrap(parent_sentinel=child_r)  # type: ignore[attr-defined]
                finally:
                    os._exit(code)
            else:
                os.close(child_w)
                os.close(child_r)
                self.finalizer = util.Finalize(self, util.close_fds, (parent_r, parent_w))
                self.sentinel = parent_r

    class PacedForkProcess(ForkProcess):  # type: ignore[misc,valid-type]
        pacer: ForkPacer | None = None

        @staticmethod
        def _Popen(process_obj: object) -> ClosingForkPopen:  # noqa: N802 - the process API's name
            return ClosingForkPopen(process_obj)

        def start(self) -> None:
            if self.pacer is not None:
                self.pacer.turn()
            with FORK_LOCK, sheltered_fork():  # a ^C now: raised once started, and the worker stays quiet
                super().start()

        def run(self) -> None:
            interruptible(super().run)

    class PacedForkContext(ForkContext):  # type: ignore[misc,valid-type]
        """The fork context, with every process started under :data:`FORK_LOCK` and, given a ``pacer``,
        only on a permit from it."""

        def __init__(self, pacer: ForkPacer | None) -> None:
            self.pacer = pacer

        def Process(self, *args: object, **kwargs: object) -> PacedForkProcess:  # noqa: N802 - the context API's name
            proc = PacedForkProcess(*args, **kwargs)  # type: ignore[arg-type]
            proc.pacer = self.pacer
            return proc


def paced(context: BaseContext, pacer: ForkPacer | None) -> BaseContext | None:
    """``context`` with its forks one at a time (:data:`FORK_LOCK`) and, given ``pacer``, paced by it;
    ``None`` when it does not fork (nothing to pace or guard)."""
    if ForkContext is None or context.get_start_method() != "fork":
        return None
    return PacedForkContext(pacer)
