"""`adlrec profile` end to end: real DataLoader workers, a real SQLite MLflow store in a temp dir."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adlrec.cli import main
from adlrec.tracking import Tracker

FAST = ["--device", "emulate:2", "--budget", "0.4", "--max-workers", "2"]


def store_args(store):
    return ["--tracking-uri", store["uri"], "--data-dir", store["data_dir"]]


def cli(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300):
    """The console script as a user runs it (a fresh process), with ``env`` added to this one's."""
    env = os.environ | {"MLFLOW_DISABLE_TELEMETRY": "true"} | (env or {})
    return subprocess.run(
        [sys.executable, "-m", "adlrec.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout
    )


def test_sweep_logs_one_complete_curve(tiny_job_path, store, capsys):
    assert main(["profile", str(tiny_job_path), *FAST, *store_args(store)]) == 0
    out = capsys.readouterr().out
    assert "tiny on EMULATED accelerator (2 ms/step)" in out
    assert "logged run" in out

    tracker = Tracker(store["uri"], "adlrec-profiles")
    runs = tracker.runs()
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    tags = run.data.tags
    assert tags["adlrec.workload"] == "tiny"
    assert tags["adlrec.device"] == "emulate:2" and tags["adlrec.emulated"] == "true"
    assert len(tags["adlrec.model_hash"]) == 16
    assert tags["adlrec.hardware.fingerprint"]
    assert tags["adlrec.command"].startswith("adlrec profile ")

    # every metric is stepped by worker count, for every worker count of the sweep
    history = tracker.client.get_metric_history(run.info.run_id, "throughput")
    assert sorted(m.step for m in history) == [0, 1, 2]
    assert all(m.value > 0 for m in history)
    for key in ("stall_fraction", "prep_share", "fetch_share", "cpu_util", "worker_uss_mb"):
        assert len(tracker.client.get_metric_history(run.info.run_id, key)) == 3
    for key in ("ceiling", "ceiling_end", "enough_workers"):  # the ceiling again after the sweep, too
        assert len(tracker.client.get_metric_history(run.info.run_id, key)) == 1
    uss = {m.step: m.value for m in tracker.client.get_metric_history(run.info.run_id, "worker_uss_mb")}
    assert uss[0] == 0.0 and uss[1] > 0 and uss[2] > 0  # real worker processes were measured

    artifacts = {a.path for a in tracker.client.list_artifacts(run.info.run_id)}
    assert {"curve.csv", "curve.png", "profile.json", "hardware.json"} <= artifacts
    # artifacts live where the store's experiment says, inside the data dir
    exp = tracker.client.get_experiment_by_name("adlrec-profiles")
    assert exp.artifact_location.startswith(Path(store["data_dir"]).resolve().as_uri())

    (profile_run,) = tracker.profiles()
    assert [p.workers for p in profile_run.profile.points] == [0, 1, 2]
    assert profile_run.profile.baseline.ceiling > 0
    assert "posix_fadvise" in profile_run.profile.baseline.fetch_method


def test_json_output_is_machine_readable(tiny_job_path, store, capsys):
    assert (
        main(
            [
                "profile",
                str(tiny_job_path),
                *FAST,
                "--max-workers",
                "1",
                "--json",
                "--no-log",
                "--data-dir",
                store["data_dir"],
            ]
        )
        == 0
    )
    data = json.loads(capsys.readouterr().out)
    assert data["run_id"] is None and data["tracking_uri"] is None
    assert data["budget_s"] == 0.4  # --budget reaches the sweep
    assert [p["workers"] for p in data["points"]] == [0, 1]
    assert data["device"]["emulated"] is True
    assert not Path(store["uri"].removeprefix("sqlite:///")).exists()  # --no-log touched no store


def test_param_overrides_reach_the_job(tiny_job_path, store, capsys):
    args = ["profile", str(tiny_job_path), *FAST, "--max-workers", "0", "--param", "samples=32", "--json"]
    assert main(args + store_args(store)) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["params"]["samples"] == 32
    (run,) = Tracker(store["uri"], "adlrec-profiles").runs()  # --json names the run it logged, and where
    assert (data["run_id"], data["tracking_uri"]) == (run.info.run_id, store["uri"])


BAD_JOBS = {
    "missing": None,
    "syntax": "def broken(:\n",
    "import_error": "import not_a_module_anywhere\n",
    "no_loss": "PARAMS = {'batch_size': 2}\ndef build_dataset(cfg): return [1]\ndef build_model(cfg): pass\n",
    "raising_dataset": textwrap.dedent(
        """
        import torch
        from torch.utils.data import Dataset
        PARAMS = {"batch_size": 2}
        class Bad(Dataset):
            def __len__(self): return 8
            def __getitem__(self, i): raise ValueError(f"cannot decode sample {i}")
        def build_dataset(cfg): return Bad()
        def build_model(cfg): return torch.nn.Linear(1, 1)
        def loss_fn(o, t): return o.sum()
        """
    ),
    # sys.exit() in the job's code, even exit(0): an error named in one line, not adlrec ending silently with 0
    "exiting_dataset": textwrap.dedent(
        """
        import sys
        import torch
        from torch.utils.data import Dataset
        PARAMS = {"batch_size": 2}
        class Bad(Dataset):
            def __len__(self): return 8
            def __getitem__(self, i): sys.exit(0)
        def build_dataset(cfg): return Bad()
        def build_model(cfg): return torch.nn.Linear(1, 1)
        def loss_fn(o, t): return o.sum()
        """
    ),
    "exiting_build": "import sys\nPARAMS = {'batch_size': 2}\ndef build_dataset(cfg): sys.exit(0)\n"
    "def build_model(cfg): pass\ndef loss_fn(o, t): pass\n",
}


def test_a_training_step_that_raises_is_named_with_the_model_py_it_is_in(tmp_path, store):
    # it said "the training step raised ...", naming no file, where a dataset's error named model.py
    path = tmp_path / "shapes.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch
            PARAMS = {"batch_size": 2}
            def build_dataset(cfg): return [(torch.zeros(4), torch.zeros(1))] * 8
            def build_model(cfg): return torch.nn.Linear(5, 1)
            def loss_fn(out, target): return (out - target).pow(2).mean()
            """
        )
    )
    result = cli("profile", str(path), "--device", "cpu", *FAST[2:], *store_args(store))
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(
        "adlrec: error: shapes.py: the training step (forward, loss_fn, backward, optimizer step) raised RuntimeError: "
        "mat1 and mat2 shapes cannot be multiplied"
    ), result.stderr


@pytest.mark.parametrize("kind", sorted(BAD_JOBS))
def test_bad_model_py_exits_2_with_one_line_and_leaves_no_run(tmp_path, store, kind):
    path = tmp_path / "model.py"
    if BAD_JOBS[kind] is not None:
        path.write_text(BAD_JOBS[kind])
    result = cli("profile", str(path), *FAST, *store_args(store))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("adlrec: error: ")
    assert "Traceback" not in result.stderr
    assert Tracker(store["uri"], "adlrec-profiles").runs(include_incomplete=True) == []


def test_bad_options_exit_2_with_a_clear_line(tiny_job_path, store):
    result = cli("profile", str(tiny_job_path), "--device", "gpu0", *store_args(store))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        "adlrec: error: --device 'gpu0': expected auto, cpu, cuda or emulate:MS (e.g. emulate:20)"
    )
    result = cli("profile", str(tiny_job_path), "--budget", "-1")
    assert result.returncode == 2 and "expected a number of seconds > 0" in result.stderr


def test_a_run_that_fails_while_logging_is_marked_failed_and_never_read_back(tmp_path, tiny_job_path, capsys):
    """The artifact folder's parent is a file: the run is created, then its artifacts cannot be written."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the artifact folder should be")
    from adlrec.tracking import COMPLETE_TAG
    from adlrec.tracking import Tracker as T

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = T(uri, "adlrec-profiles", artifact_root=blocker / "artifacts")
    tracker.experiment_id()  # created with an artifact location that cannot be written
    code = main(
        [
            "profile",
            str(tiny_job_path),
            *FAST,
            "--max-workers",
            "0",
            "--tracking-uri",
            uri,
            "--data-dir",
            str(tmp_path / "d"),
        ]
    )
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert (
        err.startswith("adlrec: error: could not log run ") and "the run is marked FAILED; the profile is kept" in err
    )
    assert "\n" not in err
    runs = tracker.runs(include_incomplete=True)
    assert len(runs) == 1 and runs[0].info.status == "FAILED"
    assert COMPLETE_TAG not in runs[0].data.tags  # the tag is the last thing written: it says all the rest is there
    assert tracker.runs() == [] and tracker.profiles() == []


def test_a_machine_that_slows_during_the_sweep_is_named_in_the_notes(tmp_path, capsys):
    """The ceiling is measured again after the last point; a step that slowed in between shows there
    (and would not, were it measured again before the points: see the fixture)."""
    slowing = Path(__file__).parent.parent / "fixtures" / "slowing_job.py"
    args = ["profile", str(slowing), "--device", "cpu", "--budget", "0.4", "--max-workers", "2", "--no-log"]
    assert main([*args, "--json", "--data-dir", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    b = data["baseline"]
    assert b["ceiling_end"] < b["ceiling"] / 2  # 250 ms steps at the end against no wait at the start
    (note,) = [n for n in data["notes"] if "compute ceiling moved" in n]
    assert "samples/s (-" in note and "between the sweep's start and end" in note  # it slowed


def test_a_machine_that_sped_up_during_the_sweep_is_named_with_a_plus(tmp_path, capsys):
    """The same job the other way round: 250 ms steps at the start, none from the points on."""
    slowing = Path(__file__).parent.parent / "fixtures" / "slowing_job.py"
    args = ["profile", str(slowing), "--device", "cpu", "--budget", "0.4", "--max-workers", "0", "--no-log"]
    assert main([*args, "--param", "fast_ms=250", "--param", "slow_ms=0", "--json", "--data-dir", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["baseline"]["ceiling_end"] > 2 * data["baseline"]["ceiling"]
    (note,) = [n for n in data["notes"] if "compute ceiling moved" in n]
    assert "samples/s (+" in note  # it sped up


def test_a_reader_that_stops_reading_ends_the_command_quietly(tmp_path):
    """`adlrec profiles list | head -1`: the closed pipe is the reader's choice, not an error to show."""
    r, w = os.pipe()
    os.close(r)  # every write to stdout now fails with a broken pipe
    try:
        env = os.environ | {"MLFLOW_DISABLE_TELEMETRY": "true"}
        done = subprocess.run(
            [sys.executable, "-m", "adlrec.cli", "profiles", "list"],  # the default store: "no profiles yet"
            cwd=tmp_path,
            stdout=w,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        os.close(w)
    assert done.returncode == 141, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


def test_a_store_that_fails_after_the_sweep_keeps_the_profile_for_import(tiny_job_path, store, capsys):
    """The sweep took minutes: a store that fails when it is logged (here its artifact folder is a
    file) must not lose it.  It is kept in the data dir, and `profiles import` logs it later."""
    data = Path(store["data_dir"])
    data.mkdir(parents=True)
    (data / "artifacts").write_text("in the way")
    assert main(["profile", str(tiny_job_path), *FAST, *store_args(store)]) == 1
    err = capsys.readouterr().err
    assert "could not log run" in err and "the profile is kept in " in err, err
    kept = Path(err.split("the profile is kept in ")[1].split(":")[0])
    assert kept.parent == data / "unlogged" and kept.exists()
    assert Tracker(store["uri"], "adlrec-profiles").profiles() == []  # the failed run is not a profile

    (data / "artifacts").unlink()
    assert main(["profiles", "import", str(kept), *store_args(store)]) == 0
    (run,) = Tracker(store["uri"], "adlrec-profiles").profiles()
    assert run.profile.workload == "tiny" and [p.workers for p in run.profile.points] == [0, 1, 2]


def test_predict_compare_keeps_its_sweep_when_the_store_fails(tiny_job_path, store, capsys):
    data = Path(store["data_dir"])
    data.mkdir(parents=True)
    (data / "artifacts").write_text("in the way")
    assert main(["predict", str(tiny_job_path), *FAST, "--compare", *store_args(store)]) == 1
    err = capsys.readouterr().err
    assert "could not log run" in err and "the profile is kept in " in err, err
    (kept,) = (data / "unlogged").iterdir()
    assert json.loads(kept.read_text())["workload"] == "tiny"


def test_profiles_kept_in_the_same_second_do_not_overwrite_each_other(tmp_path):
    from adlrec.cli.profile import _keep
    from tests.factories import make_profile

    first, second = make_profile(throughputs=(1.0, 2.0)), make_profile(throughputs=(3.0, 4.0))
    paths = [_keep(p, tmp_path / "unlogged") for p in (first, second)]
    assert paths[0] != paths[1]
    assert [json.loads(p.read_text())["points"][1]["throughput"] for p in paths] == [2.0, 4.0]


def test_a_profile_that_cannot_be_kept_in_a_file_is_printed(tmp_path, capsys):
    from adlrec.cli.profile import _keep
    from tests.factories import make_profile

    (tmp_path / "afile").write_text("x")
    profile = make_profile()
    assert _keep(profile, tmp_path / "afile" / "unlogged") is None
    assert json.loads(capsys.readouterr().out) == json.loads(json.dumps(profile.to_dict()))


def test_a_log_stopped_with_ctrl_c_keeps_the_profile_and_is_still_an_interrupt(tmp_path, capsys):
    from adlrec.cli.profile import log_or_keep
    from adlrec.config import load_settings
    from tests.factories import make_profile

    class StoppedWhileLogging(Tracker):  # the real store; the user presses Ctrl-C while the run is logged
        def log_profile(self, profile):
            raise KeyboardInterrupt

    tracker = StoppedWhileLogging(f"sqlite:///{tmp_path / 'm.db'}", "adlrec-profiles", tmp_path / "artifacts")
    with pytest.raises(KeyboardInterrupt):
        log_or_keep(tracker, make_profile(), load_settings(data_dir=tmp_path))
    (kept,) = (tmp_path / "unlogged").iterdir()
    assert capsys.readouterr().err == (
        f"adlrec: interrupted while logging; the profile is kept in {kept}: `adlrec profiles import {kept}` logs it\n"
    )


def test_predict_compare_logs_its_sweep_to_the_experiment_given(tiny_job_path, store, capsys):
    argv = ["predict", str(tiny_job_path), *FAST, "--max-workers", "1", "--compare", "--json", *store_args(store)]
    assert main([*argv, "--experiment", "mine"]) == 0
    capsys.readouterr()
    (run,) = Tracker(store["uri"], "mine").profiles()
    assert run.profile.workload == "tiny" and run.profile.budget_s == 0.4  # --budget reaches the sweep
    assert Tracker(store["uri"], "adlrec-profiles").runs(include_incomplete=True) == []


CHATTY_JOB = """
import os
import torch
from torch.utils.data import Dataset, get_worker_info

print("importing the job")
PARAMS = {"batch_size": 4}

class Chatty(Dataset):
    said = False
    def __len__(self): return 16
    def __getitem__(self, i):
        if get_worker_info() is not None and not self.said:
            self.said = True
            print("a worker's first sample")
            os.write(1, b"a worker writing to fd 1\\n")
        return torch.zeros(4), i % 2

def build_dataset(cfg):
    print("building the dataset")
    os.system("echo a program the job runs")
    return Chatty()

def build_model(cfg): return torch.nn.Linear(4, 2)
def loss_fn(o, t): return torch.nn.functional.cross_entropy(o, t)
"""


@pytest.mark.parametrize("command", [["profile", "--no-log"], ["predict"]], ids=["profile", "predict"])
def test_json_stays_parseable_when_the_job_prints(tmp_path, command):
    """`--json > image.json` then `profiles import image.json` (docs/profiling.md): what model.py, its workers or
    the programs it runs print goes to stderr, not into the JSON on stdout."""
    job = tmp_path / "chatty.py"
    job.write_text(CHATTY_JOB)
    name, *flags = command
    done = cli(
        name, str(job), *FAST, "--max-workers", "1", "--json", *flags, cwd=tmp_path
    )  # the default store: none yet
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)  # only the JSON: before the fix, "importing the job" came first
    assert data["workload"] == "chatty"
    for line in (
        "importing the job",
        "building the dataset",
        "a program the job runs",
        "a worker's first sample",
        "a worker writing to fd 1",
    ):
        assert line in done.stderr


def test_json_stays_parseable_when_the_job_prints_to_a_stdout_without_a_descriptor(tmp_path, capsys):
    """main() called from Python whose sys.stdout is a stream of its own (a notebook's, pytest's capture)."""
    job = tmp_path / "chatty.py"
    job.write_text(CHATTY_JOB)
    argv = ["profile", str(job), *FAST, "--max-workers", "0", "--json", "--no-log", "--data-dir", str(tmp_path)]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["workload"] == "chatty"
    assert "importing the job" in captured.err and "building the dataset" in captured.err


@pytest.mark.parametrize(
    ("samples", "expected"),
    [
        ("3", "the dataset holds 3 samples, less than one batch of 8: a real epoch is one batch of 3"),
        ("8", "an epoch of 8 samples is 1 batch of 8"),
    ],
)
def test_an_epoch_with_fewer_batches_than_workers_is_named_in_the_notes(
    tiny_job_path, tmp_path, capsys, samples, expected
):
    """The sweep never ends an epoch, so all its workers have work; a real epoch of one batch keeps one busy."""
    args = ["profile", str(tiny_job_path), *FAST, "--param", f"samples={samples}", "--json", "--no-log"]
    assert main([*args, "--data-dir", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["workers"] for p in data["points"]] == [0, 1, 2]  # still measured, every point
    (note,) = [n for n in data["notes"] if "epoch" in n]
    assert note.startswith(expected)
    assert "at most 1 of its workers busy" in note and "points above 1 worker show" in note


def test_the_table_is_followed_by_the_notes_and_the_best_line(tiny_job_path, tmp_path, capsys):
    args = ["profile", str(tiny_job_path), *FAST, "--param", "samples=3", "--no-log", "--data-dir", str(tmp_path)]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("note: the dataset holds 3 samples, less than one batch of 8") for line in lines)
    assert lines[-1].startswith("best: ") and " samples/s" in lines[-1]  # --no-log: no "logged run" after it


def test_an_epoch_with_a_batch_per_worker_needs_no_note(tiny_job_path, tmp_path, capsys):
    args = ["profile", str(tiny_job_path), *FAST, "--param", "samples=9", "--json", "--no-log"]  # 2 batches: 8 and 1
    assert main([*args, "--data-dir", str(tmp_path)]) == 0
    assert not [n for n in json.loads(capsys.readouterr().out)["notes"] if "epoch" in n]


def test_a_model_without_parameters_on_cpu_is_one_line(tmp_path, store):
    """The default optimizer (SGD) refuses an empty parameter list: that was a ValueError traceback."""
    path = tmp_path / "model.py"
    path.write_text(
        textwrap.dedent(
            """
            import torch
            from torch.utils.data import TensorDataset
            PARAMS = {"batch_size": 2}
            def build_dataset(cfg): return TensorDataset(torch.zeros(8, 4), torch.zeros(8))
            def build_model(cfg): return torch.nn.Identity()
            def loss_fn(o, t): return o.sum()
            """
        )
    )
    result = cli("profile", str(path), "--device", "cpu", "--budget", "0.2", "--max-workers", "0", *store_args(store))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "adlrec: error: model.py: build_model() returned a module with no parameters (Identity), and the default "
        "optimizer (SGD) needs some to train; give the model parameters, or define build_optimizer(model, cfg)"
    )
    assert Tracker(store["uri"], "adlrec-profiles").runs(include_incomplete=True) == []


def test_json_with_stdout_closed_still_runs(tmp_path):
    """`adlrec profile ... --json >&-`: Python's sys.stdout is None; sending the job's output to stderr must cope."""
    job = tmp_path / "chatty.py"
    job.write_text(CHATTY_JOB)
    env = os.environ | {"MLFLOW_DISABLE_TELEMETRY": "true"}
    argv = [sys.executable, "-m", "adlrec.cli", "profile", str(job), *FAST, "--max-workers", "0", "--json", "--no-log"]
    done = subprocess.run(
        argv, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True, timeout=300, preexec_fn=lambda: os.close(1)
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
