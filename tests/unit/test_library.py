"""Reading one profile file for `adlrec profiles import`: every way a file can be wrong is named."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from adlrec.profile.library import read_profile
from adlrec.schemas import DeviceSpec
from tests.factories import make_profile


def test_reads_what_profile_json_prints_and_what_export_writes(tmp_path):
    p = make_profile()
    for extra in ({"run_id": None, "tracking_uri": None}, {"mlflow_run_id": "a" * 32}):
        f = tmp_path / "p.json"
        f.write_text(json.dumps(p.to_dict() | extra))
        assert read_profile(f) == p


def _doc(**changes):
    return make_profile().to_dict() | changes


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "the file is empty"),
        ("{not json", "not JSON (Expecting property name enclosed in double quotes at line 1)"),
        ("[]", "expected a JSON object holding one profile, got a list"),
        (json.dumps({k: v for k, v in _doc().items() if k != "points"}), "the key 'points' is missing"),
        (json.dumps(_doc(points=[])), "the profile has no points"),
        (json.dumps(_doc(device={"kind": "tpu"})), "device kind 'tpu': expected cpu, cuda or emulate"),
        (json.dumps(_doc(device={"kind": "emulate", "step_ms": 0})), "an emulated device needs step_ms > 0"),
        (json.dumps(_doc(created_at="yesterday")), "created_at 'yesterday': expected an ISO 8601 time"),
        (json.dumps(_doc(budget_s="long")), "not a profile: could not convert string to float"),
    ],
)
def test_a_wrong_file_is_named_with_what_is_wrong(tmp_path, text, message):
    f = tmp_path / "p.json"
    f.write_text(text)
    with pytest.raises(ValueError) as info:
        read_profile(f)
    assert str(info.value).startswith(f"{f}: ") and message in str(info.value)


def test_points_must_be_distinct_worker_counts_with_finite_throughput(tmp_path):
    p = make_profile()
    f = tmp_path / "p.json"
    twice = replace(p, points=(p.points[0], p.points[0]))
    f.write_text(json.dumps(twice.to_dict()))
    with pytest.raises(ValueError, match=r"point workers \[0, 0\]: expected distinct whole numbers >= 0"):
        read_profile(f)
    negative = replace(p, points=(replace(p.points[0], throughput=-1.0),))
    f.write_text(json.dumps(negative.to_dict()))
    with pytest.raises(ValueError, match=r"throughput at workers=\[0\]: expected a finite number >= 0"):
        read_profile(f)


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ValueError, match="cannot read it: No such file or directory"):
        read_profile(tmp_path / "absent.json")


def test_cuda_and_cpu_profiles_read_back(tmp_path):
    for device in (DeviceSpec("cuda"), DeviceSpec("cpu")):
        p = make_profile(device=device)
        f = tmp_path / "p.json"
        f.write_text(json.dumps(p.to_dict()))
        assert read_profile(f) == p
