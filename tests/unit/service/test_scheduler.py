"""The recompute runner: what it stores, and that a failure in the background is logged and counted."""

from __future__ import annotations

import logging
import shutil

from adlrec.service.metrics import Metrics
from adlrec.service.predictor import Predictor
from adlrec.service.records import JobSpec, NodeInfo
from adlrec.service.scheduler import RECOMPUTE_NICE, RecomputeConfig, Recomputer
from adlrec.service.state import JobState
from adlrec.service.store import JobStore
from tests.service_helpers import PROBE, ManualClock

CONFIG = RecomputeConfig("optimal", "busy_gpus", 0.0, ttl_s=60, interval_s=3600, debounce_s=3600)


def runner(tmp_path, clock=None):
    clock = clock or ManualClock()
    store = JobStore(f"sqlite:///{tmp_path / 'db' / 'jobs.db'}", clock=clock)
    state = JobState(store, clock)
    state.load()
    predictor = Predictor(f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "artifacts")
    return Recomputer(state, predictor, CONFIG, Metrics()), store


def test_recompute_expires_plans_and_counts(tmp_path, caplog):
    clock = ManualClock()
    rec, store = runner(tmp_path, clock)
    rec.state.register(JobSpec("a", "n1", (1.0, 5.0, 9.0), "explicit"), NodeInfo("d", 4, 1000))
    rec.state.register(JobSpec("b", "n2", (1.0, 5.0, 9.0), "explicit"), NodeInfo("d", 4, 1000))
    for job in ("f1", "f2", "f3", "f4", "f5"):  # 5 main processes on 4 cores: no plan fits
        rec.state.register(JobSpec(job, "full", (1.0, 2.0), "explicit"), NodeInfo("d", 4, 1000))
    with caplog.at_level(logging.WARNING, logger="adlrec.service"):
        full, plan, _ = rec.recompute("test")  # by node name
    assert caplog.messages == [
        "node full: no plan fits (4 cores cannot hold the jobs' 5 main processes and 0 minimum workers): "
        "every job gets its minimum workers"
    ]
    assert plan.plan.workers == {"a": 2} and rec.recompute("test") == []
    assert (full.node, full.plan.policy, set(full.plan.workers.values())) == ("full", "minimum", {0})
    assert rec.metrics.value("adlrec_plans_stored_total") == 3  # one per node whose plan changed
    assert rec.metrics.value("adlrec_infeasible_total") == 2  # "full", at each of the two recomputes
    assert "cannot hold the jobs' 5 main processes" in rec.state.problem("full")
    assert rec.metrics.value("adlrec_recompute_seconds_last") > 0
    clock.advance(61)
    released, empty, _ = rec.recompute("test")
    assert empty.plan.workers == {} and empty.plan_id > plan.plan_id
    assert (released.node, released.plan.workers) == ("full", {})  # its last job gone: a plan fits again
    assert rec.metrics.value("adlrec_recomputes_total", trigger="test") == 3
    assert rec.metrics.value("adlrec_jobs_expired_total") == 7
    assert rec.metrics.value("adlrec_plans_stored_total") == 6
    assert store.job("a").status == "expired"  # the recompute flushed the expiry
    store.close()


def test_a_background_failure_is_logged_with_its_traceback_and_counted(tmp_path, caplog):
    rec, store = runner(tmp_path)
    store.engine.dispose()
    shutil.rmtree(tmp_path / "db")  # the database is gone: every statement fails
    with caplog.at_level(logging.ERROR, logger="adlrec.service"):
        rec._run("interval")  # what the scheduler calls; it must not raise
    (record,) = caplog.records
    assert "recompute (interval) failed" in record.getMessage() and record.exc_info is not None
    assert rec.metrics.value("adlrec_recompute_failures_total") == 1


def test_a_tick_refreshes_the_model_first_and_a_refresh_that_fails_still_lets_the_recompute_run(tmp_path, caplog):
    import time

    rec, store = runner(tmp_path)
    rec.own_process = False

    def refresh_fails() -> None:
        raise RuntimeError("the registry's answer made no sense")

    rec.refresh_model = refresh_fails
    with caplog.at_level(logging.ERROR, logger="adlrec.service"):
        rec.start()  # its first periodic tick runs at once
        try:
            deadline = time.monotonic() + 30
            while rec.metrics.value("adlrec_recomputes_total", trigger="interval") < 1:
                assert time.monotonic() < deadline, "the first tick did not recompute"
                time.sleep(0.02)
        finally:
            rec.stop()
    (record,) = caplog.records
    assert "refreshing the throughput model failed; keeping analytic" in record.getMessage() and record.exc_info
    store.close()


def test_a_refresh_that_finds_the_model_unchanged_predicts_no_curve_again(tmp_path):
    rec, store = runner(tmp_path)
    spec = JobSpec("p", "n1", (1.0, 2.0), "analytic", features=PROBE)  # a curve the analytic model did not give
    rec.state.register(spec, NodeInfo("d", 4, 1000))
    rec.refresh_model()  # no model registered: the analytic fallback, as at start
    assert rec.predictor.info.source == "analytic"
    assert rec.state.job("p").spec.curve == (1.0, 2.0) and store.job("p").spec.curve == (1.0, 2.0)
    store.close()


def test_stop_waits_for_the_recompute_that_runs(tmp_path):
    """The service stops its store after the scheduler: a recompute still running then wrote to a closed store."""
    import threading
    import time

    rec, store = runner(tmp_path)
    rec.own_process = False
    started, finished = threading.Event(), threading.Event()

    def slow(trigger: str = "manual") -> None:
        started.set()
        time.sleep(0.3)
        finished.set()

    rec.recompute = slow
    rec.start()  # its first periodic recompute runs at once
    assert started.wait(30)
    rec.stop()
    assert finished.is_set()
    store.close()


def test_started_it_plans_in_a_process_of_its_own_and_survives_that_process_dying(tmp_path, caplog):
    import os
    import signal
    import time

    rec, store = runner(tmp_path)
    for job, curve in (("a", (1.0, 5.0, 9.0)), ("b", (2.0, 3.0, 3.5))):
        rec.state.register(JobSpec(job, "n", curve, "explicit"), NodeInfo("d", 4, 1000))
    in_thread = Recomputer(rec.state, rec.predictor, CONFIG, Metrics(), own_process=False)

    def same_as_in_thread() -> bool:
        snap = rec.state.snapshot()
        return rec._compute(snap) == in_thread._compute(snap)

    rec.start()
    try:
        rec._warm.result()  # until the process is up, plans are computed here
        pid = rec._pool.submit(os.getpid).result()
        assert pid != os.getpid()
        # background work: it yields the cores to the service's event loop
        assert rec._pool.submit(os.nice, 0).result() == min(19, os.nice(0) + RECOMPUTE_NICE) > min(18, os.nice(0))
        assert same_as_in_thread()
        # The scheduler's first recompute (at start) is over: it refreshes the model before it takes the
        # lock, so the lock alone did not say so, and a recompute of its after the kill counted a 2nd failure.
        deadline = time.monotonic() + 60
        while rec.metrics.value("adlrec_recomputes_total", trigger="interval") < 1:
            assert time.monotonic() < deadline, "the scheduler's first recompute did not run"
            time.sleep(0.02)
        os.kill(pid, signal.SIGKILL)
        with caplog.at_level(logging.ERROR, logger="adlrec.service"):
            assert same_as_in_thread()  # computed here meanwhile
        assert rec.metrics.value("adlrec_recompute_process_failures_total") == 1
        assert "\nadlrec_recompute_process_failures_total 1\n" in rec.metrics.render()  # what a scraper reads
        assert any("the recompute process died" in r.getMessage() and r.exc_info for r in caplog.records)
        rec._warm.result()
        again = rec._pool.submit(os.getpid).result()
        assert again not in (pid, os.getpid())  # a new process took over
        assert same_as_in_thread()
    finally:
        rec.stop()
    assert rec._pool is None
    store.close()


def test_ticks_skipped_while_a_slow_recompute_runs_are_counted_and_said_once(tmp_path, caplog):
    """APScheduler logged a WARNING at every tick skipped because the last recompute still ran."""
    import threading
    import time

    rec, store = runner(tmp_path)
    rec.config = RecomputeConfig("optimal", "busy_gpus", 0.0, ttl_s=60, interval_s=0.05, debounce_s=3600)
    rec.own_process = False
    running, most, lock = [0], [0], threading.Lock()

    def slow(trigger: str = "manual") -> None:  # a recompute 8 intervals long
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.4)
        with lock:
            running[0] -= 1

    rec.recompute = slow
    with caplog.at_level(logging.WARNING):
        rec.start()
        time.sleep(1.5)
        rec.stop()
    skipped = rec.metrics.value("adlrec_recomputes_skipped_total", trigger="interval")
    assert skipped >= 2, skipped  # a tick runs at most every 0.4 s; the rest of 1.5 s / 0.05 s were skipped
    assert most[0] == 1  # never a tick beside a running one, waiting for its lock to recompute again at once
    said = [r.getMessage() for r in caplog.records]
    assert not any("maximum number of running instances" in m for m in said), said
    (warning,) = [m for m in said if "came due while the one before it still ran" in m]
    assert "a recompute (interval)" in warning and "0.05 s here" in warning
    store.close()


def test_a_registration_during_a_recompute_is_planned_after_it_not_at_the_next_tick(tmp_path):
    """The recompute a register or finish asks for came due while the one before it still ran (one slower
    than the debounce) and APScheduler skipped it: the job waited for the next periodic tick (30 s)."""
    import time

    rec, store = runner(tmp_path)
    rec.config = RecomputeConfig("optimal", "busy_gpus", 0.0, ttl_s=60, interval_s=3600, debounce_s=0.05)
    rec.own_process = False
    rec._compute = lambda snapshot: time.sleep(0.6) or []  # a slow recompute, still under its lock
    rec.start()  # its first periodic recompute runs at once, for 0.6 s
    try:
        rec.poke("register")  # due at 0.05 s: waits for the first, then runs until about 1.2 s
        time.sleep(0.3)
        rec.poke("register")  # due at 0.35 s, while the one above is still waiting or running
        deadline = time.monotonic() + 30
        while rec.metrics.value("adlrec_recomputes_total", trigger="register") < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        rec.stop()
    assert rec.metrics.value("adlrec_recomputes_total", trigger="register") == 2
    assert rec.metrics.value("adlrec_recomputes_skipped_total", trigger="register/finish") == 0
    store.close()
