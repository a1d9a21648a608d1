"""Logged profiles read back from a real SQLite MLflow store and exported to a profiles/ folder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adlrec.cli import main
from adlrec.profile.library import load_profiles
from adlrec.schemas import DeviceSpec
from adlrec.tracking import _POINT_METRICS, Tracker
from tests.factories import make_profile


def test_export_writes_newest_per_measurement_with_an_index(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    older = make_profile(throughputs=(1.0, 2.0))
    newer = make_profile(throughputs=(3.0, 4.0))  # same workload, params, device, hardware
    other = make_profile(device=DeviceSpec("cpu"), workload="other-transformer")  # longer than a column was
    for p in (older, newer, other):
        tracker.log_profile(p)

    out = tmp_path / "profiles"
    assert main(["profiles", "export", "--tracking-uri", uri, "--out", str(out)]) == 0
    assert "exported 2 profiles" in capsys.readouterr().out
    files = sorted(f.name for f in out.glob("*.json"))
    assert len(files) == 2
    assert files[0].startswith("other-transformer-cpu-") and files[1].startswith("w-emulate5-")

    loaded = {p.workload: p for p in load_profiles(out)}
    assert loaded["w"] == newer and loaded["other-transformer"] == other
    data = json.loads((out / files[1]).read_text())
    assert data["command"] == "adlrec profile w.py" and data["hardware"]["fingerprint"]
    assert len(data["mlflow_run_id"]) == 32

    index = (out / "README.md").read_text()
    assert "do not edit by hand" in index
    assert "EMULATED accelerator (5 ms/step)" in index and "`adlrec profile other-transformer.py`" in index

    assert main(["profiles", "list", "--tracking-uri", uri]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3
    assert len({line.index(" best ") for line in lines}) == 1, lines  # columns line up, whatever the names


def test_export_from_an_empty_store_is_a_clear_error(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'empty.db'}"
    Tracker(uri, "adlrec-profiles").experiment_id()  # a store with the experiment and no runs
    assert main(["profiles", "export", "--tracking-uri", uri, "--out", str(tmp_path / "p")]) == 2
    assert "no complete profiles to export" in capsys.readouterr().err
    assert not (tmp_path / "p").exists()


def test_a_profile_measured_without_the_store_is_imported_once_and_exported(tiny_job_path, tmp_path, capsys):
    """The GPU-node path: `profile --no-log --json` there, `profiles import` and `export` where the store is."""
    assert (
        main(
            [
                "profile",
                str(tiny_job_path),
                *["--device", "emulate:2", "--budget", "0.4", "--max-workers", "1"],
                *["--no-log", "--json", "--data-dir", str(tmp_path / "node")],
            ]
        )
        == 0
    )
    measured = tmp_path / "tiny.json"
    measured.write_text(capsys.readouterr().out)
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    store = ["--tracking-uri", uri, "--data-dir", str(tmp_path / "data")]

    assert main(["profiles", "import", str(measured), *store]) == 0
    out = capsys.readouterr().out
    assert f"{measured}: logged as run" in out and "imported 1 of 1 profiles" in out
    assert main(["profiles", "import", str(measured), *store]) == 0  # again: already there
    out = capsys.readouterr().out
    assert "already in the store as run" in out and "imported 0 of 1 profiles" in out

    (run,) = Tracker(uri, "adlrec-profiles").profiles()
    original = json.loads(measured.read_text())
    stored = json.loads(json.dumps(run.profile.to_dict()))
    assert stored == {k: v for k, v in original.items() if k not in ("run_id", "tracking_uri")}

    out_dir = tmp_path / "profiles"
    assert main(["profiles", "export", *store, "--out", str(out_dir)]) == 0
    (exported,) = load_profiles(out_dir)
    assert exported == run.profile
    assert exported.command.startswith("adlrec profile ") and "--no-log --json" in exported.command


def test_import_checks_every_file_before_logging_any(tmp_path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(make_profile().to_dict()))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(make_profile().to_dict() | {"points": []}))
    db = tmp_path / "m.db"

    assert main(["profiles", "import", str(good), str(bad), "--tracking-uri", f"sqlite:///{db}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{bad}: the profile has no points" in err and "nothing was imported" in err
    assert not db.exists()  # the store was not even opened


def test_export_keeps_the_newest_measurement_whatever_order_the_runs_were_logged_in(tmp_path, capsys):
    """An import may log an older curve after a newer one: the export goes by when each was measured."""
    from dataclasses import replace

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    newer = replace(make_profile(throughputs=(3.0, 4.0)), created_at="2026-12-04T16:46:45+00:00")
    older = replace(make_profile(throughputs=(1.0, 2.0)), created_at="2026-12-04T16:26:16+00:00")
    tracker.log_profile(newer)
    tracker.log_profile(older)  # logged last, measured first

    out = tmp_path / "profiles"
    assert main(["profiles", "export", "--tracking-uri", uri, "--out", str(out)]) == 0
    assert load_profiles(out) == [newer]


def _strict_json(text: str):
    """JSON as other readers parse it: Infinity and NaN are not JSON."""

    def refuse(constant: str):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_import_refuses_a_wrongly_typed_field_instead_of_converting_it(tmp_path, capsys):
    f = tmp_path / "bs_bool.json"
    f.write_text(json.dumps(make_profile().to_dict() | {"batch_size": True}))
    db = tmp_path / "m.db"
    assert main(["profiles", "import", str(f), "--tracking-uri", f"sqlite:///{db}"]) == 2
    err = capsys.readouterr().err
    assert err == f"adlrec: error: {f}: profile.batch_size: expected a whole number, got true; nothing was imported\n"
    assert not db.exists()


def test_export_into_a_folder_holding_other_json_skips_it_and_what_the_store_cannot_export(tmp_path, capsys):
    """A notes.json in --out, and a zero-throughput run logged before import refused one: each named, no traceback."""
    from dataclasses import replace

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    good = make_profile()
    zero = make_profile(workload="zero")
    zero = replace(zero, points=(zero.points[0], replace(zero.points[1], throughput=0.0), *zero.points[2:]))
    tracker.log_profile(good)
    zero_run = tracker.log_profile(zero)
    out = tmp_path / "profiles"
    out.mkdir()
    notes = out / "notes.json"
    notes.write_text('{"name": "my notes"}')

    assert main(["profiles", "export", "--tracking-uri", uri, "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.err.splitlines() == [
        f"adlrec: warning: skipped run {zero_run}: profile.points[1].throughput (workers=1): expected a number > 0 "
        "(samples/s), got 0.0",
        f"adlrec: warning: skipped {notes}: not a profile: the key 'device' is missing",
    ]
    assert "exported 1 profile to" in captured.out
    assert load_profiles(out, skipped=[]) == [good]
    assert "| w-emulate5-" in (out / "README.md").read_text()
    assert notes.read_text() == '{"name": "my notes"}'


def test_profile_json_and_exported_files_are_strict_json_when_an_error_was_not_estimated(
    tiny_job_path, tmp_path, capsys
):
    """A point measured too briefly has rse = inf: written as null, not Infinity, and read back as inf."""
    sweep = ["--device", "emulate:2", "--budget", "0.2", "--max-workers", "0", "--param", "work=1000000"]
    assert main(["profile", str(tiny_job_path), *sweep, "--no-log", "--json", "--data-dir", str(tmp_path / "d")]) == 0
    measured = tmp_path / "slow.json"
    measured.write_text(capsys.readouterr().out)
    assert _strict_json(measured.read_text())["points"][0]["rse"] is None

    store = ["--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", "--data-dir", str(tmp_path / "data")]
    assert main(["profiles", "import", str(measured), *store]) == 0
    out = tmp_path / "profiles"
    assert main(["profiles", "export", *store, "--out", str(out)]) == 0
    (exported,) = out.glob("*.json")
    assert _strict_json(exported.read_text())["points"][0]["rse"] is None
    (profile,) = load_profiles(out)
    assert profile.points[0].rse == float("inf") and not profile.points[0].stable


def test_reading_a_data_dir_with_no_store_says_so_and_creates_none(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    typo = tmp_path / "adlrc"  # a mistyped --data-dir: it was an empty new store, "no complete profiles"
    for argv in (["profiles", "list"], ["profiles", "export", "--out", str(tmp_path / "p")]):
        assert main([*argv, "--data-dir", str(typo)]) == 2
        assert capsys.readouterr().err.startswith(
            f"adlrec: error: no MLflow store at sqlite:///{typo / 'mlflow.db'} (set by --data-dir): "
        )
    assert not typo.exists() and not (tmp_path / "p").exists()


def test_a_parameter_longer_than_mlflow_keeps_is_logged_cut_with_a_warning_and_kept_whole(tmp_path, caplog):
    tracker = Tracker(f"sqlite:///{tmp_path / 'm.db'}", "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    notes = "n" * 7000
    with caplog.at_level("WARNING", logger="adlrec.tracking"):
        run_id = tracker.log_profile(make_profile(params={"batch_size": 4, "notes": notes, "edge": "e" * 6000}))
    assert "parameter param.notes is 7000 characters as text; MLflow keeps its first 6000" in caplog.text
    assert "param.edge" not in caplog.text  # 6000 characters fit: kept whole, no warning
    assert tracker.client.get_run(run_id).data.params["param.edge"] == "e" * 6000
    assert tracker.client.get_run(run_id).data.params["param.notes"] == "n" * 6000
    (run,) = tracker.profiles()
    assert run.profile.params["notes"] == notes  # profile.json keeps it whole


def test_a_sweep_of_more_metrics_than_one_batch_holds_is_logged_whole(tmp_path):
    """A sweep to 99 workers is 1100 stepped metrics; MLflow takes at most 1000 in one batch."""
    tracker = Tracker(f"sqlite:///{tmp_path / 'm.db'}", "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    run_id = tracker.log_profile(make_profile(throughputs=tuple(10.0 + w for w in range(100))))
    for key in _POINT_METRICS:  # every metric of every point, the ones at a batch's edge (900 of 1100) too
        assert sorted(m.step for m in tracker.client.get_metric_history(run_id, key)) == list(range(100)), key
    run = tracker.client.get_run(run_id)
    assert (run.data.params["max_workers"], run.data.params["batch_size"]) == ("99", "8")
    assert (run.data.metrics["best_workers"], run.data.metrics["best_throughput"]) == (99, 109.0)


def test_an_experiment_deleted_in_the_store_is_a_usage_error_not_an_empty_one(tmp_path, capsys):
    """MLflow keeps a deleted experiment's name: reading it as empty hid the user's profiles, in its trash."""
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "mine", artifact_root=tmp_path / "artifacts")
    tracker.log_profile(make_profile())
    tracker.client.delete_experiment(tracker.experiment_id())
    assert main(["profiles", "list", "--tracking-uri", uri, "--experiment", "mine"]) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: experiment 'mine' is deleted in {uri}; restore it or choose another with --experiment\n"
    )


def test_an_error_not_estimated_is_in_profile_json_only(tmp_path):
    """MLflow would store an infinite metric as 1.8e308: a number no chart or comparison can use."""
    from dataclasses import replace

    tracker = Tracker(f"sqlite:///{tmp_path / 'm.db'}", "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    profile = make_profile()
    profile = replace(profile, baseline=replace(profile.baseline, ceiling_rse=float("inf")))
    metrics = tracker.client.get_run(tracker.log_profile(profile)).data.metrics
    assert "ceiling_rse" not in metrics and metrics["ceiling"] == 25.0
    assert tracker.profiles()[0].profile.baseline.ceiling_rse == float("inf")


def test_list_says_an_empty_experiment_is_empty_and_gives_each_profiles_best_and_fewest_reaching_95pct(
    tmp_path, capsys
):
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    tracker.experiment_id()
    assert main(["profiles", "list", "--tracking-uri", uri]) == 0
    assert capsys.readouterr().out == f"no complete profiles in experiment 'adlrec-profiles' at {uri}\n"
    run_id = tracker.log_profile(make_profile(throughputs=(10.0, 19.5, 20.0)))  # 19.5 reaches 95% of 20
    assert main(["profiles", "list", "--tracking-uri", uri]) == 0
    assert capsys.readouterr().out == f"{run_id}  2026-12-02T00:00:00+00:00  w  emulate:5  best 2w 20.0/s, 95% at 1w\n"


def test_import_logs_each_measurement_once_within_one_command(tmp_path, capsys):
    """A file named twice is logged once; a measurement of the same job at another time is another profile."""
    from dataclasses import replace

    first, again = tmp_path / "first.json", tmp_path / "again.json"
    first.write_text(json.dumps(make_profile().to_dict()))
    again.write_text(json.dumps(replace(make_profile(), created_at="2026-12-03T00:00:00+00:00").to_dict()))
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    store = ["--tracking-uri", uri, "--data-dir", str(tmp_path / "data")]
    assert main(["profiles", "import", str(first), str(again), str(first), *store]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[0] for line in lines[:3]] == [str(first), str(again), str(first)]
    assert "logged as run" in lines[0] and "logged as run" in lines[1] and "already in the store as run" in lines[2]
    assert lines[3].startswith("imported 2 of 3 profiles into experiment 'adlrec-profiles'")
    assert len(Tracker(uri, "adlrec-profiles").profiles()) == 2


def test_list_puts_the_newest_measurement_first_whatever_order_the_runs_were_logged_in(tmp_path, capsys):
    """`profiles import` logs curves measured elsewhere in any order: listed by when they were logged, the
    newest measurement came last after an import of older files."""
    from dataclasses import replace

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    times = ["2026-12-05T00:00:00+00:00", "2026-12-01T00:00:00+00:00", "2026-12-03T00:00:00Z"]
    ids = {t: tracker.log_profile(replace(make_profile(workload=f"w{i}"), created_at=t)) for i, t in enumerate(times)}
    assert main(["profiles", "list", "--tracking-uri", uri]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [ids[times[0]], ids[times[2]], ids[times[1]]]
    assert [line.split()[1] for line in lines] == [times[0], times[2], times[1]]


def test_newest_first_puts_a_time_that_does_not_parse_last():
    from dataclasses import replace

    from adlrec.profile.library import newest_first

    odd, old, new = (replace(make_profile(), created_at=t) for t in ("yesterday", "2026-01-01", "2026-02-01T00:00Z"))
    assert newest_first([odd, old, new], lambda p: p) == [new, old, odd]


def test_a_run_whose_profile_json_cannot_be_read_is_named_and_the_others_still_read(tmp_path, capsys):
    """Its artifact deleted, or damaged: before, MLflow's or json's traceback, and `profiles list`, `profiles export`
    and `model fit` read nothing at all."""
    from adlrec.errors import TrackingError
    from adlrec.predict.fit import gather_curves

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    good = tracker.log_profile(make_profile(workload="good"))
    gone, damaged = (
        tracker.log_profile(make_profile(workload="gone")),
        tracker.log_profile(make_profile(workload="bad")),
    )

    def artifact(run_id: str) -> Path:
        return Path(tracker.client.get_run(run_id).info.artifact_uri.removeprefix("file://")) / "profile.json"

    artifact(gone).unlink()
    artifact(damaged).write_text('{"workload": "bad"')
    warnings = [
        f"adlrec: warning: skipped run {damaged}: its profile.json is no profile: JSONDecodeError: Expecting ',' "
        "delimiter: line 1 column 19 (char 18)",
        f"adlrec: warning: skipped run {gone}: its profile.json cannot be read: Failed to download artifacts from "
        "path 'profile.json', please ensure that the path is correct.",
    ]
    assert main(["profiles", "list", "--tracking-uri", uri]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == warnings
    assert [line.split()[0] for line in captured.out.splitlines()] == [good]

    assert main(["profiles", "export", "--tracking-uri", uri, "--out", str(tmp_path / "out")]) == 0
    captured = capsys.readouterr()
    assert captured.err.splitlines() == warnings and "exported 1 profile to" in captured.out
    assert [p.workload for p in load_profiles(tmp_path / "out", skipped=[])] == ["good"]

    skipped: list[str] = []
    assert [c.group.split()[0] for c in gather_curves(None, tracker, skipped)] == ["good"]
    assert skipped == [w.removeprefix("adlrec: warning: skipped ") for w in warnings]
    with pytest.raises(TrackingError, match=f"^run {damaged}: its profile.json is no profile: .* \\(in {uri}\\)$"):
        tracker.profiles()


def test_an_import_stopped_with_ctrl_c_says_which_files_were_imported(tmp_path, capsys):
    """The command's own line said only 'nothing was logged for the unfinished work': not that the files before
    it stay imported, nor how to import the rest."""
    from dataclasses import replace

    from adlrec.cli.profile import _import
    from adlrec.config import load_settings

    class StoppedAtTheSecond(Tracker):  # the real store; the user presses Ctrl-C while the second is logged
        def log_profile(self, profile):
            if profile.workload == "second":
                raise KeyboardInterrupt
            return super().log_profile(profile)

    files = [(tmp_path / f"{w}.json", replace(make_profile(), workload=w)) for w in ("first", "second", "third")]
    tracker = StoppedAtTheSecond(f"sqlite:///{tmp_path / 'm.db'}", "adlrec-profiles", tmp_path / "artifacts")
    with pytest.raises(KeyboardInterrupt):
        _import(files, load_settings(data_dir=tmp_path), tracker)
    assert capsys.readouterr().err == (
        f"adlrec: interrupted while importing {files[1][0]}; the 1 file before it was imported, and the same "
        "command again imports the rest (those already stored are skipped)\n"
    )
    assert [r.profile.workload for r in tracker.profiles()] == ["first"]
