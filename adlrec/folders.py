"""Creating the folders adlrec writes its stores and files into, with a user's error when it cannot."""

from __future__ import annotations

from pathlib import Path

from adlrec.errors import UsageError

__all__ = ["ensure_folder"]


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
        raise UsageError(
            f"cannot create {what} {path}: {exc.strerror or exc}; expected a folder adlrec may write to"
            + (f" (set by {set_by})" if set_by else "")
        ) from None
    return path
