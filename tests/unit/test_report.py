"""The profile's table as a user reads it."""

from __future__ import annotations

import dataclasses

from rich.console import Console

from adlrec.profile.report import profile_table
from tests.factories import make_profile


def _text(profile) -> str:
    console = Console(width=200, record=True)
    console.print(profile_table(profile))
    return console.export_text()


def test_a_point_whose_error_could_not_be_estimated_shows_a_dash_not_inf():
    """A point with too few batches for an error (rse inf) read 'inf% !' (helper-44's review)."""
    profile = make_profile()
    first = dataclasses.replace(profile.points[0], rse=float("inf"), stable=False)
    text = _text(dataclasses.replace(profile, points=(first, *profile.points[1:])))
    assert "inf" not in text
    row = next(line for line in text.splitlines() if line.strip("│ ").startswith("0 "))
    assert "- !" in row
    assert "1.0%" in _text(profile)  # a finite error as before
