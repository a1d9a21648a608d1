"""Live runs against a real SQLite MLflow store: the writer finds each job's run again after a
restart (one search, no duplicates), ends finished and expired jobs' runs, and logs each job's
heartbeats as one mean point per write."""

from __future__ import annotations

import time

from adlrec.service.live import LiveLog, mean_sample
from adlrec.tracking import LIVE_EXPERIMENT, LIVE_JOB_TAG, LiveRuns, LiveSample


def _runs(uri: str) -> dict[str, list]:
    client = LiveRuns(uri).client
    exp = client.get_experiment_by_name(LIVE_EXPERIMENT)
    out: dict[str, list] = {}
    for r in client.search_runs([exp.experiment_id]):
        out.setdefault(r.data.tags[LIVE_JOB_TAG], []).append(r)
    return out


def _history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    client = LiveRuns(uri).client
    return sorted((m.step, m.value) for m in client.get_metric_history(run_id, key))


def test_live_runs_index_finds_running_runs_after_a_restart(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = LiveRuns(uri, tmp_path / "art")
    t = time.time()
    n = [first.log_job(j, [LiveSample(j, "n0", t, 0, {"throughput": 1.0, "workers": 2.0})]) for j in ("a", "b", "c")]
    assert n == [2, 2, 2]
    first.end("c", "expired")
    first.end("never-seen", "finished")  # no run: nothing to end

    again = LiveRuns(uri, tmp_path / "art")  # a restarted writer
    assert again.known() == {j: first.known()[j] for j in ("a", "b")}
    for j in ("a", "b", "d"):
        again.log_job(j, [LiveSample(j, "n0", t + 1, 1, {"throughput": 2.0})])
    again.end("a", "finished")

    runs = _runs(uri)
    assert {j: len(rs) for j, rs in runs.items()} == {"a": 1, "b": 1, "c": 1, "d": 1}  # no duplicates
    status = {j: rs[0].info.status for j, rs in runs.items()}
    assert status == {"a": "FINISHED", "b": "RUNNING", "c": "KILLED", "d": "RUNNING"}
    assert _history(uri, runs["a"][0].info.run_id, "throughput") == [(0, 1.0), (1, 2.0)]
    history = LiveRuns(uri).client.get_metric_history(runs["a"][0].info.run_id, "throughput")
    assert sorted(m.timestamp for m in history) == [int(t * 1000), int((t + 1) * 1000)]  # when it was measured
    assert {j: rs[0].data.tags["adlrec.node"] for j, rs in runs.items()} == dict.fromkeys("abcd", "n0")
    assert set(LiveRuns(uri).known()) == {"b", "d"}


def test_writer_starts_with_the_service_and_logs_one_mean_point_per_job_and_write(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    live = LiveLog(uri, tmp_path / "art", period_s=0.5)
    live.flush()  # the service's first flush, nothing buffered yet: the writer starts anyway
    assert live._proc is not None and live._proc.is_alive()
    jobs = [f"j{i}" for i in range(6)]
    t = time.time()
    for step in range(5):
        for j in jobs:
            live.record(j, "n0", t + step, {"throughput": 10.0 * step, "workers": 2, "data_wait": None}, t)
        live.flush()
        time.sleep(0.25)  # over 1 s: several write periods, so most jobs are written more than once
    live.end("j0", "finished")
    live.end("j1", "expired")
    counts = live.flush()
    last = live.close()
    assert counts.failures == last.failures == 0 and counts.dropped == last.dropped == 0

    runs = _runs(uri)
    assert sorted(runs) == jobs and all(len(rs) == 1 for rs in runs.values())
    status = {j: rs[0].info.status for j, rs in runs.items()}
    assert status == {"j0": "FINISHED", "j1": "KILLED"} | {j: "RUNNING" for j in jobs[2:]}
    points = 0
    for j in jobs:
        run_id = runs[j][0].info.run_id
        beats = _history(uri, run_id, "heartbeats")
        means = _history(uri, run_id, "throughput")
        assert [s for s, _ in beats] == [s for s, _ in means] and beats == sorted(beats)  # one point per write
        assert sum(n for _, n in beats) == 5  # every heartbeat is in exactly one point
        assert sum(n * m for (_, n), (_, m) in zip(beats, means, strict=True)) == 10.0 * sum(range(5))
        assert {v for _, v in _history(uri, run_id, "workers")} == {2.0}
        points += len(beats)
    assert counts.logged + last.logged == points * 3  # throughput, workers, heartbeats

    # a restarted service logs into the same runs of the jobs still running
    live = LiveLog(uri, tmp_path / "art", period_s=0.5)
    for j in ("j2", "j3"):
        live.record(j, "n0", t + 10, {"throughput": 99.0}, t)
    assert live.close().logged == 2 * 2
    runs = _runs(uri)
    assert all(len(rs) == 1 for rs in runs.values())
    history = _history(uri, runs["j2"][0].info.run_id, "throughput")
    assert history[-1] == (10, 99.0) and [s for s, _ in history] == sorted({s for s, _ in history})  # steps grow on


def test_a_writer_that_dies_is_reported_and_replaced(tmp_path, caplog):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    live = LiveLog(uri, tmp_path / "art", period_s=0.2)
    live.flush()
    first = live._proc
    first.kill()  # as the OOM killer would
    first.join(30)
    t = time.time()
    live.record("k", "n0", t, {"throughput": 5.0}, t)
    with caplog.at_level("ERROR", logger="adlrec.service"):
        counts = live.flush()  # was: samples queued to the dead process, forever, and nothing said
    assert counts.failures == 1 and "the live-metrics writer died (exit code -9)" in caplog.text
    assert live._proc is not first and live._proc.is_alive()
    assert live.close().logged == 2  # the new writer logs what came after: throughput, heartbeats
    assert _history(uri, _runs(uri)["k"][0].info.run_id, "throughput") == [(0, 5.0)]


def test_a_mean_point_averages_each_metric_over_the_heartbeats_that_reported_it():
    t = 1_800_000_000.0
    batch = [
        ("j", "n0", t, 0, {"throughput": 10.0, "data_wait": 0.5}),
        ("j", "n0", t + 1, 1, {"throughput": 30.0}),  # no share in these two: unknown, not 0
        ("j", "n0", t + 2, 2, {"throughput": 20.0}),
    ]
    # at the last heartbeat's time and step
    assert mean_sample(batch) == ("j", "n0", t + 2, 2, {"throughput": 20.0, "data_wait": 0.5, "heartbeats": 3.0})


def test_a_heartbeat_with_nothing_to_log_is_not_buffered_and_a_full_buffer_counts_what_it_drops(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    live = LiveLog(uri, tmp_path / "art", capacity=2, period_s=0.2)
    t = time.time()
    live.record("silent", "n0", t, {"throughput": None, "data_wait": None}, t)
    for i in range(3):  # a buffer of 2: the oldest is dropped
        live.record("k", "n0", t + i, {"throughput": float(i)}, t)
    counts = live.close()
    assert (counts.dropped, counts.logged, counts.failures) == (1, 2, 0)  # throughput and heartbeats, once
    runs = _runs(uri)
    assert set(runs) == {"k"}
    assert _history(uri, runs["k"][0].info.run_id, "throughput") == [(2, 1.5)]


def test_an_ended_job_s_run_ends_at_the_next_tick_not_at_its_next_write(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    LiveRuns(uri, tmp_path / "art")  # the store made here first: the polls below never race its creation
    live = LiveLog(uri, tmp_path / "art", period_s=120.0)  # "end-c" is next due about 116 s after its first sample
    t = time.time()
    try:
        live.record("end-c", "n0", t, {"throughput": 3.0}, t)
        live.end("end-c", "finished")
        live.flush()
        deadline = time.monotonic() + 30  # a bound on waiting, not a timing assertion
        while time.monotonic() < deadline:
            runs = _runs(uri)
            if "end-c" in runs and runs["end-c"][0].info.status == "FINISHED":
                break
            time.sleep(0.2)
        assert runs["end-c"][0].info.status == "FINISHED", runs
        assert _history(uri, runs["end-c"][0].info.run_id, "throughput") == [(0, 3.0)]
    finally:
        live.close()


def test_the_writer_holds_at_most_its_capacity_and_counts_what_it_drops(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    live = LiveLog(uri, tmp_path / "art", capacity=2, period_s=120.0)  # "end-c" is next due about 116 s on
    t = time.time()
    dropped = 0
    for i in range(3):  # one at a time: the service's buffer never fills, the writer's does at the third
        live.record("end-c", "n0", t + i, {"throughput": float(i)}, t)
        dropped += live.flush().dropped
    dropped += live.close().dropped  # writes what it holds
    assert dropped == 1
    assert _history(uri, _runs(uri)["end-c"][0].info.run_id, "throughput") == [(1, 0.5)]


def test_a_job_with_two_running_runs_is_indexed_by_its_newest(tmp_path):
    """A crash between creating a job's run and indexing it leaves two running: samples go on into the newer."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    runs = LiveRuns(uri, tmp_path / "art")
    newer = runs.client.create_run(runs.experiment_id, start_time=2_000_000, tags={LIVE_JOB_TAG: "j"}).info.run_id
    runs.client.create_run(runs.experiment_id, start_time=1_000_000, tags={LIVE_JOB_TAG: "j"})
    assert LiveRuns(uri, tmp_path / "art").known() == {"j": newer}


def test_an_ended_job_is_forgotten_and_a_job_of_its_id_gets_a_run_of_its_own(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    runs = LiveRuns(uri, tmp_path / "art")
    assert runs.log_job("j", []) == 0 and runs.known() == {}  # nothing to log: no run
    at = 1_800_000_000.5
    runs.log_job("j", [LiveSample("j", "n0", at, 3, {"throughput": 1.0})])
    first = runs.known()["j"]
    runs.end("j", "finished")
    assert runs.known() == {}
    runs.log_job("j", [LiveSample("j", "n1", at + 1, 0, {"throughput": 2.0})])  # registered again, on n1
    second = runs.known()["j"]
    assert second != first
    assert [runs.client.get_run(r).info.status for r in (first, second)] == ["FINISHED", "RUNNING"]
    assert runs.client.get_run(second).data.tags["adlrec.node"] == "n1"
    (point,) = runs.client.get_metric_history(first, "throughput")
    assert (point.timestamp, point.step, point.value) == (1_800_000_000_500, 3, 1.0)  # MLflow's milliseconds


def test_the_write_behind_hands_live_samples_over_every_flush_and_counts_what_the_writer_did(tmp_path):
    from adlrec.service.flusher import WriteBehind
    from adlrec.service.metrics import Metrics
    from adlrec.service.state import JobState
    from adlrec.service.store import JobStore
    from tests.service_helpers import service_settings

    uri = service_settings(tmp_path).resolved_tracking_uri  # a copy of a migrated MLflow store: no migration here
    store = JobStore(f"sqlite:///{tmp_path / 'jobs.db'}")
    try:
        state = JobState(store, time.time)
        state.load()
        live = LiveLog(uri, tmp_path / "art", capacity=2, period_s=120.0)  # a running job's samples: due in ~2 min
        t = time.time()
        for i in range(3):  # a buffer of 2: the oldest is dropped
            live.record("k", "n0", t + i, {"throughput": float(i)}, t)
        live.end("k", "finished")  # written at the writer's next tick
        metrics = Metrics()
        writer = WriteBehind(state, metrics, live, every_s=0.05)
        writer.start()
        try:
            deadline = time.monotonic() + 120  # a bound on waiting (the writer imports MLflow), not a timing assertion
            while metrics.value("adlrec_live_metrics_logged_total") < 2:  # throughput and heartbeats, once
                assert time.monotonic() < deadline, "the write-behind's flushes handed nothing to the writer"
                time.sleep(0.05)
            live.record("m", "n0", t, {"throughput": 5.0}, t)  # not due before the stop: written by it
        finally:
            writer.stop()
        counted = [
            metrics.value(f"adlrec_live_{n}_total") for n in ("metrics_logged", "log_failures", "samples_dropped")
        ]
        assert counted == [4, 0, 1]
    finally:
        store.close()
