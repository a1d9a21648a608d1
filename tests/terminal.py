"""Programs started as from a terminal, in a process group of their own, to be sent a terminal's signals."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any


@contextlib.contextmanager
def own_group(argv: Sequence[str], *, stdout: Any = subprocess.PIPE, **popen: Any) -> Iterator[subprocess.Popen]:
    """Run ``argv`` in a new session with SIGINT at its default, as a terminal has it, and kill its whole group
    if it is still running at the end of the block.

    CI runs the suite in the background, where SIGINT is ignored, and a child inherits that (Python then
    installs no KeyboardInterrupt handler): a Ctrl-C test's child went on until the test timed out."""
    proc = subprocess.Popen(
        argv,
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        **popen,
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
