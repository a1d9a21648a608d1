"""`adlrec model fit`'s summary of the profiles it could not train on."""

import pytest

from adlrec.cli.model import _skipped_summary


@pytest.mark.parametrize(
    ("skipped", "summary"),
    [
        ([], ""),
        (["a.json: not a profile"], "skipped 1 profile: a.json: not a profile"),
        (["short", "short", "b", "c"], "skipped 4 profiles: 2 short; b; c"),
        (["short", "b", "short", "c", "d", "e"], "skipped 6 profiles: 2 short; b; c; and 2 other reasons"),
    ],
)
def test_skipped_profiles_are_counted_by_reason_the_commonest_three_named(skipped, summary):
    assert _skipped_summary(skipped) == summary
