"""What a profile's run holds in MLflow, figure by figure: each under its own name, with its own value.

The other tests check that a run is complete and read back; here every tag, param and metric is checked
against the profile it came from, so one logged under another's name (or value) is found."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from adlrec.tracking import _POINT_METRICS, COMPLETE_TAG, LIVE_EXPERIMENT, LiveRuns, Tracker
from tests.factories import make_profile


@pytest.fixture
def tracker(tmp_path):
    return Tracker(f"sqlite:///{tmp_path / 'm.db'}", "labels", artifact_root=tmp_path / "artifacts")


def _distinct_profile():
    """A profile whose figures all differ, so a figure logged under another's name shows: best is 2 workers,
    the fewest reaching 95% of it 1 worker, and each point's measurements unlike each other's."""
    profile = make_profile(throughputs=(10.0, 19.5, 20.0), params={"batch_size": 8, "crop": 224})
    points = tuple(
        replace(
            p,
            rse=0.011 + w,
            stall_fraction=0.12 + w,
            prep_share=0.13 + w,
            fetch_share=0.14 + w,
            wait_fraction=0.15 + w,
            prep_rate=16.0 + w,
            cpu_util=0.17 + w,
            worker_uss_mb=18.0 + w,
            worker_pss_mb=19.0 + w,
            main_rss_mb=20.5 + w,
        )
        for w, p in enumerate(profile.points)
    )
    baseline = replace(profile.baseline, ceiling_end=24.0, ceiling_end_rse=0.02)
    command = "adlrec profile w.py --param notes=" + "n" * 6000  # a tag keeps its first 5000 characters
    return replace(profile, points=points, baseline=baseline, budget_s=1.5, rse_target=0.04, command=command)


def test_a_profile_run_holds_each_figure_under_its_own_name(tracker):
    profile = _distinct_profile()
    run_id = tracker.log_profile(profile)
    run = tracker.client.get_run(run_id)
    assert (run.info.status, run.info.experiment_id) == ("FINISHED", tracker.experiment_id(create=False))
    assert run.info.run_name.startswith("w-emulate:5-")

    hw = profile.hardware
    tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.") or k == "mlflow.note.content"}
    assert (
        tags
        == {
            "adlrec.kind": "profile",
            "adlrec.workload": "w",
            "adlrec.model_hash": "abc",
            "adlrec.device": "emulate:5",
            "adlrec.emulated": "true",
            "adlrec.hardware": hw.summary,
            "adlrec.hardware.fingerprint": hw.fingerprint,
            "adlrec.hardware.cpu": "Test CPU",
            "adlrec.hardware.cores": "8",  # logical cores (the test machine has 4 physical)
            "adlrec.hardware.gpus": "H200",
            "adlrec.command": profile.command[:5000],
            "mlflow.note.content": f"w on {profile.device.title}; {hw.summary}; command: `{profile.command}`",
            COMPLETE_TAG: "true",
        }
    )
    assert run.data.params == {
        "param.batch_size": "8",
        "param.crop": "224",
        "batch_size": "8",
        "max_workers": "2",
        "budget_s": "1.5",
        "rse_target": "0.04",
        "device": "emulate:5",
        "fetch_method": "posix_fadvise(DONTNEED) per file",
    }

    b = profile.baseline
    once = {key: value for key, value in run.data.metrics.items() if key not in _POINT_METRICS}
    assert once == pytest.approx(
        {
            "ceiling": 25.0,
            "ceiling_rse": 0.01,
            "inprocess_prep_rate": 12.0,
            "fetch_cold_ms": 0.1,  # seconds per sample, logged as ms
            "fetch_cached_ms": 0.01,
            "fetch_bytes": 4096.0,
            "best_workers": 2,
            "best_throughput": 20.0,
            "enough_workers": 1,
            "ceiling_end": 24.0,
            "ceiling_end_rse": 0.02,
        }
    )
    assert (b.fetch_cold_s, b.fetch_cached_s) == (1e-4, 1e-5)
    for key in _POINT_METRICS:  # one value per worker count, stepped by it
        history = {m.step: m.value for m in tracker.client.get_metric_history(run_id, key)}
        assert history == pytest.approx({p.workers: getattr(p, key) for p in profile.points}), key

    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    assert artifacts.is_relative_to((tracker.artifact_root / "labels").resolve())  # the experiment's own folder
    assert sorted(p.name for p in artifacts.iterdir()) == ["curve.csv", "curve.png", "hardware.json", "profile.json"]
    assert json.loads((artifacts / "hardware.json").read_text()) == json.loads(json.dumps(hw.to_dict()))
    assert (artifacts / "curve.csv").read_text().count("\n") >= len(profile.points)
    (read,) = tracker.profiles()
    assert (read.run_id, read.profile) == (run_id, profile)


def test_every_run_is_read_past_a_page_of_500(tmp_path):
    """MLflow answers a search 500 runs at a time: the 501st run (the oldest) is read too, by the live writer's
    index of running jobs and by a reader of the experiment."""
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    live = LiveRuns(uri, tmp_path / "artifacts")
    for i in range(501):
        live.run_id(f"job-{i}", "n0")
    assert len(LiveRuns(uri, tmp_path / "artifacts").known()) == 501  # a restarted writer finds every job's run
    assert len(Tracker(uri, LIVE_EXPERIMENT).runs(include_incomplete=True)) == 501
