"""Errors a user can cause, each carrying one line that says what was wrong and what was expected.

The CLI prints ``str(error)`` on one line and exits with code 2; it never shows a traceback for
these.  Anything else that escapes is a bug in adlrec and keeps its traceback.
"""

from __future__ import annotations


def first_line(exc: BaseException, empty: str = "") -> str:
    """The first line of what ``exc`` says, or ``empty`` when it says nothing: for one-line errors and logs."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else empty


class AdlrecError(Exception):
    """Base class for mistakes in the user's input (files, options, settings)."""

    exit_code = 2


class JobContractError(AdlrecError):
    """A ``model.py`` is missing, does not import, or does not satisfy the job contract."""


class UsageError(AdlrecError):
    """A command-line option or setting has a value adlrec cannot use."""


class TrackingError(AdlrecError):
    """The tracking store could not be read or written (not the user's input: exit code 1)."""

    exit_code = 1
