"""Which of several measurements of one curve is the newest (export and model fit agree on it)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from adlrec.profile.library import measured_at, newest_per_key
from tests.factories import make_profile


def test_the_newest_measured_wins_whatever_the_order_and_a_time_without_a_zone_is_utc():
    early = replace(make_profile(throughputs=(1.0, 2.0)), created_at="2026-12-04T16:26:16")  # no zone: UTC
    late = replace(make_profile(throughputs=(3.0, 4.0)), created_at="2026-12-04T17:46:45+01:00")  # 16:46:45 UTC
    other = make_profile(workload="other")
    for order in ([early, late, other], [late, other, early]):
        newest = newest_per_key(order, lambda p: p)
        assert sorted(newest.values(), key=lambda p: p.workload) == [other, late]
    assert measured_at(early) < measured_at(late)


def test_of_two_measured_at_the_same_time_the_first_wins():
    a, b = make_profile(throughputs=(1.0, 2.0)), make_profile(throughputs=(3.0, 4.0))
    assert list(newest_per_key([a, b], lambda p: p).values()) == [a]
    assert list(newest_per_key([b, a], lambda p: p).values()) == [b]


def test_a_time_in_z_form_is_the_same_utc_time():
    a = replace(make_profile(), created_at="2026-12-04T16:46:45Z")
    b = replace(make_profile(), created_at="2026-12-04T16:46:45+00:00")
    assert measured_at(a) == measured_at(b)


def test_a_json_file_that_is_not_a_profile_is_named_or_skipped(tmp_path):
    import json

    from adlrec.profile.library import load_profiles

    p = make_profile()
    (tmp_path / "a.json").write_text(json.dumps(p.to_dict()))
    (tmp_path / "notes.json").write_text('{"name": "my notes"}')
    with pytest.raises(ValueError, match=f"^{tmp_path / 'notes.json'}: not a profile: the key 'device' is missing$"):
        load_profiles(tmp_path)
    skipped: list[str] = []
    assert load_profiles(tmp_path, skipped) == [p]
    assert skipped == [f"{tmp_path / 'notes.json'}: not a profile: the key 'device' is missing"]
