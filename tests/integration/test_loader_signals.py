"""Ctrl-C, SIGTERM and SIGKILL for a training process iterating a ResizableLoader (real processes).

A terminal's ^C signals the whole foreground process group: the training process, its workers, the zygote.
The user must see one KeyboardInterrupt traceback, the training process's, and no process may be left.
Each script runs in a session of its own (``start_new_session``), so a ^C reaches only its processes, and
a process left behind is one whose session is still the script's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from adlrec.loader import ResizableLoader
from adlrec.loader.zygote import can_use_zygote
from tests.factories import Indices
from tests.integration.test_loader_resize import gone, live_children, wait_until

pytestmark = [
    pytest.mark.skipif(not can_use_zygote(), reason="fork and the zygote"),
    pytest.mark.filterwarnings("ignore:ResizableLoader.*DataLoader workers on the:UserWarning"),  # more than 2 cores
]

SCRIPT = Path(__file__).parent / "scripts" / "ctrl_c.py"
LEFT_S = 3.0  # a worker notices its training process has gone within OWNER_POLL_S (0.5 s); the zygote at once


def in_session(sid: int) -> list[psutil.Process]:
    """The running processes of session ``sid`` (a script's, its descendants keep it)."""
    out = []
    for p in psutil.process_iter():
        try:
            if os.getsid(p.pid) == sid and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p)
        except (OSError, psutil.Error):  # gone meanwhile
            pass
    return out


def left_after(sid: int, seconds: float) -> list[str]:
    """What of session ``sid`` still runs ``seconds`` from now (killed then, so that no test leaves it)."""
    end = time.monotonic() + seconds
    while (left := in_session(sid)) and time.monotonic() < end:
        time.sleep(0.05)
    described = []
    for p in left:
        try:
            described.append(f"{p.pid} {' '.join(p.cmdline())[:80]}")
            p.kill()
        except psutil.Error:
            pass
    return described


def train(mode: str, moment: str, tmp_path: Path, signal_at_resize: int | None = None) -> tuple[int, str, list[str]]:
    """Run the script to its end; ``signal_at_resize``: send it to the training process alone once its
    resize's workers start.  Returns its exit code, its stderr, and the processes left behind."""
    arm = tmp_path / "arm"
    arm.touch()
    trainer = subprocess.Popen(
        [sys.executable, str(SCRIPT), mode, moment, str(arm)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=os.environ | {"PYTHONWARNINGS": "ignore::UserWarning"},  # more workers than cores here
    )
    try:
        if signal_at_resize is not None:
            assert trainer.stdout is not None
            for line in trainer.stdout:
                if line.startswith("resizing"):
                    trainer.send_signal(signal_at_resize)
                    break
        trainer.wait(timeout=60)  # a hang fails here
    finally:
        if trainer.poll() is None:
            os.killpg(trainer.pid, signal.SIGKILL)
        # before reading stderr to its end: a process left behind holds it open
        left = left_after(trainer.pid, LEFT_S)
        _, err = trainer.communicate(timeout=30)
    return trainer.returncode, err, left


def assert_one_keyboard_interrupt(code: int, err: str) -> None:
    """The training process died of its ^C, and stderr holds its traceback alone."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Exception ignored" not in err, err  # a ^C printed in at-fork hooks, and dropped there
    assert err.count("Traceback (most recent call last)") == 1, err
    assert lines[-1].startswith("KeyboardInterrupt"), err
    assert code == -signal.SIGINT, err  # (Python ends a process that KeyboardInterrupt ended by SIGINT)


@pytest.mark.parametrize("mode", ["fork", "zygote"])
@pytest.mark.parametrize("moment", ["resize", "epoch-start", "other-thread", "break", "epoch-end"])
def test_ctrl_c_shows_the_training_process_traceback_alone_and_leaves_no_process(mode, moment, tmp_path):
    """^C as a resize's worker starts (in its at-fork hooks, or reading its arguments from the zygote), as an
    epoch's fork returns in the training process (its main thread running the at-fork hooks; the signal
    taken by that thread or by another), and as a worker exits, stopped when the loop breaks out of the
    epoch (by the iterator's __del__) or at the epoch's end."""
    code, err, left = train(mode, moment, tmp_path)
    assert not (tmp_path / "arm").exists(), "the script sent no ^C"
    assert_one_keyboard_interrupt(code, err)
    assert not left


@pytest.mark.parametrize("mode", ["fork", "zygote"])
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_training_process_killed_while_a_resize_starts_leaves_no_process(mode, sig, tmp_path):
    """A scheduler's SIGTERM, or SIGKILL, to the training process alone: no clean-up of its own runs.

    (stderr is not checked: a worker whose batch the training process was taking when it died may print
    ``multiprocessing``'s resource sharer's ConnectionResetError, torch's and the standard library's doing.)"""
    code, err, left = train(mode, "outside", tmp_path, signal_at_resize=sig)
    assert code == -sig, err
    assert not left


@pytest.fixture
def terminal_sigint():
    """SIGINT handled as a run from a terminal has it (a KeyboardInterrupt), for the test's own process: one
    started in the background by a shell without job control (CI does so) has it ignored, and its workers
    with it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.mark.usefixtures("terminal_sigint")
@pytest.mark.parametrize("zygote_forked_by", ["the epoch", "a resize"])
def test_a_worker_the_zygote_forked_takes_ctrl_c_as_a_forked_worker_does(zygote_forked_by, capfd):
    """A ^C to a worker alone ends it quietly (torch's worker loop), not ignored as the zygote ignores it.

    The zygote is forked by the loop's thread at the epoch's start, or by a resize's starting thread (an
    epoch of 0 workers): SIGINT's handler is put back in its workers either way."""
    before = live_children()
    workers = 1 if zygote_forked_by == "the epoch" else 0
    loader = ResizableLoader(
        Indices(400), 1, num_workers=workers, multiprocessing_context="fork", fork_server=True, handover=2
    )
    it = iter(loader)
    for _ in range(3):
        next(it)
    loader.resize(2)  # the zygote forks the resize's worker(s)
    for _ in range(20):
        next(it)
    zygote = loader._pools.zygote
    assert zygote is not None and zygote.running
    pool = max(loader._pools.live, key=lambda p: p.id)
    assert pool.zygote is zygote and pool.it is not None
    victim = pool.it._workers[0].pid
    assert psutil.Process(victim).ppid() == zygote.pid
    os.kill(victim, signal.SIGINT)
    wait_until(lambda: gone(victim), 10)
    loader.close()
    del it
    assert live_children() <= before
    assert "Traceback" not in capfd.readouterr().err
