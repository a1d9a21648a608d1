"""Reading one profile file for `adlrec profiles import`: every way a file can be wrong is named."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from adlrec.job import _MLFLOW_NAME_CHARS
from adlrec.profile.check import read_profile
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


def _nested(section: str, **changes):
    doc = _doc()
    return doc | {section: doc[section] | changes}


def _point(**changes):
    doc = _doc()
    return doc | {"points": [doc["points"][0] | changes, *doc["points"][1:]]}


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "the file is empty"),
        (" \n\t\n", "the file is empty"),
        ("{not json", "not JSON (Expecting property name enclosed in double quotes at line 1)"),
        ("[]", "expected a JSON object holding one profile, got a list"),
        (json.dumps({k: v for k, v in _doc().items() if k != "points"}), "the key 'points' is missing"),
        (json.dumps(_doc(points=[])), "the profile has no points"),
        (json.dumps(_doc(device={"kind": "tpu"})), "device kind 'tpu': expected cpu, cuda or emulate"),
        (
            json.dumps(_doc(device={"kind": "emulate", "step_ms": 0})),
            "an emulated device needs 0 < step_ms <= 86400000",
        ),
        (json.dumps(_doc(created_at="yesterday")), "created_at 'yesterday': expected an ISO 8601 time"),
        (json.dumps(_doc(budget_s="long")), "profile.budget_s: expected a finite number, got a str 'long'"),
        # wrong types that from_dict lets through, each of which broke a later step (key, log, list)
        (json.dumps(_point(throughput="12")), "profile.points[0].throughput: expected a finite number, got a str"),
        (json.dumps(_point(throughput=None)), "profile.points[0].throughput: expected a finite number, got null"),
        (json.dumps(_point(workers=1.0)), "profile.points[0].workers: expected a whole number, got 1.0"),
        (json.dumps(_point(stable=1)), "profile.points[0].stable: expected true or false, got 1"),
        (json.dumps(_nested("hardware", memory_gb="lots")), "profile.hardware.memory_gb: expected a finite number"),
        (json.dumps(_nested("baseline", ceiling="x")), "profile.baseline.ceiling: expected a finite number"),
        (json.dumps(_doc(workload=None)), "profile.workload: expected a string, got null"),
        (json.dumps(_doc(command="  ")), "command is empty; expected a non-empty string"),
        (json.dumps(_doc(notes="abc")), "notes: expected a list, got a str"),
        (json.dumps(_doc(points={"0": {}})), "points: expected a list, got a dict"),
        (json.dumps(_doc(device={"kind": "emulate", "step_ms": True})), "profile.device.step_ms: expected a finite"),
        (json.dumps(_doc(device={"kind": "cuda", "step_ms": 5})), "expected a number of milliseconds for emulate"),
        (json.dumps(_doc(batch_size=-8)), "batch_size >= 1, budget_s > 0 and 0 < rse_target < 1 expected"),
        (json.dumps(_doc(budget_s=float("inf"))), "profile.budget_s: expected a finite number, got inf"),
        (json.dumps(_point(throughput=float("nan"))), "profile.points[0].throughput: expected a finite number"),
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply to be a profile"),
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
    with pytest.raises(ValueError, match=r"points\[0\].throughput \(workers=0\): expected a number > 0 \(samples/s\)"):
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


def test_an_error_that_could_not_be_estimated_is_infinite_and_accepted(tmp_path):
    """A point that ran out of budget with too few batches has rse = inf (steady.py); json writes Infinity."""
    p = make_profile()
    p = replace(p, points=(replace(p.points[0], rse=float("inf"), stable=False), *p.points[1:]))
    f = tmp_path / "p.json"
    f.write_text(json.dumps(p.to_dict()))
    assert read_profile(f) == p
    for bad in (float("nan"), float("-inf"), -0.5):
        f.write_text(json.dumps(_point(rse=bad)))
        with pytest.raises(ValueError, match=r"profile.points\[0\].rse: expected a number >= 0 \(inf: not estimated\)"):
            read_profile(f)


def test_a_file_that_is_not_utf8_or_not_a_file_is_named(tmp_path):
    f = tmp_path / "p.json"
    f.write_bytes(b"\xff\xfe{}")
    with pytest.raises(ValueError, match=f"^{f}: not UTF-8 text"):
        read_profile(f)
    with pytest.raises(ValueError, match=f"^{tmp_path}: cannot read it: Is a directory"):
        read_profile(tmp_path)


@pytest.mark.parametrize(
    "doc, message",
    [
        # a field of another type is refused, not converted (true was stored as batch_size 1, 8.7 as 8)
        (_doc(batch_size=True), "profile.batch_size: expected a whole number, got true"),
        (_doc(batch_size=8.7), "profile.batch_size: expected a whole number, got 8.7"),
        (_doc(batch_size="8"), "profile.batch_size: expected a whole number, got a str '8'"),
        (_doc(batch_size="8" * 41), f"profile.batch_size: expected a whole number, got a str '{'8' * 40}'..."),
        (_doc(budget_s="1.0"), "profile.budget_s: expected a finite number, got a str '1.0'"),
        (_doc(rse_target="0.05"), "profile.rse_target: expected a finite number, got a str '0.05'"),
        # values no sweep produces: model fit divides by a throughput, the index lists "-3 GB RAM"
        (
            _point(throughput=0.0),
            "profile.points[0].throughput (workers=0): expected a number > 0 (samples/s), got 0.0",
        ),
        (_nested("baseline", ceiling=0.0), "profile.baseline.ceiling: expected a number > 0 (samples/s), got 0.0"),
        (_nested("baseline", ceiling=-5.0), "profile.baseline.ceiling: expected a number > 0 (samples/s), got -5.0"),
        (
            _nested("baseline", prep_rate=-1.0),
            "profile.baseline.prep_rate: expected a number > 0 (samples/s), got -1.0",
        ),
        (_nested("baseline", fetch_cold_s=-1e-4), "profile.baseline.fetch_cold_s: expected a number >= 0, got -0.0001"),
        (_nested("hardware", memory_gb=-3.0), "profile.hardware.memory_gb: expected a number >= 0, got -3.0"),
        (
            _point(stall_fraction=7.5),
            "profile.points[0].stall_fraction (workers=0): expected a share in [0, 1], got 7.5",
        ),
        (_point(prep_share=-0.1), "profile.points[0].prep_share (workers=0): expected a share in [0, 1], got -0.1"),
        (
            _doc(params={"batch_size": 8, "lr": float("nan")}),
            "profile.params.lr: expected a finite number (JSON has no NaN or Infinity), got nan",
        ),
        (_point(worker_uss_mb=-1.0), "profile.points[0].worker_uss_mb (workers=0): expected a number >= 0, got -1.0"),
        # a key MLflow refuses, in a file edited by hand: `profiles import` failed in MLflow, every time
        (
            _doc(params={"batch_size": 8, "a+b": 1}),
            "params key 'a+b' cannot be logged to MLflow: a name may only contain " + _MLFLOW_NAME_CHARS,
        ),
        (
            _doc(params={"batch_size": 8, "x/../y": 1}),
            "params key 'x/../y' cannot be logged to MLflow: a name must be a plain path (no empty, '.' or '..' parts, "
            "no trailing '/')",
        ),
        (
            _doc(params={"batch_size": 8, "k" * 300: 1}),
            f"params key {'k' * 40!r}... is 300 characters; MLflow allows at most 244",
        ),
        (
            _doc(device={"kind": "emulate", "step_ms": 1e300}),
            "an emulated device needs 0 < step_ms <= 86400000 (a day), got 1e+300",
        ),
        # at the edge of what a sweep produces
        (_doc(batch_size=0), "batch_size >= 1, budget_s > 0 and 0 < rse_target < 1 expected"),
        (_doc(budget_s=0.0), "batch_size >= 1, budget_s > 0 and 0 < rse_target < 1 expected"),
        (_doc(rse_target=1.0), "batch_size >= 1, budget_s > 0 and 0 < rse_target < 1 expected"),
        (_nested("hardware", logical_cores=0), "hardware logical_cores 0: expected a whole number >= 1"),
        (
            _nested("hardware", gpus=[{"name": "H200", "memory_gb": -1.0}]),
            "profile.hardware.gpus[0].memory_gb: expected a number >= 0, got -1.0",
        ),
        # a ceiling is a rate like the first one: a sweep never measures 0 (docs/profiling.md)
        (
            _nested("baseline", ceiling_end=0.0),
            "profile.baseline.ceiling_end: expected a number > 0 (samples/s), got 0.0",
        ),
    ],
)
def test_a_wrong_type_or_an_impossible_value_is_refused_naming_the_field_and_value(tmp_path, doc, message):
    f = tmp_path / "p.json"
    f.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as info:
        read_profile(f)
    assert str(info.value) == f"{f}: {message}"


def test_an_error_written_as_null_reads_back_as_not_estimated(tmp_path):
    """Strict JSON has no Infinity: an rse that could not be estimated is written as null (json_text)."""
    from adlrec.schemas import json_text

    p = make_profile()
    b = replace(p.baseline, ceiling_rse=float("inf"), ceiling_end=24.0, ceiling_end_rse=float("inf"))
    p = replace(p, baseline=b, points=(replace(p.points[0], rse=float("inf"), stable=False), *p.points[1:]))
    f = tmp_path / "p.json"
    f.write_text(json_text(p.to_dict()))
    assert "Infinity" not in f.read_text() and json.loads(f.read_text())["points"][0]["rse"] is None
    assert read_profile(f) == p


def test_an_emulated_step_of_exactly_a_day_and_a_profile_without_a_ceiling_end_are_accepted(tmp_path):
    f = tmp_path / "p.json"
    day = make_profile(device=DeviceSpec("emulate", 86_400_000.0))
    f.write_text(json.dumps(day.to_dict()))
    assert read_profile(f) == day
    old = make_profile()  # profiles measured before the bookend ceiling have none
    assert old.baseline.ceiling_end is None
    f.write_text(json.dumps(old.to_dict()))
    assert read_profile(f) == old


def test_a_negative_worker_count_is_refused(tmp_path):
    p = make_profile()
    f = tmp_path / "p.json"
    f.write_text(json.dumps(replace(p, points=(replace(p.points[0], workers=-1), *p.points[1:])).to_dict()))
    with pytest.raises(ValueError, match=r"point workers \[-1, 1, 2\]: expected distinct whole numbers >= 0$"):
        read_profile(f)


def test_values_at_the_edges_a_sweep_produces_are_accepted(tmp_path):
    """An error of exactly 0 (identical batch times) and shares of exactly 0 and 1 are in range."""
    p = make_profile()
    edge = replace(p.points[0], rse=0.0, stall_fraction=1.0, prep_share=1.0, fetch_share=0.0, wait_fraction=1.0)
    p = replace(p, points=(edge, *p.points[1:]))
    f = tmp_path / "p.json"
    f.write_text(json.dumps(p.to_dict()))
    assert read_profile(f) == p
