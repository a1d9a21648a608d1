"""The write-behind thread's log while the job store is down: a traceback once, then a line a minute."""

from __future__ import annotations

import logging
import shutil

from adlrec.service.flusher import WriteBehind
from adlrec.service.metrics import Metrics
from adlrec.service.records import JobSpec, NodeInfo
from adlrec.service.state import JobState
from adlrec.service.store import JobStore
from tests.service_helpers import ManualClock


def test_a_store_that_stays_down_is_logged_once_then_a_line_a_minute_and_its_return_is_said(tmp_path, caplog):
    folder = tmp_path / "store"
    clock = ManualClock()
    store = JobStore(f"sqlite:///{folder / 'jobs.db'}", clock=clock)
    try:
        state = JobState(store, clock)
        state.load()
        state.register(JobSpec("a", "n1", (10.0, 50.0, 90.0), "explicit"), NodeInfo("n1", 8, 16_000))
        metrics = Metrics()
        writer = WriteBehind(state, metrics, repeat_s=60.0, clock=clock)
        saved = tmp_path / "saved"
        shutil.copytree(folder, saved)  # the database with its journal, to put back
        shutil.rmtree(folder)  # the store stops answering: its folder gone, its pooled connections dropped
        store.close()
        with caplog.at_level(logging.INFO, logger="adlrec.service"):
            folder.mkdir()
            (folder / "jobs.db").write_text("not a database")  # first another failure: a new streak follows it
            state.beat("a", 40.0, 2, 0.5)
            writer.flush_store()
            shutil.rmtree(folder)
            store.close()
            for _ in range(121):  # two minutes of flushes, one a second, each with a heartbeat to write
                state.beat("a", 40.0, 2, 0.5)
                writer.flush_store()
                clock.advance(1.0)
            failed = [r for r in caplog.records if "store" in r.getMessage()]
            assert [r.levelno for r in failed] == [logging.ERROR, logging.ERROR, logging.WARNING, logging.WARNING]
            assert all(r.exc_info is not None for r in failed[:2]) and all(r.exc_info is None for r in failed[2:])
            assert "still fails (61 flushes over 60 s)" in failed[2].getMessage()
            assert "still fails (121 flushes over 120 s)" in failed[3].getMessage()
            assert "OperationalError" in failed[3].getMessage()
            assert metrics.value("adlrec_store_flush_failures_total") == 122
            caplog.clear()
            shutil.copytree(saved, folder)  # it answers again
            writer.flush_store()
            assert [r.getMessage() for r in caplog.records] == [
                "writing heartbeats to the store works again, after 121 failed flushes over 121 s"
            ]
            caplog.clear()
            writer.flush_store()
            assert caplog.records == []  # said once: the streak ended with it
        assert store.job("a").reported_throughput == 40.0  # what memory held went with the first flush that worked
    finally:
        store.close()


def test_each_flush_is_counted_with_the_job_rows_it_wrote(tmp_path):
    clock = ManualClock()
    store = JobStore(f"sqlite:///{tmp_path / 'jobs.db'}", clock=clock)
    try:
        state = JobState(store, clock)
        state.load()
        for job in ("a", "b", "c"):
            state.register(JobSpec(job, "n1", (10.0, 50.0, 90.0), "explicit"), NodeInfo("n1", 8, 16_000))
            state.beat(job, 40.0, 2, 0.5)
        metrics = Metrics()
        writer = WriteBehind(state, metrics, clock=clock)
        writer.flush_store()
        writer.flush_store()  # nothing new to write
        assert metrics.value("adlrec_store_flushes_total") == 2
        assert metrics.value("adlrec_store_flushed_jobs_total") == 3
    finally:
        store.close()
