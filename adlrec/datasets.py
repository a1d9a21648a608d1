"""Helpers for jobs that generate their data on first use (the bundled examples use them)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["materialize"]


def materialize(folder: Path, generate: Callable[[Path], None]) -> Path:
    """Return ``folder``, creating it first with ``generate(tmp)`` if it does not exist.

    ``generate`` fills a temporary folder beside ``folder``, which is then renamed into place: the
    rename is atomic, so a reader never sees a half-written dataset, and when several processes
    race, one wins and the others discard their copy and use the winner's.
    """
    folder = Path(folder)
    if folder.is_dir():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        generate(tmp)
        os.chmod(tmp, 0o755)
        os.rename(tmp, folder)  # fails if another process got there first
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if not (isinstance(exc, OSError) and folder.is_dir()):  # a real failure, not a lost race
            raise
    return folder
