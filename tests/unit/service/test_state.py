"""The open jobs in memory over a real SQLite store: heartbeats reach the store only when flushed."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from adlrec.schemas import AllocationPlan, AllocationRequest
from adlrec.service.records import ACTIVE, EXPIRED, FINISHED, JobSpec, MeasuredPoint, NodeInfo, PlanRecord
from adlrec.service.state import JobState
from adlrec.service.store import JobNotActive, JobStore, UnknownJob
from tests.service_helpers import ManualClock

DEFAULT = NodeInfo("default", 8, 16_000)


@pytest.fixture
def opened(tmp_path):
    clock = ManualClock()
    store = JobStore(f"sqlite:///{tmp_path / 'jobs.db'}", clock=clock)
    state = JobState(store, clock)
    state.load()
    yield state, store, clock
    store.close()


def spec(job_id: str, node: str = "n1") -> JobSpec:
    return JobSpec(job_id=job_id, node=node, curve=(10.0, 50.0, 90.0, 100.0), curve_source="explicit")


def test_a_heartbeat_is_seen_at_once_and_stored_at_the_flush(opened):
    state, store, clock = opened
    state.register(spec("a"), DEFAULT)
    clock.advance(5)
    beat = state.beat("a", 40.0, 2, 0.5)
    state.beat("a", 60.0, 2, 0.3)
    assert beat.job.last_seen == clock() and beat.assignment.workers == 2 and not beat.revived
    assert state.points("a") == [MeasuredPoint(2, 50.0, 2, pytest.approx(0.4))]
    assert state.job("a").reported_throughput == 60.0
    assert store.points("a") == [] and store.job("a").last_seen == clock() - 5  # not written yet
    assert state.flush() == 1 and state.flush() == 0  # once: nothing changed since
    assert store.points("a") == state.points("a") and store.job("a") == state.job("a")


def test_heartbeats_keep_a_running_mean_per_worker_count(opened):
    _, store, clock = opened
    state = JobState(store, clock, measure_alpha=0.25)  # the newest beat weighs a quarter
    state.load()
    state.register(spec("a"), DEFAULT)
    clock.advance(5)
    first = state.beat("a", 40.0, 2, 0.5)
    state.beat("a", 60.0, 2, 0.3)
    state.beat("a", 95.0, 3, None)
    state.beat("a", 0.0, 4, None)  # nothing measured yet: no point at 4
    assert first.job.last_seen == clock() and first.job.reported_workers == 2 and not first.revived
    assert first.assignment.plan_id is None and first.assignment.workers == 2  # no plan yet: keep what it runs
    state.flush()
    (p2, p3) = store.points("a")
    assert (p2.workers, p2.throughput, p2.samples, p2.data_wait) == (2, 45.0, 2, pytest.approx(0.45))
    assert (p3.workers, p3.throughput, p3.samples, p3.data_wait) == (3, 95.0, 1, None)  # unknown, not 0
    job = store.job("a")
    assert (job.last_seen, job.reported_workers, job.reported_throughput) == (clock(), 4, 0.0)


def test_unknown_and_finished_jobs_are_refused(opened):
    state, store, _ = opened
    assert state.beat("nope", 1.0, 1, None) is None
    with pytest.raises(UnknownJob, match="no job 'nope': register it first"):
        state.check_closed("nope")
    state.register(spec("a"), DEFAULT)
    assert state.finish("a").status == FINISHED
    assert state.beat("a", 1.0, 1, None) is None
    with pytest.raises(JobNotActive, match="job 'a' has finished; register it again to get workers"):
        state.check_closed("a")
    assert state.flush() == 0 and store.points("a") == [] and store.job("a").status == FINISHED


def test_a_failed_flush_loses_nothing_and_the_next_one_writes_it(opened):
    state, store, _ = opened
    state.register(spec("a"), DEFAULT)
    state.beat("a", 70.0, 1, None)
    with store.engine.begin() as c:  # the database refuses every update of a job, for real
        c.execute(text("CREATE TRIGGER refuse BEFORE UPDATE ON adlrec_jobs BEGIN SELECT RAISE(ABORT, 'no'); END"))
    with pytest.raises(DBAPIError):
        state.flush()
    assert store.points("a") == []  # the transaction rolled back whole: no point without its job row
    with store.engine.begin() as c:
        c.execute(text("DROP TRIGGER refuse"))
    assert state.flush() == 1
    assert store.points("a")[0].throughput == 70.0 and store.job("a").reported_throughput == 70.0


def test_expiry_and_revival_happen_in_memory_and_reach_the_store(opened):
    state, store, clock = opened
    state.register(spec("a"), DEFAULT)
    state.register(spec("b"), DEFAULT)
    clock.advance(50)
    state.beat("b", None, None, None)
    clock.advance(20)
    assert state.expire(60) == ["a"]
    assert [j.job_id for j in state.snapshot().jobs] == ["b"]
    state.flush()
    assert store.job("a").status == EXPIRED
    assert state.beat("a", None, 1, None).revived and state.job("a").status == ACTIVE
    state.flush()
    assert store.job("a").status == ACTIVE


def test_a_restart_after_the_ttl_expires_no_job_for_the_service_s_own_silence(tmp_path):
    clock = ManualClock()
    store = JobStore(f"sqlite:///{tmp_path / 'jobs.db'}", clock=clock)
    first = JobState(store, clock)
    first.load()
    first.register(spec("a"), DEFAULT)
    clock.advance(600)  # the service was down for 10 minutes, past a 120 s TTL
    again = JobState(store, clock)
    again.load()
    assert again.expire(120) == []  # was ["a"]: every job, and its MLflow run split in two
    clock.advance(121)
    assert again.expire(120) == ["a"]  # silent since the start for longer than the TTL: now it is
    store.close()


def test_a_registration_the_store_kept_waiting_is_silent_from_when_it_was_answered(opened):
    state, store, clock = opened

    class Slow:  # a store that takes 30 s (a lock held elsewhere) to register
        def __getattr__(self, name):
            return getattr(store, name)

        def register(self, *args):
            out = store.register(*args)
            clock.advance(30)
            return out

    state.store = Slow()
    job, _ = state.register(spec("a"), DEFAULT)
    assert job.last_seen == clock() and job.registered_at == clock() - 30
    clock.advance(20)
    assert state.expire(40) == []  # was ["a"]: expired a second after its 201
    state.flush()
    assert store.job("a").last_seen == clock() - 20


def test_finish_writes_the_last_heartbeats_and_a_finished_job_is_refused(opened):
    state, store, _ = opened
    state.register(spec("a"), DEFAULT)
    state.beat("a", 80.0, 3, None)
    assert state.finish("a").status == FINISHED
    assert store.points("a")[0].throughput == 80.0 and store.job("a").status == FINISHED
    assert state.beat("a", 1.0, 1, None) is None
    with pytest.raises(JobNotActive):
        state.check_closed("a")
    with pytest.raises(UnknownJob, match="register it first"):
        state.check_closed("ghost")


def test_registering_again_drops_pending_measurements_and_a_restart_reloads_open_jobs(opened, tmp_path):
    state, store, clock = opened
    state.register(spec("a"), DEFAULT)
    state.beat("a", 80.0, 3, None)
    state.register(spec("a"), DEFAULT)  # its curve may have changed: measurements are forgotten
    state.flush()
    assert state.points("a") == [] and store.points("a") == []
    state.register(spec("b"), DEFAULT)
    state.beat("b", 90.0, 2, 0.1)
    state.flush()
    again = JobState(JobStore(store.url, clock=clock), clock)
    again.load()
    assert [j.job_id for j in again.jobs(status=ACTIVE)] == ["a", "b"]
    assert again.points("b") == [MeasuredPoint(2, 90.0, 1, 0.1)] and again.job("b").reported_throughput == 90.0
    again.store.close()


def test_a_data_wait_share_first_reported_later_becomes_the_point_s_share(opened):
    state, _, _ = opened
    state.register(spec("a"), DEFAULT)
    state.beat("a", 40.0, 2, None)
    state.beat("a", 60.0, 2, 0.2)  # unknown until now: the mean starts here, not at an assumed 0
    assert state.points("a") == [MeasuredPoint(2, 50.0, 2, 0.2)]


def test_a_heartbeat_without_a_data_wait_share_keeps_the_point_s_share(opened):
    state, store, _ = opened
    state.register(spec("a"), DEFAULT)
    state.beat("a", 40.0, 2, 0.4)
    state.beat("a", 60.0, 2, None)  # no share this time: unknown, so the mean of the ones sent stays
    assert state.points("a") == [MeasuredPoint(2, 50.0, 2, 0.4)]
    state.flush()
    assert store.points("a") == state.points("a")


def test_measured_points_are_listed_by_worker_count_as_the_store_lists_them(opened):
    state, store, _ = opened
    state.register(spec("a"), DEFAULT)
    for workers in (3, 1, 2):  # a job resized down, then up
        state.beat("a", 10.0 * workers, workers, None)
    assert [p.workers for p in state.points("a")] == [1, 2, 3]
    state.flush()
    assert store.points("a") == state.points("a")  # the same list before and after a restart


def test_a_heartbeat_without_a_worker_count_keeps_the_one_last_reported(opened):
    state, store, _ = opened
    state.register(spec("a"), DEFAULT)
    state.beat("a", 50.0, 2, 0.3)
    beat = state.beat("a", None, None, None)
    assert beat.job.reported_workers == 2 and beat.assignment.workers == 2  # not its 8 requested, clamped to 3
    assert (beat.job.reported_throughput, beat.job.data_wait) == (None, None)  # what this beat measured: nothing
    state.flush()
    assert store.job("a").reported_workers == 2


def test_without_a_plan_a_job_is_told_what_it_runs_within_its_bounds(opened):
    state, _, _ = opened
    state.register(replace(spec("a"), min_workers=1), DEFAULT)  # a curve of 4 points: at most 3 workers
    assert state.beat("a", None, None, None).assignment.workers == 3  # it asked for 8
    assert state.beat("a", None, 0, None).assignment.workers == 1  # it runs 0, below its minimum


def test_a_job_is_expired_only_once_silent_for_longer_than_the_ttl(opened):
    state, _, clock = opened
    state.register(spec("a"), DEFAULT)
    clock.advance(60)
    assert state.expire(60) == [] and state.active_count("n1") == 1  # silent for exactly the TTL
    clock.advance(0.5)
    assert state.expire(60) == ["a"]
    assert state.active_count("n1") == 0 and state.held_counts() == {ACTIVE: 0, EXPIRED: 1}
    clock.advance(60)
    assert state.expire(60) == []  # expired once: not counted (or its run ended) again at every recompute


def test_registering_again_moves_the_job_to_the_end_as_the_store_does(opened):
    state, store, _ = opened
    for job_id in ("a", "b", "a"):
        state.register(spec(job_id), DEFAULT)
    assert [j.job_id for j in state.jobs(status=ACTIVE)] == ["b", "a"]
    assert [j.job_id for j in state.snapshot().jobs] == ["b", "a"]  # the allocator's order: ties go to b
    assert [j.job_id for j in store.jobs()] == ["b", "a"]


def plan(plan_id: int, workers: int) -> PlanRecord:
    """Node n1's plan giving job a ``workers``."""
    p = AllocationPlan("optimal", {"a": workers}, {"a": 1.0}, 1.0, 0.0, 0, 0, {})
    return PlanRecord(plan_id, "n1", 0.0, p, AllocationRequest(cores=1, memory_mb=0, jobs=()))


def test_an_older_plan_stored_late_does_not_replace_the_newer_current_one(opened):
    state, _, _ = opened
    state.register(spec("a"), DEFAULT)
    state.plans_stored([plan(5, 3)])
    state.plans_stored([plan(4, 1)])
    assert state.current_plans()["n1"].plan_id == 5
    a = state.beat("a", None, None, None).assignment
    assert (a.plan_id, a.workers) == (5, 3)


def test_listings_and_counts_take_open_jobs_from_memory_before_the_flush(opened):
    state, store, clock = opened
    state.register(spec("a"), DEFAULT)
    state.register(spec("b"), DEFAULT)
    state.register(spec("c", node="n2"), DEFAULT)
    state.finish("b")
    clock.advance(61)
    state.expire(60)  # not flushed: the store still says active
    assert [(j.job_id, j.status) for j in state.jobs()] == [("a", EXPIRED), ("b", FINISHED), ("c", EXPIRED)]
    assert [j.status for j in state.jobs(node="n1")] == [EXPIRED, FINISHED]
    assert [j.job_id for j in state.jobs(status=EXPIRED, node="n2")] == ["c"]  # memory's answer, by node too
    assert state.counts() == {ACTIVE: 0, EXPIRED: 2, FINISHED: 1, "plans": 0}
    assert store.counts()[ACTIVE] == 2


def test_a_job_another_process_registered_is_held_from_its_first_heartbeat(opened):
    state, store, clock = opened
    other = JobState(JobStore(store.url, clock=clock), clock)  # a second service on the same database
    other.load()
    other.register(spec("a"), DEFAULT)
    other.beat("a", 70.0, 2, None)
    other.flush()
    assert state.beat("a", 80.0, 2, None) is None  # not held here yet
    state.check_closed("a")  # active in the store: adopted with its points
    assert state.beat("a", 80.0, 2, None).job.reported_workers == 2
    assert state.points("a") == [MeasuredPoint(2, 75.0, 2, None)]
    other.store.close()


def test_an_expired_job_is_not_told_the_count_of_the_plan_it_left(opened):
    state, _, clock = opened
    state.register(replace(spec("a"), requested_workers=1), DEFAULT)
    state.plans_stored([plan(5, 3)])
    clock.advance(61)
    state.expire(60)  # until the next plan, its node's current one still counts 3 for it
    a = state.assignment(state.job("a"))
    assert (a.workers, a.plan_id, a.status) == (1, None, EXPIRED)


def test_new_curves_reach_the_plans_at_once_and_the_store(opened):
    """After the model moved, the allocator plans with the new curve (memory), and a restart reads it (store)."""
    state, store, _ = opened
    state.register(spec("a"), DEFAULT)
    state.update_curves({"a": ((5.0, 6.0, 7.0, 8.0), "adlrec-throughput v3")})
    (job,) = state.snapshot().jobs
    assert (job.spec.curve, job.spec.curve_source) == ((5.0, 6.0, 7.0, 8.0), "adlrec-throughput v3")
    assert state.job("a").spec == store.job("a").spec
