"""Starting a resize's workers without forking the training process: a fork server forked from it.

``os.fork`` holds the GIL for the whole call, and its cost grows with the forking process's memory
(page tables): about 7 ms for a process with torch loaded, 40 ms with 1 GB more touched, 100 ms with
4 GB (measured here).  A training process forks each new worker itself, so every worker a resize
adds stalls the training loop's thread for that long (:mod:`adlrec.loader.pacing` spreads the forks
to one per batch, but cannot make them shorter).

A :class:`Zygote` is one fork of the training process, taken at the start of each epoch (or at a
resize, paced like a worker's fork, if the epoch began without one or it died) and idle afterwards.
It forks each worker on request (paced one per batch, as the training process's own forks are), so
the training process only pickles the worker's small arguments and passes its pipes' file
descriptors.  The zygote already
holds the dataset, the ``collate_fn`` and the user's ``worker_init_fn`` (a copy-on-write copy of the
training process as it was when the zygote was forked); they travel as :class:`Kept` references, never
pickled, so they need not be picklable and a large in-memory dataset costs nothing to send.

It is a ``multiprocessing`` start method as far as torch's ``DataLoader`` is concerned
(:class:`ZygoteContext`): its ``Process.start()`` asks the zygote, its queues and locks are the
named ones that ``forkserver`` uses (a fork context's are unlinked at once and cannot be sent), and
its ``Popen`` learns each worker's pid and exit code from the zygote, as ``forkserver``'s does.

Lifetime: the zygote exits when the training process closes its end of a pipe (at :meth:`Zygote.stop`,
or when the training process dies); any other process forked from the training process closes its
copy of that end right after the fork (``os.register_at_fork``), so no worker keeps a zygote alive.
A worker outliving its zygote sees its parent change and exits, as a DataLoader worker does when its
training process dies.
"""

from __future__ import annotations

import array
import errno
import io
import os
import selectors
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from multiprocessing import process, reduction, resource_tracker, util
from multiprocessing.context import BaseContext, set_spawning_popen
from multiprocessing.popen_fork import Popen as ForkPopen
from typing import Any

from adlrec.loader.pacing import FORK_LOCK, ForkPacer, interruptible, sheltered_fork

__all__ = ["Kept", "Zygote", "ZygoteContext", "can_use_zygote"]

_SIGNED = struct.Struct("q")
MAX_FDS = 250  # file descriptors one worker may be passed (its queues' pipes, its gate)

_ALIVE_W: set[int] = set()  # this process's ends of its zygotes' alive pipes: never inherited by a fork
_OBJECTS: dict[int, tuple[Any, ...]] = {}  # zygote token -> the objects its workers get by reference
_INHERITED: list[int] = []  # in a worker the zygote forked: the file descriptors it was passed
_TOKENS = iter(range(1, 1 << 62))


def _close_alive_ends() -> None:
    """After any fork: the child must not hold a zygote's alive pipe open (the zygote would outlive us)."""
    while _ALIVE_W:
        try:
            os.close(_ALIVE_W.pop())
        except OSError:
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_close_alive_ends)


def can_use_zygote() -> bool:
    """Whether this platform can run a zygote: fork, and file descriptors sent over Unix sockets."""
    return hasattr(os, "fork") and hasattr(os, "register_at_fork") and getattr(reduction, "HAVE_SEND_HANDLE", False)


def _kept(token: int, index: int) -> Any:
    """Unpickling a :class:`Kept` in a worker: the zygote's own copy of the object."""
    return _OBJECTS[token][index]


class Kept:
    """An object a zygote already holds; pickled as a reference to it, never by value.

    In the training process it stands in for the object where torch only stores it (the inner
    ``DataLoader``'s dataset and ``collate_fn``, the ``worker_init_fn``), and forwards calls, ``len``
    and indexing to it, should anything there use it.
    """

    __slots__ = ("index", "obj", "token")

    def __init__(self, token: int, index: int, obj: Any) -> None:
        self.token, self.index, self.obj = token, index, obj

    def __reduce__(self) -> tuple[Callable[[int, int], Any], tuple[int, int]]:
        return _kept, (self.token, self.index)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.obj(*args, **kwargs)

    def __len__(self) -> int:
        return len(self.obj)

    def __getitem__(self, key: Any) -> Any:
        return self.obj[key]


def _write_signed(fd: int, n: int) -> None:
    msg = _SIGNED.pack(n)
    while msg:
        msg = msg[os.write(fd, msg) :]


def _read_signed(fd: int) -> int:
    data = b""
    while len(data) < _SIGNED.size:
        chunk = os.read(fd, _SIGNED.size - len(data))
        if not chunk:
            raise EOFError("the zygote closed the status pipe")
        data += chunk
    return int(_SIGNED.unpack(data)[0])


class Zygote:
    """A fork of the training process that forks workers on request; one per loader, started lazily."""

    def __init__(self, objects: Sequence[Any]) -> None:
        self.objects = tuple(objects)
        self.token = next(_TOKENS)
        self.pid: int | None = None
        self._sock: socket.socket | None = None  # requests: one message of file descriptors per worker
        self._alive_w: int | None = None
        self._lock = threading.Lock()
        self._turns = threading.Condition()  # held briefly, never while waiting for a turn
        self._in_turn = False  # a thread has taken (or waits for) a turn to fork it
        self._stopped = False  # stop() is final: a stopped zygote is never forked again

    def kept(self, index: int) -> Kept | None:
        """A reference to ``objects[index]`` for a worker, or ``None`` when that object is ``None``."""
        obj = self.objects[index]
        return None if obj is None else Kept(self.token, index, obj)

    @property
    def running(self) -> bool:
        """Whether it runs; one found dead (killed, say) is reaped and cleaned up, so the next
        :meth:`ensure_running` forks a new one."""
        with self._lock:
            return self._alive()

    def _alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # reaped elsewhere
            pid = self.pid
        if pid == 0:
            return True
        self._release()
        return False

    def _release(self) -> None:
        """Close this process's ends and forget the zygote (already reaped, or about to be)."""
        alive_w, sock = self._alive_w, self._sock
        self.pid = self._sock = self._alive_w = None
        _OBJECTS.pop(self.token, None)
        if alive_w is not None:
            _ALIVE_W.discard(alive_w)
            os.close(alive_w)
        if sock is not None:
            sock.close()

    def ensure_running(self, pacer: ForkPacer | None = None) -> None:
        """Fork the zygote if it is not running: at once, or on a turn of ``pacer``.

        The turn is waited for outside the lock: the loop's thread, which grants it, must be able to ask
        :attr:`running` meanwhile (a second resize before the next batch, a second pool of the same
        resize).  Another thread pacing its fork meanwhile waits for that fork rather than taking a turn
        of its own, which it would then leave unused (that wait counts as the pacer's, not as starting),
        unless its pool no longer waits for turns (``pacer.released()``: it is stopping or switching;
        :meth:`wake` tells the waiters to ask): then it forks the zygote at once, since the thread in
        turn may wait for a batch that never comes.
        """
        if pacer is None:
            self._fork()
            return
        t = time.perf_counter()
        with self._turns:
            self._turns.wait_for(lambda: not self._in_turn or pacer.released())
            pacer.add_waited(time.perf_counter() - t)
            pacer.check_cancelled()  # a pool stopped before it started forks nothing, not even the zygote
            if self.running:
                return
            in_turn = self._in_turn
            self._in_turn = True
        if in_turn:  # released while another thread waits for its turn
            self._fork()
            return
        try:
            pacer.turn()
            self._fork()
        finally:
            with self._turns:
                self._in_turn = False
                self._turns.notify_all()

    def wake(self) -> None:
        """Threads waiting for another's turn to fork the zygote: ask ``released()`` again."""
        with self._turns:
            self._turns.notify_all()

    def _fork(self) -> None:
        """Fork the zygote unless it runs; a stopped one raises (nothing would stop it again)."""
        with self._lock:
            if self._stopped:
                raise RuntimeError("the zygote was stopped; a pool still starting cannot use it")
            if self._alive():
                return
            resource_tracker.ensure_running()  # the named semaphores of the workers' queues register there
            # no other thread's fork may copy these ends before they are closed here; a ^C meanwhile is raised
            # once the zygote is recorded, and its workers inherit SIGINT blocked until they run (pacing.py)
            with FORK_LOCK, sheltered_fork():
                ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                alive_r, alive_w = os.pipe()
                _ALIVE_W.add(alive_w)  # at once: a fork from another thread must not keep it (nor does the zygote)
                _OBJECTS[self.token] = self.objects
                try:
                    pid = os.fork()
                except BaseException:
                    _ALIVE_W.discard(alive_w)
                    _OBJECTS.pop(self.token, None)
                    for fd in (alive_r, alive_w):
                        os.close(fd)
                    ours.close()
                    theirs.close()
                    raise
                if pid == 0:  # the zygote; the fork hook has closed alive_w here
                    code = 1
                    try:
                        ours.close()
                        _serve(theirs, alive_r)
                        code = 0
                    except BaseException:
                        traceback.print_exc()
                    finally:
                        os._exit(code)
                os.close(alive_r)
                theirs.close()
                self.pid, self._sock, self._alive_w = pid, ours, alive_w

    def request(self, fds: Sequence[int]) -> tuple[int, int]:
        """Ask for one worker: returns ``(status_r, data_w)``; write the pickled process object to
        ``data_w``, then read its pid and, once it exits, its exit code from ``status_r``."""
        if len(fds) > MAX_FDS:
            raise ValueError(f"a worker can be passed at most {MAX_FDS} file descriptors, got {len(fds)}")
        with self._lock:
            if self._sock is None:
                raise RuntimeError("the zygote is not running")
            with FORK_LOCK:  # a fork from another thread meanwhile would copy the zygote's ends of the pipes
                parent_r, child_w = os.pipe()
                child_r, parent_w = os.pipe()
                try:
                    reduction.sendfds(self._sock, [child_r, child_w, *fds])
                except BaseException:
                    os.close(parent_r)
                    os.close(parent_w)
                    raise
                finally:
                    os.close(child_r)
                    os.close(child_w)
        return parent_r, parent_w

    STOP_S = 5.0  # how long stop() waits for the zygote to exit before it kills it

    def stop(self) -> None:
        """Let the zygote exit and reap it (idempotent, and final).  Its workers should be stopped first."""
        with self._lock:
            self._stopped = True
            pid = self.pid
            if pid is None:
                return
            self._release()  # closing the alive pipe's end tells it to exit
        end = time.monotonic() + self.STOP_S
        try:
            while os.waitpid(pid, os.WNOHANG)[0] == 0:
                if time.monotonic() > end:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.001)
        except ChildProcessError:  # reaped elsewhere
            pass


def _serve(sock: socket.socket, alive_r: int) -> None:
    """The zygote's loop: fork a worker per request, report its pid and exit code; return when told to."""
    sig_r, sig_w = os.pipe()
    os.set_blocking(sig_r, False)
    os.set_blocking(sig_w, False)
    old = {
        signal.SIGCHLD: signal.signal(signal.SIGCHLD, lambda *_: None),  # wakes the selector below
        signal.SIGINT: signal.signal(signal.SIGINT, signal.SIG_IGN),  # ^C goes to the training process
    }
    signal.set_wakeup_fd(sig_w)
    status: dict[int, int] = {}  # worker pid -> the pipe its exit code goes to
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ)
        selector.register(alive_r, selectors.EVENT_READ)
        selector.register(sig_r, selectors.EVENT_READ)
        while True:
            ready = {key.fileobj for key, _ in selector.select()}
            if alive_r in ready:
                return
            if sig_r in ready:
                try:
                    os.read(sig_r, 65536)
                except BlockingIOError:
                    pass
                _reap(status)
            if sock in ready:
                try:
                    fds = _receive_request(sock)
                except EOFError:
                    return
                if fds is None:  # cut short: a failed start for the requester, and the zygote goes on
                    continue
                child_r, child_w, *inherited = fds
                try:
                    pid = os.fork()
                except OSError:  # out of memory or processes: the requester raises, the zygote goes on
                    traceback.print_exc()
                    for fd in (child_r, *inherited):
                        os.close(fd)
                    try:
                        _write_signed(child_w, -1)
                    except BrokenPipeError:
                        pass
                    os.close(child_w)
                    continue
                if pid == 0:  # a worker
                    code = 1
                    try:
                        signal.set_wakeup_fd(-1)
                        for sig, handler in old.items():
                            signal.signal(sig, handler)
                        selector.close()
                        sock.close()
                        for fd in (alive_r, sig_r, sig_w, child_w, *status.values()):
                            os.close(fd)
                        _INHERITED[:] = inherited
                        code = _run_worker(child_r)
                    except BaseException:
                        traceback.print_exc()
                    finally:
                        sys.stdout.flush()
                        sys.stderr.flush()
                        os._exit(code)
                os.close(child_r)
                for fd in inherited:
                    os.close(fd)
                try:
                    _write_signed(child_w, pid)
                except BrokenPipeError:  # the requester is gone
                    pass
                status[pid] = child_w


def _receive_request(sock: socket.socket) -> list[int] | None:
    """A request's file descriptors (``reduction.sendfds``'s message), or None if the kernel could not pass
    them all: the zygote out of files (MSG_CTRUNC; it closes those it could not pass).  ``recvfds`` raised
    then, which ended the zygote and with it the status pipes of the workers it had forked, so the loop
    took those running workers for dead.  Here the ones received are closed: the requester reads the end
    of its status pipe, a failed start, and the zygote goes on serving."""
    a = array.array("i")
    msg, ancdata, flags, _ = sock.recvmsg(1, socket.CMSG_SPACE(a.itemsize * (MAX_FDS + 2)))
    if not msg and not ancdata:
        raise EOFError
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            a.frombytes(data[: len(data) - len(data) % a.itemsize])
    fds = list(a)
    if flags & socket.MSG_CTRUNC or not msg or len(fds) % 256 != msg[0] or len(fds) < 2:
        for fd in fds:
            os.close(fd)
        return None
    return fds


def _reap(status: dict[int, int]) -> None:
    while True:
        try:
            pid, sts = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        fd = status.pop(pid, None)
        if fd is not None:
            try:
                _write_signed(fd, os.waitstatus_to_exitcode(sts))
            except BrokenPipeError:
                pass
            os.close(fd)


def _run_worker(child_r: int) -> int:
    """In a worker the zygote forked: read the process object (its arguments) and run it."""
    sentinel = os.dup(child_r)  # readable once the training process has closed its end
    with os.fdopen(child_r, "rb", closefd=True) as from_parent:
        current = process.current_process()
        current._inheriting = True  # type: ignore[attr-defined]
        try:
            proc = reduction.pickle.load(from_parent)
        finally:
            del current._inheriting  # type: ignore[attr-defined]
    return int(proc._bootstrap(parent_sentinel=sentinel))


class _DupFd:
    """A file descriptor passed to a worker: its index in what the zygote received."""

    def __init__(self, index: int) -> None:
        self.index = index

    def detach(self) -> int:
        return _INHERITED[self.index]


class _ZygotePopen(ForkPopen):
    """``Process.start()`` through a zygote: pid and exit code come from it over a status pipe."""

    method = "forkserver"
    DupFd = _DupFd

    def __init__(self, process_obj: process.BaseProcess, zygote: Zygote) -> None:
        self._fds: list[int] = []
        self._zygote = zygote
        super().__init__(process_obj)

    def duplicate_for_child(self, fd: int) -> int:
        self._fds.append(fd)
        return len(self._fds) - 1

    def _launch(self, process_obj: process.BaseProcess) -> None:
        buf = io.BytesIO()
        set_spawning_popen(self)
        try:
            reduction.dump(process_obj, buf)
        finally:
            set_spawning_popen(None)
        self.sentinel, data_w = self._zygote.request(self._fds)
        keep_w = os.dup(data_w)  # the worker's sentinel of this process: open while we live
        self.finalizer = util.Finalize(self, util.close_fds, (keep_w, self.sentinel))
        with open(data_w, "wb", closefd=True) as f:
            f.write(buf.getbuffer())
        try:
            pid = _read_signed(self.sentinel)
        except EOFError as exc:  # the zygote died (out of files or memory, the OOM killer): a failed start
            raise ConnectionResetError(errno.ECONNRESET, str(exc)) from None
        if pid < 0:
            raise OSError("the zygote could not fork a worker (see its traceback above)")
        self.pid = pid

    def poll(self, flag: int = os.WNOHANG) -> int | None:
        if self.returncode is None:
            from multiprocessing.connection import wait

            if not wait([self.sentinel], 0 if flag == os.WNOHANG else None):
                return None
            try:
                self.returncode = _read_signed(self.sentinel)
            except (OSError, EOFError):  # the zygote itself is gone
                self.returncode = 255
        return self.returncode


class _ZygoteProcess(process.BaseProcess):
    _start_method = None  # a worker keeps the default context it inherited
    _zygote: Zygote | None = None
    _pace: Callable[[], None] | None = None

    def start(self) -> None:
        if self._pace is not None:
            self._pace()
        super().start()

    def run(self) -> None:
        interruptible(super().run)

    def _Popen(self, process_obj: process.BaseProcess) -> _ZygotePopen:  # noqa: N802 - the stdlib's name
        assert self._zygote is not None
        return _ZygotePopen(process_obj, self._zygote)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.pop("_zygote", None)
        state.pop("_pace", None)
        return state


class ZygoteContext(BaseContext):
    """A ``multiprocessing`` context whose processes the zygote forks.

    With a ``pacer``, the zygote's own fork (if it is not running when the first process is made) and
    each process's start wait for a turn of it (:meth:`Zygote.ensure_running`), so the zygote's forks
    and its workers' start-up are spread one per batch, as the training process's own forks are.
    """

    _name = "forkserver"  # named semaphores: queues and locks made here can be passed to a worker

    def __init__(self, zygote: Zygote, pacer: ForkPacer | None = None) -> None:
        self.zygote = zygote
        self.pacer = pacer

    def get_start_method(self, allow_none: bool = False) -> str:
        return self._name

    def Process(self, *args: Any, **kwargs: Any) -> _ZygoteProcess:  # noqa: N802 - the context API's name
        self.zygote.ensure_running(self.pacer)
        proc = _ZygoteProcess(*args, **kwargs)
        proc._zygote = self.zygote
        proc._pace = self.pacer.turn if self.pacer is not None else None
        return proc
