"""Creating the folders adlrec writes its stores and files into, with a user's error when it cannot."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from adlrec.errors import UsageError

__all__ = ["ensure_folder", "undone_on_failure"]


def ensure_folder(path: Path, what: str, set_by: str = "") -> Path:
    """Create ``path`` and its parents unless it is a folder already; return it.

    A path that cannot be a folder (under a file, on a missing or read-only mount, without
    permission) is the user's setting, so it is a :class:`UsageError` naming ``what``, the path and
    the settings it comes from (``set_by``), not a traceback.
    """
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        # mkdir's own word for a file in the way, 'File exists', reads as if the folder were there
        why = "it is a file" if isinstance(exc, FileExistsError) else exc.strerror or exc
        raise UsageError(
            f"cannot create {what} {path}: {why}; expected a folder adlrec may write to"
            + (f" (set by {set_by})" if set_by else "")
        ) from None
    return path


@contextlib.contextmanager
def undone_on_failure(folder: Path) -> Iterator[None]:
    """If the block raises, remove the files and folders it added directly to ``folder``; what was there before stays.

    For a job's ``build_dataset``, which caches the data it generates there: one that fails halfway would leave
    a partial file that the next run takes for complete.  ``folder`` is locked (``flock``) for the block, so
    another adlrec process building data there at the same time waits, rather than having its new files taken
    for this block's.  A ``folder`` that is not there is not watched.
    """
    fd: int | None = None
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    if fd is None:
        yield
        return
    try:
        _lock(fd, folder)
        before = set(os.listdir(folder))
        try:
            yield
        except BaseException:
            with contextlib.suppress(OSError):
                for name in set(os.listdir(folder)) - before:
                    _remove(Path(folder) / name)
            raise
    finally:
        os.close(fd)  # and with it the lock


def _lock(fd: int, folder: Path) -> None:
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"adlrec: waiting for another process that is generating data in {folder}", file=sys.stderr)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:  # a file system without flock on folders (some NFS): unlocked, as before
        pass


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
