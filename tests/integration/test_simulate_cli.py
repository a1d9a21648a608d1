"""`adlrec trace generate` and `adlrec simulate` end to end, on profiles written like profiles/ (real files)."""

from __future__ import annotations

import json

import pytest

from adlrec.cli import main
from adlrec.schemas import DeviceSpec
from tests.factories import make_profile

NODE = ["--cores", "8", "--gpus", "2"]


@pytest.fixture
def profiles(tmp_path):
    folder = tmp_path / "profiles"
    folder.mkdir()
    for workload, curve, ms in (("fast", (10.0, 20.0, 15.0), 5.0), ("slow", (5.0, 9.0, 12.0), 20.0)):
        p = make_profile(throughputs=curve, device=DeviceSpec("emulate", ms), workload=workload)
        (folder / f"{workload}.json").write_text(json.dumps(p.to_dict()))
    return folder


@pytest.fixture
def trace(tmp_path, profiles, capsys):
    out = tmp_path / "trace.csv"
    args = ["trace", "generate", "--jobs", "8", "--seed", "3", "--out", str(out), "--profiles", str(profiles), *NODE]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "wrote 8 jobs" in printed and "curves derived from measured profile parameters" in printed
    assert out.read_text().startswith("# adlrec trace generate")
    return out


def test_simulate_prints_the_comparison(trace, profiles, capsys):
    assert main(["simulate", str(trace), "--profiles", str(profiles), *NODE, "--interval", "30"]) == 0
    out = capsys.readouterr().out
    assert "throughput vs even" in out and "makespan vs even" in out and "decisions/s" in out
    for policy in ("even", "proportional", "greedy", "optimal", "fixed", "maxmin"):
        assert f"│ {policy}" in out
    assert "8 jobs" in out and "curves derived from measured profile parameters" in out


def test_malformed_trace_exits_2_with_one_line(tmp_path, profiles, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,arrival_s,work_samples,profile,gpus,requested_workers\nj1,0,100,fast@emulate:5,two,8\n")
    assert main(["simulate", str(bad), "--profiles", str(profiles), *NODE]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "bad.csv line 2, column gpus: expected a whole number of GPUs >= 1, got 'two'" in err


@pytest.mark.parametrize(
    "args,message",
    [
        (["--policy", "even,best"], "unknown policy best"),
        (["--profiles", "nowhere"], "profiles folder nowhere not found"),
        (["--gpus", "1"], "the node has 1 GPU,"),
        (["--gpus", "2", "--cores", "1"], "--cores 1 is fewer than --gpus 2"),
        (["--policy", " , "], "--policy ' , ' has an empty name; expected comma-separated names from even, fixed,"),
        # an empty name was dropped: 'even,,optimal' ran two policies where a third was meant
        (["--policy", "even,,optimal"], "--policy 'even,,optimal' has an empty name; expected comma-separated names"),
        (["--policy", ""], "--policy '' has an empty name; expected comma-separated names from even, fixed, greedy"),
        # each was ignored, and the comparison a user meant to log went nowhere
        (["--tracking-uri", "sqlite:///x.db"], "--tracking-uri names where --log-mlflow logs the comparison; without"),
        (["--experiment", "mine"], "--experiment names where --log-mlflow logs the comparison; without --log-mlflow"),
        (["--data-dir", "d"], "--data-dir names where --log-mlflow logs the comparison; without --log-mlflow nothing"),
    ],
)
def test_usage_mistakes_exit_2(trace, profiles, capsys, args, message):
    base = ["simulate", str(trace), "--profiles", str(profiles), "--cores", "8", "--gpus", "2"]
    assert main(base + args) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "option,value,message",
    [
        ("--threshold", "1.5", "expected a number within 0..1, got 1.5"),
        ("--main-cpu", "2", "expected a number within 0..1, got 2.0"),
        ("--interval", "0.001", "expected a number of seconds >= 1, got 0.001"),
    ],
)
def test_option_values_out_of_range_are_refused_by_argparse(trace, profiles, capsys, option, value, message):
    with pytest.raises(SystemExit) as exc:
        main(["simulate", str(trace), "--profiles", str(profiles), *NODE, option, value])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_a_bad_trace_with_log_mlflow_stores_nothing(tmp_path, profiles, store, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,arrival_s,work_samples,profile,gpus,requested_workers\nj1,0,100,fast@emulate:5,9,8\n")
    args = ["simulate", str(bad), "--profiles", str(profiles), *NODE, "--log-mlflow"]
    assert main(args + ["--tracking-uri", store["uri"], "--data-dir", store["data_dir"]]) == 2
    assert "column gpus: the node has 2 GPUs, the job asks 9" in capsys.readouterr().err
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "data").exists()


def test_trace_generate_to_a_place_it_cannot_write_is_a_one_line_error(tmp_path, profiles, capsys):
    (tmp_path / "taken").mkdir()
    for out in (tmp_path / "taken", tmp_path / "file.csv" / "x.csv"):
        (tmp_path / "file.csv").write_text("")
        assert main(["trace", "generate", "--out", str(out), "--profiles", str(profiles), *NODE]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"adlrec: error: --out {out}: cannot write the trace there") and "\n" not in err


def test_log_mlflow_records_one_run_with_metrics_per_policy(trace, profiles, store, capsys):
    from adlrec.tracking import Tracker

    args = ["simulate", str(trace), "--profiles", str(profiles), *NODE, "--policy", "even,optimal"]
    assert main(args + ["--log-mlflow", "--tracking-uri", store["uri"], "--data-dir", store["data_dir"]]) == 0
    assert "logged run" in capsys.readouterr().out
    tracker = Tracker(store["uri"], "adlrec-simulations")
    (run,) = tracker.runs()
    assert run.data.params["policies"] == "even,optimal"
    assert len(run.data.params["trace_sha256"]) == 16 and run.data.params["node.cores"] == "8"
    assert run.data.params["node.memory_mb"] == str(256 * 1024)  # --memory-gb's default, in MiB
    assert run.data.params["trace"] == str(trace.resolve()) and run.data.params["profiles"] == str(profiles.resolve())
    # the settings the replay ran under, so two logged comparisons can be told apart
    settings = {k: v for k, v in run.data.params.items() if k.startswith("config.")} | {"jobs": run.data.params["jobs"]}
    assert settings == {
        "jobs": "8",
        "config.interval_s": "60.0",
        "config.resize_s": "0.5",
        "config.threshold": "0.05",
        "config.objective": "busy_gpus",
        "config.contention": "all",
        "config.main_cpu": "1.0",
    }
    assert {"even.makespan_s", "optimal.makespan_s", "optimal.throughput_vs_base_pct"} <= set(run.data.metrics)
    assert [a.path for a in tracker.client.list_artifacts(run.info.run_id)] == ["comparison.csv"]


def test_a_trace_drawn_from_the_shipped_published_table_replays(tmp_path, capsys):
    """The real profiles/published/synergy.json, copied beside a measured profile, end to end."""
    from pathlib import Path

    folder = tmp_path / "profiles"
    (folder / "published").mkdir(parents=True)
    shipped = Path(__file__).resolve().parents[2] / "profiles" / "published" / "synergy.json"
    (folder / "published" / "synergy.json").write_text(shipped.read_text())
    p = make_profile(throughputs=(10.0, 20.0, 15.0), device=DeviceSpec("emulate", 5.0), workload="fast")
    (folder / "fast.json").write_text(json.dumps(p.to_dict()))
    out = tmp_path / "syn.csv"
    args = ["trace", "generate", "--curves", "synergy", "--jobs", "6", "--out", str(out), "--profiles", str(folder)]
    assert main([*args, "--cores", "24", "--gpus", "8"]) == 0
    printed = capsys.readouterr().out
    assert "curves from a published table" in printed and "fast" not in printed.split("profiles:")[1]
    names = [line.split(",")[3] for line in out.read_text().splitlines()[5:]]
    assert len(names) == 6 and all(n.startswith("synergy:") for n in names)
    assert "msr-fiddle/synergy" in out.read_text()  # the trace says where its curves come from
    assert main(["simulate", str(out), "--profiles", str(folder), "--cores", "24", "--gpus", "8"]) == 0
    assert "│ optimal" in capsys.readouterr().out


def test_an_unknown_published_table_is_a_one_line_error(profiles, capsys):
    assert main(["trace", "generate", "--curves", "nope", "--profiles", str(profiles), *NODE]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--curves 'nope': no table" in err and "choose from measured" in err


@pytest.mark.parametrize(
    "arrival,work,message",
    [
        ("0", "1e12", "job 'j1' needs at least"),  # a mistyped work_samples replayed for hours
        ("1e300", "100", "job 'j1' arrives at 1e+300 s"),  # the replay's clock never passed it: a hang
    ],
)
def test_a_trace_too_long_to_replay_is_refused_at_once(tmp_path, profiles, capsys, arrival, work, message):
    import time

    bad = tmp_path / "long.csv"
    bad.write_text(f"job_id,arrival_s,work_samples,profile,gpus,requested_workers\nj1,{arrival},{work},fast,1,8\n")
    start = time.monotonic()
    assert main(["simulate", str(bad), "--profiles", str(profiles), *NODE, "--policy", "even"]) == 2
    assert time.monotonic() - start < 30
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"cannot simulate {bad} on this node: {message}" in err


@pytest.mark.parametrize("arrival,work", [("0", "1e12"), ("1e300", "100")])
def test_a_trace_the_replay_refuses_with_log_mlflow_stores_nothing(tmp_path, profiles, store, capsys, arrival, work):
    bad = tmp_path / "long.csv"
    bad.write_text(f"job_id,arrival_s,work_samples,profile,gpus,requested_workers\nj1,{arrival},{work},fast,1,8\n")
    args = ["simulate", str(bad), "--profiles", str(profiles), *NODE, "--policy", "even", "--log-mlflow"]
    assert main(args + ["--tracking-uri", store["uri"], "--data-dir", store["data_dir"]]) == 2
    assert f"cannot simulate {bad} on this node: job 'j1'" in capsys.readouterr().err
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "data").exists()


def test_a_trace_done_within_the_clocks_resolution_prints_no_comparison_and_no_traceback(
    tmp_path, profiles, store, capsys
):
    """At 10^15 s the clock steps by 1/8 s: one sample takes less, so the job completes as it arrives and
    the baseline's makespan is 0: there is nothing to compare against, which once raised ZeroDivisionError."""
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("job_id,arrival_s,work_samples,profile,gpus,requested_workers\nj1,1e15,1,fast,1,8\n")
    args = ["simulate", str(tiny), "--profiles", str(profiles), *NODE, "--policy", "even,optimal"]
    assert main(args + ["--log-mlflow", "--tracking-uri", store["uri"], "--data-dir", store["data_dir"]]) == 0
    rows = [line.split("│") for line in capsys.readouterr().out.splitlines() if line.startswith("│ ")]
    assert [(r[1].strip(), r[2].strip(), r[3].strip(), r[5].strip()) for r in rows] == [
        ("even", "-", "-", "0.00 h"),
        ("optimal", "-", "-", "0.00 h"),
    ]
    from adlrec.tracking import Tracker

    (run,) = Tracker(store["uri"], "adlrec-simulations").runs()
    assert "optimal.makespan_s" in run.data.metrics and "optimal.makespan_vs_base_pct" not in run.data.metrics


def test_trace_generate_does_not_replace_an_existing_file_without_force(tmp_path, profiles, capsys):
    edited = tmp_path / "trace.csv"
    edited.write_text("job_id,arrival_s,work_samples,profile,gpus,requested_workers\nmine,0,100,fast,1,8\n")
    args = ["trace", "generate", "--out", str(edited), "--profiles", str(profiles), *NODE]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"adlrec: error: --out {edited} already exists; expected a new file, or --force to replace it"
    assert "mine,0,100" in edited.read_text()  # the hand-made trace is kept
    assert main([*args, "--force"]) == 0
    assert "mine,0,100" not in edited.read_text() and "wrote 40 jobs" in capsys.readouterr().out


def test_a_policy_named_twice_runs_and_is_logged_once(trace, profiles, store, capsys):
    from adlrec.tracking import Tracker

    args = ["simulate", str(trace), "--profiles", str(profiles), *NODE, "--policy", "even,optimal,even"]
    assert main(args + ["--log-mlflow", "--tracking-uri", store["uri"], "--data-dir", store["data_dir"]]) == 0
    assert capsys.readouterr().out.count("│ even") == 1
    (run,) = Tracker(store["uri"], "adlrec-simulations").runs()
    assert run.data.params["policies"] == "even,optimal"  # was "even,optimal,even": not what ran


@pytest.mark.parametrize(
    "header,wrong",
    [
        ("job_id,arrival_s,work_samples,profile,gpus", "missing 'requested_workers'"),
        ("job_id,arrival_s,work_samples,profile,GPUs,requested_workers", "missing 'gpus'; unknown 'GPUs'"),
        ("job_id,arrival_s,work_samples,profile,gpus,requested_workers,", "unknown ''"),
        ("job_id,arrival_s,work_samples,profile,gpus,requested_workers,gpus", "repeated 'gpus'"),
    ],
)
def test_a_bad_header_names_the_columns_that_are_wrong(tmp_path, profiles, capsys, header, wrong):
    bad = tmp_path / "bad.csv"
    bad.write_text(f"{header}\nj1,0,100,fast,1,8\n")
    assert main(["simulate", str(bad), "--profiles", str(profiles), *NODE]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith(f"adlrec: error: {bad} line 1: {wrong}; expected a header")


def test_ranks_in_lockstep_replay_other_curves_and_are_logged(tmp_path, profiles, store, capsys):
    """A 2-GPU job's odd worker helps under --ranks independent and not under lockstep: the replays differ."""
    out = tmp_path / "two-gpu.csv"
    out.write_text("job_id,arrival_s,work_samples,profile,gpus,requested_workers\na,0,200000,slow,2,8\n")
    # 5 cores for 2 GPUs: 3 worker cores, so the optimum is 2 + 1 (independent) or 2 + 0 (lockstep)
    args = ["simulate", str(out), "--profiles", str(profiles), "--cores", "5", "--gpus", "2", "--policy", "optimal"]
    assert main(args) == 0
    independent = capsys.readouterr().out
    logged = ["--log-mlflow", "--tracking-uri", store["uri"], "--data-dir", store["data_dir"]]
    assert main([*args, "--ranks", "lockstep", *logged]) == 0
    lockstep = capsys.readouterr().out
    assert "ranks independent" in independent and "ranks lockstep" in lockstep

    def makespan(printed: str) -> str:
        return next(line for line in printed.splitlines() if line.startswith("│ optimal")).split("│")[4].strip()

    assert makespan(independent) != makespan(lockstep)
    from adlrec.tracking import Tracker

    (run,) = Tracker(store["uri"], "adlrec-simulations").runs()
    assert run.data.params["ranks"] == "lockstep"


def test_a_store_that_fails_while_the_run_is_logged_is_one_line_and_the_run_is_marked_failed(
    tmp_path, trace, profiles, store, capsys
):
    from adlrec.tracking import Tracker

    data = tmp_path / "data"
    data.mkdir()
    (data / "artifacts").write_text("in the way")  # the run is created, its comparison.csv cannot be written
    args = ["simulate", str(trace), "--profiles", str(profiles), *NODE, "--policy", "even"]
    assert main(args + ["--log-mlflow", "--tracking-uri", store["uri"], "--data-dir", str(data)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("adlrec: error: could not log run ") and err.endswith("; the run is marked FAILED"), err
    assert "\n" not in err
    tracker = Tracker(store["uri"], "adlrec-simulations")
    (run,) = tracker.runs(include_incomplete=True)
    assert run.info.status == "FAILED" and tracker.runs() == []


def test_a_simulation_run_logs_finite_numbers_only_and_its_params_even_with_no_numbers(tmp_path):
    """A comparison with nothing to compare against has NaN or infinite cells: they are no metrics of the run."""
    from adlrec.tracking import Tracker, log_simulation

    tracker = Tracker(f"sqlite:///{tmp_path / 'm.db'}", "adlrec-simulations", artifact_root=tmp_path / "artifacts")
    row = {"policy": "even", "makespan_s": 10.0, "vs_base_pct": float("nan"), "speedup": float("inf"), "note": "x"}
    for rows, metrics in (([row], {"even.makespan_s": 10.0}), ([], {})):
        run = tracker.client.get_run(log_simulation(tracker, {"policies": "even"}, rows, "policy\n"))
        assert (run.data.metrics, run.data.params, run.info.status) == (metrics, {"policies": "even"}, "FINISHED")


def test_a_simulation_run_is_tagged_as_one_and_keeps_every_metric_past_a_batch(tmp_path):
    """1000 numbers, more than one of MLflow's batches holds: each is a metric under its policy's name."""
    from adlrec.tracking import Tracker, log_simulation

    tracker = Tracker(f"sqlite:///{tmp_path / 'm.db'}", "adlrec-simulations", artifact_root=tmp_path / "artifacts")
    rows = [{"policy": f"p{i}"} | {f"f{k}": float(10 * i + k) for k in range(10)} for i in range(100)]
    run_id = log_simulation(tracker, {"policies": "many"}, rows, "policy\n", note="adlrec simulate t.csv")
    run = tracker.client.get_run(run_id)
    assert run.data.metrics == {f"p{i}.f{k}": float(10 * i + k) for i in range(100) for k in range(10)}
    assert (run.data.tags["adlrec.kind"], run.data.tags["mlflow.note.content"]) == (
        "simulation",
        "adlrec simulate t.csv",
    )


@pytest.mark.parametrize(
    ("flags", "settings"),
    [
        (
            [],
            "node 32 cores, 8 GPUs, 256 GB for workers; objective busy_gpus, interval 60 s, resize 0.5 s, "
            "threshold 0.05, contention all, main-cpu 1, ranks independent",
        ),
        (
            "--cores 2 --gpus 2 --memory-gb 1.5 --interval 30 --resize-s 0 --threshold 0.2 --objective throughput "
            "--contention busy --main-cpu 0.5 --ranks lockstep".split(),
            "node 2 cores, 2 GPUs, 1.5 GB for workers; objective throughput, interval 30 s, resize 0 s, threshold 0.2, "
            "contention busy, main-cpu 0.5, ranks lockstep",
        ),
    ],
    ids=["defaults", "each-flag"],
)
def test_the_header_says_the_node_and_settings_of_the_replay(trace, profiles, capsys, flags, settings):
    """The defaults are those --help gives; a node of as many cores as GPUs is one it can replay on."""
    assert main(["simulate", str(trace), "--profiles", str(profiles), "--policy", "even", *flags]) == 0
    header = capsys.readouterr().out.splitlines()[0]
    assert header.startswith(f"trace {trace} (8 jobs, sha256 ") and header.endswith(f"); {settings}")


def test_log_mlflow_logs_to_the_experiment_given(trace, profiles, store, capsys):
    from adlrec.tracking import Tracker

    args = ["simulate", str(trace), "--profiles", str(profiles), *NODE, "--policy", "even", "--log-mlflow"]
    assert main([*args, "--experiment", "mine", "--tracking-uri", store["uri"], "--data-dir", store["data_dir"]]) == 0
    assert "to experiment 'mine'" in capsys.readouterr().out
    assert len(Tracker(store["uri"], "mine").runs()) == 1 and Tracker(store["uri"], "adlrec-simulations").runs() == []


def test_trace_generate_defaults_are_what_help_says(tmp_path, profiles, capsys):
    """No flags draw the trace that --help's defaults spelt out draw; --out's folders are made."""
    implicit, explicit = tmp_path / "new" / "a.csv", tmp_path / "b.csv"
    assert main(["trace", "generate", "--out", str(implicit), "--profiles", str(profiles)]) == 0
    defaults = ["--jobs", "40", "--seed", "1", "--cores", "32", "--gpus", "8", "--load", "1", "--num-workers", "8"]
    defaults += ["--min-minutes", "10", "--max-minutes", "120", "--curves", "measured"]
    assert main(["trace", "generate", "--out", str(explicit), "--profiles", str(profiles), *defaults]) == 0
    lines = implicit.read_text().splitlines()
    assert (
        lines[1] == "# 40 jobs, seed 1, offered GPU load 1 on 8 GPUs, 10-120 min at full speed, num_workers=8 per rank"
    )
    assert lines[1:] == explicit.read_text().splitlines()[1:]  # the first names the command
    for other in (["--seed", "2"], ["--cores", "1"]):  # a job's length in samples is its curve's on the node
        assert main(["trace", "generate", "--out", str(explicit), "--force", "--profiles", str(profiles), *other]) == 0
        assert explicit.read_text().splitlines()[5:] != lines[5:], other
    capsys.readouterr()


def test_trace_generate_draws_cpu_profiles_only_with_include_cpu(tmp_path, profiles, capsys):
    (profiles / "cpu.json").write_text(json.dumps(make_profile(device=DeviceSpec("cpu"), workload="oncpu").to_dict()))
    base = ["trace", "generate", "--profiles", str(profiles), *NODE, "--force", "--out", str(tmp_path / "t.csv")]
    assert main(base) == 0
    assert "(profiles: fast, slow)" in capsys.readouterr().out
    assert main([*base, "--include-cpu", "--jobs", "200"]) == 0
    assert "(profiles: cpu, fast, slow)" in capsys.readouterr().out
    assert any(line.split(",")[3] == "cpu" for line in (tmp_path / "t.csv").read_text().splitlines()[5:])


def test_trace_generate_from_no_accelerator_profile_is_one_line(tmp_path, capsys):
    folder = tmp_path / "cpu-only"
    folder.mkdir()
    (folder / "cpu.json").write_text(json.dumps(make_profile(device=DeviceSpec("cpu")).to_dict()))
    assert main(["trace", "generate", "--profiles", str(folder), "--out", str(tmp_path / "t.csv")]) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: cannot generate a trace from {folder}: no profiles to draw from (accelerator profiles only)\n"
    )
    assert not (tmp_path / "t.csv").exists()


@pytest.mark.parametrize("command", ["trace generate", "simulate"])
def test_a_profiles_folder_with_a_file_that_is_no_profile_is_one_line(trace, profiles, capsys, command):
    (profiles / "notes.json").write_text('{"name": "my notes"}')
    new = trace.parent / "new.csv"
    argv = {"trace generate": ["trace", "generate", "--out", str(new)], "simulate": ["simulate", str(trace)]}[command]
    assert main([*argv, "--profiles", str(profiles), *NODE]) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: profiles folder {profiles}: {profiles / 'notes.json'}: not a profile: the key 'device' is "
        "missing\n"
    )
    assert not new.exists()
