"""A training loop over a ResizableLoader that is interrupted at a chosen moment: `python ctrl_c.py MODE MOMENT ARM`.

MODE: ``fork`` (the training process forks every worker) or ``zygote`` (a zygote forks the resizes' workers).
MOMENT: when ^C (SIGINT to the whole process group, as a terminal sends it) comes.  A real signal, sent from
inside the processes at the exact moment, since one sent from outside rarely lands in a window that short:
- ``resize``: as a resize's first worker starts (fork: in the child's at-fork hooks; zygote: while the
  worker the zygote forked reads its arguments).  The epoch has no workers, so the resize's thread forks
  the zygote, and no batch is being passed from a worker then: a ^C cutting that short can make the
  worker's ``multiprocessing`` resource sharer print a ConnectionResetError (torch's and the standard
  library's doing, not the loader's);
- ``epoch-start``: in the training process's at-fork hooks (main thread), at the epoch's last fork: its
  second pool's worker (3 workers start as pools of 2 and 1), after the zygote's fork with ``zygote``;
- ``other-thread``: the same, at the epoch's first fork, but to the training process alone, and taken by
  another of its threads (the kernel hands a process's signal to any thread not blocking it);
- ``break``: while a worker exits (in ``multiprocessing``'s exit functions), stopped as the loop breaks out
  of the epoch (its iterator's ``__del__``); the script goes on for a while, as training would;
- ``epoch-end``: the same, stopped at the epoch's end;
- ``outside``: never here; the script prints ``resizing`` while a resize's workers start, for the test to
  send a signal then.
ARM: a file that exists until the first process to fire ^C removes it (so exactly one ^C is sent).
The script prints ``pid PID`` first.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from multiprocessing import util

from adlrec.loader import ResizableLoader
from adlrec.loader import zygote as zygote_module

MODE, MOMENT, ARM = sys.argv[1:4]
# as a run from a terminal has it: a process started in the background by a shell without job control (CI
# does so) inherits SIGINT ignored, and Python then leaves it ignored
signal.signal(signal.SIGINT, signal.default_int_handler)


def ctrl_c() -> None:
    """^C to the process group, once in all: only the process that removes ARM sends it."""
    try:
        os.unlink(ARM)
    except FileNotFoundError:
        return
    os.killpg(0, signal.SIGINT)


class Slow:
    def __len__(self) -> int:
        return 300

    def __getitem__(self, i: int) -> int:
        time.sleep(0.002)
        return i


def at_exit_of_worker_0(worker_id: int) -> None:
    """worker_init_fn: worker 0 sends ^C as it exits, after its loop (torch's) has ended."""
    if worker_id == 0:
        util.Finalize(None, ctrl_c, exitpriority=0)


if MOMENT == "resize" and MODE == "fork":
    os.register_at_fork(after_in_child=lambda: os.path.exists(ARM + ".armed") and ctrl_c())
if MOMENT == "resize" and MODE == "zygote":
    run_worker = zygote_module._run_worker

    def ctrl_c_first(child_r: int) -> int:
        if os.path.exists(ARM + ".armed"):
            ctrl_c()
        return run_worker(child_r)

    zygote_module._run_worker = ctrl_c_first
FORKS = [0]  # forks in the main thread so far


def ctrl_c_at_the_epochs_last_fork() -> None:
    if threading.current_thread() is threading.main_thread():
        FORKS[0] += 1
        if FORKS[0] == (4 if MODE == "zygote" else 3):
            ctrl_c()


def ctrl_c_to_another_thread() -> None:
    """^C to the training process alone, taken by a thread other than the main one, which runs the handler
    (Python's) at its next check: here, while the at-fork hooks still run."""
    if threading.current_thread() is threading.main_thread() and os.path.exists(ARM):
        os.unlink(ARM)
        other = next(t for t in threading.enumerate() if t is not threading.current_thread() and t.ident)
        signal.pthread_kill(other.ident, signal.SIGINT)
        time.sleep(0.05)


if MOMENT == "epoch-start":
    os.register_at_fork(after_in_parent=ctrl_c_at_the_epochs_last_fork)
if MOMENT == "other-thread":
    os.register_at_fork(after_in_parent=ctrl_c_to_another_thread)

loader = ResizableLoader(
    Slow(),
    1,
    num_workers={"epoch-start": 3, "resize": 0}.get(MOMENT, 1),
    multiprocessing_context="fork",
    fork_server=MODE == "zygote",
    worker_init_fn=at_exit_of_worker_0 if MOMENT in ("break", "epoch-end") else None,
    handover=2,
)
print("pid", os.getpid(), flush=True)
for i, _ in enumerate(loader):
    if i == 5 and MOMENT in ("resize", "outside"):
        open(ARM + ".armed", "w").close()
        loader.resize(3)
        print("resizing", flush=True)
    if i == 40 and MOMENT == "break":
        break
    time.sleep(0.002)
time.sleep(1.0)  # what comes after the loop: validation, a checkpoint, the next epoch
loader.close()
print("done", flush=True)
