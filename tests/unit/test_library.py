"""Which of several measurements of one curve is the newest (export and model fit agree on it)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import pytest

from adlrec.profile.library import export_profiles, file_name, measured_at, newest_per_key, profile_key
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


def test_a_time_without_a_zone_is_utc_whatever_the_local_zone(monkeypatch):
    naive = replace(make_profile(), created_at="2026-12-04T16:46:45")
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # 9 hours ahead: a naive time read as local would be 07:46 UTC
    time.tzset()
    try:
        assert measured_at(naive) == datetime(2026, 12, 4, 16, 46, 45, tzinfo=timezone.utc)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_profiles_are_loaded_in_file_name_order(tmp_path):
    from adlrec.profile.library import load_profiles

    profiles = {name: make_profile(workload=name) for name in ("c", "f", "a", "e", "b", "d")}
    for name, p in profiles.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(p.to_dict()))
    assert [p.workload for p in load_profiles(tmp_path)] == ["a", "b", "c", "d", "e", "f"]


def test_a_time_in_z_form_is_the_same_utc_time():
    a = replace(make_profile(), created_at="2026-12-04T16:46:45Z")
    b = replace(make_profile(), created_at="2026-12-04T16:46:45+00:00")
    assert measured_at(a) == measured_at(b)


def test_a_json_file_that_is_not_a_profile_is_named_or_skipped(tmp_path):
    from adlrec.profile.library import load_profiles

    p = make_profile()
    (tmp_path / "a.json").write_text(json.dumps(p.to_dict()))
    (tmp_path / "notes.json").write_text('{"name": "my notes"}')
    with pytest.raises(ValueError, match=f"^{tmp_path / 'notes.json'}: not a profile: the key 'device' is missing$"):
        load_profiles(tmp_path)
    skipped: list[str] = []
    assert load_profiles(tmp_path, skipped) == [p]
    assert skipped == [f"{tmp_path / 'notes.json'}: not a profile: the key 'device' is missing"]


@dataclass(frozen=True)
class _Run:  # what export_profiles reads of a tracked run
    run_id: str
    profile: object


def test_the_key_tells_apart_batch_sizes_and_hardware_but_not_the_hostname():
    p = make_profile()
    assert profile_key(replace(p, batch_size=16)) != profile_key(p)
    assert profile_key(replace(p, hardware=replace(p.hardware, logical_cores=16))) != profile_key(p)
    assert profile_key(replace(p, hardware=replace(p.hardware, hostname="elsewhere"))) == profile_key(p)


def test_a_file_name_keeps_only_safe_characters():
    p = make_profile(workload="my job/v2")
    assert file_name(p) == f"my_job_v2-emulate5-{profile_key(p)}.json"
    p = make_profile(workload="my job / v2")  # a run of unsafe characters is one underscore
    assert file_name(p) == f"my_job_v2-emulate5-{profile_key(p)}.json"


def test_export_writes_each_run_with_its_id_skips_an_unusable_one_and_indexes_enough_workers(tmp_path):
    # 10, 39, 40 samples/s: the best at 2 workers; 95% of it (38) is reached at 1
    good = make_profile(workload="b", throughputs=(10.0, 39.0, 40.0))
    other = make_profile(workload="a")
    bad = replace(make_profile(workload="c"), batch_size=0)
    skipped: list[str] = []
    written = export_profiles([_Run("r-good", good), _Run("r-bad", bad), _Run("r-other", other)], tmp_path, skipped)
    assert [p.name for p in written] == [file_name(good), file_name(other), "README.md"]
    assert json.loads((tmp_path / file_name(good)).read_text())["mlflow_run_id"] == "r-good"
    assert skipped == ["run r-bad: batch_size >= 1, budget_s > 0 and 0 < rse_target < 1 expected"]
    rows = [line for line in (tmp_path / "README.md").read_text().splitlines() if line.startswith("| ")][
        1:
    ]  # not the header
    assert [row.split(" | ")[1] for row in rows] == ["a", "b"]  # sorted by file name
    best_workers, best, enough = rows[1].split(" | ")[4:7]
    assert (best_workers, best, enough) == ("2", "40.0", "1")
