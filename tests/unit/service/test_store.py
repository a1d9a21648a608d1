"""The job store on a real database: SQLite always, PostgreSQL too when ADLREC_TEST_POSTGRES_URL is set.

Each PostgreSQL test starts from empty tables: they are dropped first (use a throwaway database).
"""

from __future__ import annotations

import os
from dataclasses import replace

import pytest
from sqlalchemy import Column, Float, ForeignKey, Integer, MetaData, String, Table
from sqlalchemy.exc import IntegrityError

from adlrec.service.recompute import compute_plans
from adlrec.service.records import ACTIVE, EXPIRED, FINISHED, Assignment, JobSpec, MeasuredPoint, NodeInfo
from adlrec.service.state import Beat, JobState
from adlrec.service.store import JobStore, UnknownJob, UnknownNode, assignment, metadata
from tests.service_helpers import ManualClock

PG_URL = os.environ.get("ADLREC_TEST_POSTGRES_URL")
DEFAULT = NodeInfo("default", 8, 16_000)


@pytest.fixture(params=["sqlite", "postgresql"])
def make_store(request, tmp_path):
    """Open (and reopen) a store on one database, as a restart would."""
    if request.param == "postgresql":
        if not PG_URL:
            pytest.skip("set ADLREC_TEST_POSTGRES_URL to run the store tests against PostgreSQL")
        from sqlalchemy import create_engine

        url = PG_URL
        eng = create_engine(url)
        metadata.drop_all(eng)  # each test starts from empty tables
        eng.dispose()
    else:
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
    opened = []

    def make(clock=None):
        s = JobStore(url, clock=clock or ManualClock())
        opened.append(s)
        return s

    yield make
    for s in opened:
        s.close()


def spec(job_id: str, node: str = "n1", curve=(10.0, 50.0, 90.0, 100.0), **kw) -> JobSpec:
    return JobSpec(job_id=job_id, node=node, curve=curve, curve_source="explicit", **kw)


def beat(store: JobStore, job_id: str, throughput: float | None, workers: int | None, wait=None) -> Beat:
    """One heartbeat as the service takes it: a JobState loaded from the store (as at a start) takes
    it in memory and flushes it to the store."""
    state = JobState(store, store.clock, measure_alpha=0.5)
    state.load()
    b = state.beat(job_id, throughput, workers, wait)
    assert b is not None, f"{job_id!r} is not an open job"
    state.flush()
    return b


def test_register_creates_the_node_with_default_budgets_and_keeps_order(make_store):
    store = make_store()
    a, created = store.register(spec("a"), DEFAULT)
    store.register(spec("b"), DEFAULT)
    assert created and a.status == ACTIVE and a.spec.curve == (10.0, 50.0, 90.0, 100.0)
    assert store.node("n1") == NodeInfo("n1", 8, 16_000)
    assert [j.job_id for j in store.jobs(status=ACTIVE)] == ["a", "b"]
    store.put_node(NodeInfo("n2", 2, 500))  # a node declared first keeps its budgets when a job registers on it
    store.register(spec("c", node="n2"), DEFAULT)
    assert store.node("n2") == NodeInfo("n2", 2, 500)


def test_registering_again_replaces_the_spec_and_forgets_measurements(make_store):
    store = make_store()
    a, _ = store.register(spec("a"), DEFAULT)
    store.write_beats(
        [replace(a, reported_workers=2, reported_throughput=70.0, data_wait=0.2)],
        [("a", MeasuredPoint(2, 70.0, 1, 0.2))],
    )
    assert store.points("a") == [MeasuredPoint(2, 70.0, 1, 0.2)] and store.job("a").reported_workers == 2
    assert store.job("a").data_wait == 0.2
    job, created = store.register(spec("a", gpus=2), DEFAULT)
    assert not created and job.spec.gpus == 2 and store.points("a") == []
    assert (job.reported_workers, job.reported_throughput) == (None, None) and store.job("a") == job
    assert job.data_wait is None


def test_silent_jobs_expire_and_a_heartbeat_brings_them_back(make_store):
    clock = ManualClock()
    store = make_store(clock)
    store.register(spec("a"), DEFAULT)
    store.register(spec("b"), DEFAULT)
    state = JobState(store, clock)
    state.load()
    clock.advance(50)
    assert not state.beat("b", None, None, None).revived
    clock.advance(20)
    assert state.expire(60) == ["a"] and store.job("a").status == ACTIVE  # in memory until the flush
    state.flush()
    assert store.job("a").status == EXPIRED and store.job("b").status == ACTIVE
    assert [j.job_id for j in store.snapshot().jobs] == ["b"]
    back = beat(store, "a", None, 1)  # a JobState loaded after the expiry holds "a" as expired
    assert back.revived and back.job.status == ACTIVE
    assert store.job("a").status == ACTIVE and store.job("a").last_seen == clock()


def test_plan_ids_only_grow_and_history_pages_newest_first(make_store):
    store = make_store()
    store.register(spec("a"), DEFAULT)
    ids = []
    for w in range(1, 4):
        beat(store, "a", 1000.0 * w, w)  # each measurement makes a different worker count best
        stored = store.add_plans(compute_plans(store.snapshot(), "optimal", "busy_gpus", 0.0))
        ids += [p.plan_id for p in stored]
    assert ids == sorted(ids) and len(ids) == 3 and store.counts()["plans"] == 3  # what /metrics says
    page1 = store.plans(node="n1", limit=2)
    page2 = store.plans(node="n1", before=page1[-1].plan_id, limit=2)
    assert [p.plan_id for p in page1 + page2] == ids[::-1]
    assert store.latest_plan("n1").plan_id == ids[-1]
    a = beat(store, "a", None, None).assignment  # answered from the node's latest stored plan
    assert a.plan_id == ids[-1] and a.workers == store.latest_plan("n1").plan.workers["a"]


def test_everything_survives_reopening_and_ids_keep_growing(make_store):
    clock = ManualClock()
    store = make_store(clock)
    store.register(spec("a"), DEFAULT)
    beat(store, "a", 77.0, 1, 0.1)
    (first,) = store.add_plans(compute_plans(store.snapshot(), "optimal", "busy_gpus", 0.0))
    store.finish("a")
    store.add_plans(compute_plans(store.snapshot(), "optimal", "busy_gpus", 0.0))  # the empty plan
    store.close()

    again = make_store(clock)
    assert again.job("a").status == FINISHED and again.points("a")[0].throughput == 77.0
    assert [p.plan_id for p in again.plans()][-1] == first.plan_id
    again.register(spec("b"), DEFAULT)
    (nxt,) = again.add_plans(compute_plans(again.snapshot(), "optimal", "busy_gpus", 0.0))
    assert nxt.plan_id > max(p.plan_id for p in again.plans() if p.plan_id != nxt.plan_id)


def _as_an_older_adlrec_wrote_it(store: JobStore) -> None:
    """Put back the points table of adlrec before the data-wait share could be unknown (NOT NULL)."""
    with store.engine.begin() as c:
        if store.engine.dialect.name == "sqlite":
            old = MetaData()
            for t in (metadata.tables["adlrec_nodes"], metadata.tables["adlrec_jobs"]):
                t.to_metadata(old)
            Table(
                "adlrec_points_old",
                old,
                Column("job_id", String(128), ForeignKey("adlrec_jobs.job_id", ondelete="CASCADE"), primary_key=True),
                Column("workers", Integer, primary_key=True),
                Column("throughput", Float, nullable=False),
                Column("samples", Integer, nullable=False),
                Column("data_wait", Float, nullable=False),
            ).create(c)
            c.exec_driver_sql("INSERT INTO adlrec_points_old SELECT * FROM adlrec_points")
            c.exec_driver_sql("DROP TABLE adlrec_points")
            c.exec_driver_sql("ALTER TABLE adlrec_points_old RENAME TO adlrec_points")
        else:
            c.exec_driver_sql("ALTER TABLE adlrec_points ALTER COLUMN data_wait SET NOT NULL")


def test_an_older_store_opens_with_every_point_and_then_keeps_an_unknown_wait(make_store):
    clock = ManualClock()
    store = make_store(clock)
    store.register(spec("a"), DEFAULT)
    beat(store, "a", 77.0, 1, 0.1)
    _as_an_older_adlrec_wrote_it(store)
    with pytest.raises(IntegrityError):  # the old table refuses an unknown share: what is migrated
        store.write_beats([], [("a", MeasuredPoint(2, 70.0, 1, None))])
    store.close()

    if store._sqlite:  # a migration killed before its commit leaves its scratch table: redone
        with store.engine.begin() as c:
            c.exec_driver_sql("CREATE TABLE adlrec_points_new (job_id TEXT, workers INTEGER)")
    again = make_store(clock)
    assert again.points("a") == [MeasuredPoint(1, 77.0, 1, 0.1)]
    beat(again, "a", 90.0, 2, None)  # a heartbeat that did not say its share
    beat(again, "a", 50.0, 1, None)  # nor here: the mean keeps the share it had
    assert again.points("a") == [MeasuredPoint(1, 63.5, 2, 0.1), MeasuredPoint(2, 90.0, 1, None)]
    again.close()
    assert make_store(clock).points("a")[1].data_wait is None  # and a third opening changes nothing


def test_a_failing_write_leaves_nothing_behind(make_store):
    store = make_store()
    store.register(spec("a"), DEFAULT)
    before = store.counts()
    # a plan naming a node that does not exist violates a foreign key: the whole batch must roll back
    snap = store.snapshot()
    good = compute_plans(snap, "optimal", "busy_gpus", 0.0)
    bad = [o.__class__(node="ghost", request=o.request, plan=o.plan, changed=True) for o in good]
    with pytest.raises(IntegrityError):
        store.add_plans(good + bad)
    assert store.counts() == before and store.latest_plan("n1") is None


def test_new_curves_replace_predicted_ones(make_store):
    store = make_store()
    store.register(spec("a"), DEFAULT)
    # a job the store does not have (first, so that the ones after it are updated all the same) is passed over
    store.update_curves({"gone": ((1.0,), "x"), "a": ((1.0, 2.0, 3.0, 4.0), "adlrec-throughput v2")})
    s = store.job("a").spec
    assert s.curve == (1.0, 2.0, 3.0, 4.0) and s.curve_source == "adlrec-throughput v2"


def test_write_beats_writes_job_state_and_absolute_points_in_one_go(make_store):
    clock = ManualClock()
    store = make_store(clock)
    a, _ = store.register(spec("a"), DEFAULT)
    b, _ = store.register(spec("b"), DEFAULT)
    beat(store, "a", 50.0, 1, 0.5)  # an existing point, replaced below
    assert store.points("a") == [MeasuredPoint(1, 50.0, 1, 0.5)]
    store.finish("b")
    seen = replace(a, last_seen=clock() + 9, reported_workers=2, reported_throughput=70.0)
    gone = replace(b, status=ACTIVE, last_seen=clock() + 9)
    store.write_beats(
        [seen, gone],
        [("a", MeasuredPoint(1, 60.0, 4, 0.2)), ("a", MeasuredPoint(2, 70.0, 1, 0.1))],
    )
    job = store.job("a")
    assert (job.last_seen, job.reported_workers, job.reported_throughput) == (clock() + 9, 2, 70.0)
    assert store.points("a") == [MeasuredPoint(1, 60.0, 4, 0.2), MeasuredPoint(2, 70.0, 1, 0.1)]
    assert store.job("b").status == FINISHED  # a flush never revives a finished job
    assert [(j.job_id, [p.workers for p in pts]) for j, pts in store.open_jobs()] == [("a", [1, 2])]


def test_latest_plans_are_each_nodes_newest(make_store):
    store = make_store()
    store.register(spec("a"), DEFAULT)
    store.register(spec("b", node="n2"), DEFAULT)
    first = store.add_plans(compute_plans(store.snapshot(), "optimal", "busy_gpus", 0.0))
    beat(store, "a", 1000.0, 1)
    (second,) = store.add_plans(compute_plans(store.snapshot(), "optimal", "busy_gpus", 0.0))
    latest = store.latest_plans()
    assert latest["n1"].plan_id == second.plan_id and latest["n2"].plan_id == first[1].plan_id
    assert latest["n1"] == store.plan(second.plan_id)
    assert store.latest_plan_ids() == {node: p.plan_id for node, p in latest.items()}  # one query for them all
    assert store.latest_plan_ids() == {n: store.latest_plan(n).plan_id for n in ("n1", "n2")}


def test_plans_are_stored_as_their_to_dict_says(make_store):
    from adlrec.service.store import plan_dict, request_dict

    store = make_store()
    store.register(spec("a", max_workers=3, mem_per_worker_mb=5), DEFAULT)
    store.register(spec("b"), DEFAULT)
    beat(store, "a", 95.0, 2)
    (o,) = compute_plans(store.snapshot(), "optimal", "busy_gpus", 0.05)
    assert plan_dict(o.plan) == o.plan.to_dict() and request_dict(o.request) == o.request.to_dict()
    (stored,) = store.add_plans([o])
    store._plans.clear()  # read it back from the database
    assert store.plan(stored.plan_id) == stored


def test_a_job_of_ranks_keeps_its_ranks_and_one_an_older_adlrec_stored_has_one(make_store):
    from sqlalchemy import select

    from adlrec.service.store import jobs_t

    store = make_store()
    store.register(spec("ddp", ranks=4, gpus=4, main_cores=4), DEFAULT)
    store.register(spec("old"), DEFAULT)
    with store.engine.begin() as c:  # the spec as adlrec wrote it before ranks: no such key
        old = dict(c.execute(select(jobs_t.c.spec).where(jobs_t.c.job_id == "old")).scalar_one())
        del old["ranks"]
        c.execute(jobs_t.update().where(jobs_t.c.job_id == "old").values(spec=old))
    store.close()
    again = {j.job_id: j.spec.ranks for j in make_store().jobs()}
    assert again == {"ddp": 4, "old": 1}


def test_putting_a_known_node_again_replaces_both_budgets_and_nodes_are_listed_by_name(make_store):
    store = make_store()
    store.put_node(NodeInfo("zeta", 4, 1000))  # stored first: a listing in insertion order would put it first
    store.put_node(NodeInfo("alpha", 2, 500))
    store.put_node(NodeInfo("zeta", 16, 2000))
    assert store.node("zeta") == NodeInfo("zeta", 16, 2000)
    assert store.nodes() == [NodeInfo("alpha", 2, 500), NodeInfo("zeta", 16, 2000)]
    with pytest.raises(UnknownNode):
        store.node("ghost")


def test_registering_again_moves_the_job_to_the_end_of_the_registration_order(make_store):
    # JobState puts a job registered again last in memory; the store must agree, or the order (which breaks
    # ties in a plan) changes at the next restart and in GET /jobs
    store = make_store()
    for job_id in ("a", "b", "a"):
        store.register(spec(job_id), DEFAULT)
    assert [j.job_id for j in store.jobs()] == ["b", "a"]
    assert [j.job_id for j, _ in store.open_jobs()] == ["b", "a"]
    assert [j.job_id for j in store.snapshot().jobs] == ["b", "a"]


def test_finishing_twice_keeps_the_first_finish_time_and_registering_again_clears_it(make_store):
    clock = ManualClock()
    store = make_store(clock)
    store.register(spec("a"), DEFAULT)
    clock.advance(10)
    first = store.finish("a")
    assert first.status == FINISHED and first.finished_at == clock()
    clock.advance(10)
    assert store.finish("a") == first and store.job("a") == first
    again, created = store.register(spec("a"), DEFAULT)
    assert not created and again.status == ACTIVE and again.finished_at is None
    with pytest.raises(UnknownJob):
        store.finish("ghost")


def test_jobs_filter_by_status_and_node_and_counts_cover_every_status(make_store):
    clock = ManualClock()
    store = make_store(clock)
    for job_id, node in (("a", "n1"), ("b", "n1"), ("c", "n2"), ("d", "n2")):
        store.register(spec(job_id, node=node), DEFAULT)
    store.finish("b")
    state = JobState(store, clock)
    state.load()
    clock.advance(100)
    state.beat("a", None, None, None)
    state.beat("d", None, None, None)
    assert state.expire(60) == ["c"]
    state.flush()
    assert [j.job_id for j in store.jobs(status=FINISHED)] == ["b"]
    assert [j.job_id for j in store.jobs(status=EXPIRED)] == ["c"]
    assert [j.job_id for j in store.jobs(status=ACTIVE, node="n2")] == ["d"]
    assert store.counts() == {ACTIVE: 2, FINISHED: 1, EXPIRED: 1, "plans": 0}


def test_a_job_out_of_the_plan_or_without_one_runs_what_it_reported_within_its_bounds(make_store):
    store = make_store()
    store.register(spec("a", min_workers=2, requested_workers=1), DEFAULT)
    store.register(spec("b", max_workers=2, requested_workers=5), DEFAULT)
    (plan,) = store.add_plans(compute_plans(store.snapshot(), "optimal", "busy_gpus", 0.0))
    assert assignment(store.job("a"), plan) == Assignment("a", plan.plan.workers["a"], plan.plan_id, ACTIVE)
    # no plan: what it asked for, raised to its minimum or cut to its maximum
    assert assignment(store.job("a"), None) == Assignment("a", 2, None, ACTIVE)
    assert assignment(store.job("b"), None) == Assignment("b", 2, None, ACTIVE)
    # what it last said it runs with, over what it asked for
    beat(store, "b", None, 1)
    assert assignment(store.job("b"), None).workers == 1
    # no max_workers: the curve's last point bounds it
    store.register(spec("c", requested_workers=9), DEFAULT)
    assert assignment(store.job("c"), None).workers == 3
    # a finished job is no longer in its plan, though the plan still names it (until the next recompute)
    done = store.finish("a")
    assert assignment(done, plan) == Assignment("a", 2, None, FINISHED)


def test_two_writers_registering_on_a_new_node_at_once_both_succeed(make_store):
    """On PostgreSQL two threads of one service (registrations run in FastAPI's thread pool, and no in-process lock
    serialises them there; on SQLite, two stores on one file stand for them) each saw the node missing and inserted
    it: the second failed on its primary key, an HTTP 500 for a job's registration."""
    import threading

    first, second = make_store(), make_store()
    barrier, failures = threading.Barrier(2), []

    def writer(store: JobStore, tag: str) -> None:
        for i in range(30):
            barrier.wait(timeout=60)
            try:
                store.register(spec(f"{tag}-{i}", node=f"new-{i}"), DEFAULT)
                store.put_node(NodeInfo(f"put-{i}", 4, 100))
            except Exception as exc:  # the failure under test: collected, the loop goes on in step with the other
                failures.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=writer, args=(s, tag)) for s, tag in ((first, "a"), (second, "b"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert len(first.jobs()) == 60 and [n.name for n in first.nodes()].count("new-0") == 1


def test_a_sqlite_file_uri_opens_its_file_and_makes_its_folder_not_one_named_file(tmp_path, monkeypatch):
    """``sqlite:///file:/path/db?uri=true`` (SQLite's URI form, for its options) made a folder ``file:/path`` under
    the current folder, not the store's own, and then could not open the database."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "sub" / "service.db"
    store = JobStore(f"sqlite:///file:{path}?uri=true")
    store.register(spec("a"), DEFAULT)
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sub"] and path.is_file()
    assert [j.job_id for j in JobStore(f"sqlite:///{path}").jobs()] == ["a"]


def test_a_store_the_service_cannot_write_to_is_refused_when_opened(tmp_path, monkeypatch):
    """A read-only store opened, served reads, and then answered every write 503, "did not answer"."""
    from adlrec.service.store import StoreUnavailable

    monkeypatch.chdir(tmp_path)  # where a file: URI's stray folder went
    path = tmp_path / "service.db"
    store = JobStore(f"sqlite:///{path}")
    store.register(spec("a"), DEFAULT)
    store.close()
    with pytest.raises(StoreUnavailable, match="cannot write to it: attempt to write a readonly database") as err:
        JobStore(f"sqlite:///file:{path}?mode=ro&uri=true")
    assert err.value.exit_code == 1 and str(err.value).count("\n") == 0
    assert [j.job_id for j in JobStore(f"sqlite:///{path}").jobs()] == ["a"]
