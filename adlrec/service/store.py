"""The job store: nodes, jobs, measured points and plans, in any SQLAlchemy database.

SQLite in the data folder by default, PostgreSQL (or anything SQLAlchemy speaks) by URL.  Every
public method is one transaction, so nothing a client sends can leave the store half-written.
Plan ids come from an autoincrement key that is never reused (``AUTOINCREMENT`` on SQLite, a
sequence on PostgreSQL), so they only grow, across restarts too.  Time comes from the injected
``clock`` (seconds since the epoch).

Heartbeats do not come here one by one: :class:`adlrec.service.state.JobState` holds them in
memory (with each job's running mean per worker count) and writes them in batches through
:meth:`JobStore.write_beats`, as absolute values.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from sqlalchemy import (
    JSON,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    create_engine,
    event,
    false,
    func,
    inspect,
    select,
)
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import URL, Connection, Engine, make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, InterfaceError, NoSuchModuleError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from adlrec.errors import AdlrecError, UsageError, first_line
from adlrec.folders import ensure_folder
from adlrec.schemas import AllocationPlan, AllocationRequest, JobDemand
from adlrec.service.records import (
    ACTIVE,
    EXPIRED,
    FINISHED,
    Assignment,
    JobRecord,
    JobSpec,
    MeasuredPoint,
    NodeInfo,
    NodeOutcome,
    PlanRecord,
    Snapshot,
)

__all__ = [
    "STORE_DOWN",
    "JobNotActive",
    "JobStore",
    "StoreError",
    "UnknownJob",
    "UnknownNode",
    "assignment",
    "check_store_url",
    "plan_dict",
    "request_dict",
]

Clock = Callable[[], float]
_PLAN_CACHE = 4096  # decoded plans kept in memory (plan reads and history pages decode each once)


class StoreError(AdlrecError):
    """A request the store cannot honour because of the state it is in."""


class UnknownJob(StoreError):
    """No job with that id was ever registered."""


class UnknownNode(StoreError):
    """No node with that name is known."""


class JobNotActive(StoreError):
    """The job has finished; it must register again to get workers."""


# What a database that does not answer raises (its server down or unreachable, its file or folder gone, no
# connection free): not a client's mistake, nor a bug (app.py answers a 503).
STORE_DOWN = (OperationalError, InterfaceError, PoolTimeout)


class StoreUnavailable(AdlrecError):
    """The store's database did not answer at start (not the user's input: exit code 1)."""

    exit_code = 1


_URL_HINT = (
    "expected sqlite:///path/service.db or postgresql+psycopg://user:pw@host/db "
    "(set by --store-url or ADLREC_SERVICE_STORE_URL)"
)


metadata = MetaData()

nodes_t = Table(
    "adlrec_nodes",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("cores", Integer, nullable=False),
    Column("memory_mb", Integer, nullable=False),
)

jobs_t = Table(
    "adlrec_jobs",
    metadata,
    Column("job_id", String(128), primary_key=True),
    Column("seq", Integer, nullable=False),  # registration order: ties in a plan go to earlier jobs
    Column("node", String(128), ForeignKey("adlrec_nodes.name"), nullable=False),
    Column("spec", JSON, nullable=False),
    Column("status", String(16), nullable=False),
    Column("registered_at", Float, nullable=False),
    Column("last_seen", Float, nullable=False),
    Column("finished_at", Float),
    Column("reported_workers", Integer),
    Column("reported_throughput", Float),
    Column("data_wait", Float),
    Index("ix_adlrec_jobs_status", "status", "node"),
)

points_t = Table(
    "adlrec_points",
    metadata,
    Column("job_id", String(128), ForeignKey("adlrec_jobs.job_id", ondelete="CASCADE"), primary_key=True),
    Column("workers", Integer, primary_key=True),
    Column("throughput", Float, nullable=False),
    Column("samples", Integer, nullable=False),
    Column("data_wait", Float),  # null: no heartbeat at this count reported a share (see JobStore._migrate)
)

plans_t = Table(
    "adlrec_plans",
    metadata,
    Column("plan_id", Integer, primary_key=True, autoincrement=True),
    Column("node", String(128), ForeignKey("adlrec_nodes.name"), nullable=False),
    Column("created_at", Float, nullable=False),
    Column("plan", JSON, nullable=False),
    Column("request", JSON, nullable=False),
    Index("ix_adlrec_plans_node", "node", "plan_id"),
    sqlite_autoincrement=True,
)


def check_store_url(url: str) -> URL:
    """``url`` parsed, when it names a database the store can use (its driver installed, a SQLite file);
    else a :class:`UsageError`.  Creates nothing and connects to nothing, so ``adlrec serve`` can refuse
    the URL before it opens any store."""
    try:
        u = make_url(url)
    except ArgumentError:
        raise UsageError(f"job store URL {url!r} is not a database URL; {_URL_HINT}") from None
    shown = u.render_as_string(hide_password=True)
    if u.get_backend_name() != "sqlite":
        try:
            create_engine(u, future=True).dispose()  # imports the driver; connects only when used
        except NoSuchModuleError:
            raise UsageError(f"job store {shown}: no database driver {u.drivername!r}; {_URL_HINT}") from None
        except ImportError as exc:
            extra = (
                "; for PostgreSQL install adlrec[postgres] (psycopg 3)" if u.get_backend_name() == "postgresql" else ""
            )
            raise UsageError(f"job store {shown}: its driver {exc.name!r} is not installed{extra}") from None
    elif u.database in (None, "", ":memory:") or u.query.get("mode") == "memory":
        # each pooled connection would be a database of its own, the tables in one of them only
        raise UsageError(
            f"job store {url}: an in-memory SQLite database cannot hold the service's state (each "
            f"connection sees its own, and a restart loses it); give a file, {_URL_HINT}"
        )
    return u


def _sqlite_file(u: URL) -> Path:
    """The file a SQLite URL names: its path, or with ``uri=true`` the path of its ``file:`` URI."""
    if u.query.get("uri") == "true" and u.database.startswith("file:"):
        return Path(unquote(urlsplit(u.database).path))
    return Path(u.database)


def _engine(url: str) -> Engine:
    """The engine for ``url``; a URL that names no usable database is a :class:`UsageError`."""
    u = check_store_url(url)
    if u.get_backend_name() != "sqlite":
        return create_engine(u, pool_pre_ping=True, future=True)
    ensure_folder(_sqlite_file(u).parent, "the job store's folder", "--data-dir, ADLREC_DATA_DIR or --store-url")
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30}, future=True)

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")  # readers never wait for the writer
        cur.execute("PRAGMA foreign_keys=ON")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()

    return engine


class JobStore:
    """The service's durable state.  Thread-safe: each call opens its own transaction."""

    def __init__(self, url: str, clock: Clock = time.time) -> None:
        self.url = url
        self.clock = clock
        self.engine = _engine(url)
        self._sqlite = self.engine.dialect.name == "sqlite"
        # SQLite has one writer; serialising writes here avoids "database is locked" under load.
        self._write_lock = threading.Lock() if self._sqlite else None
        self._upsert = {"sqlite": sqlite_insert, "postgresql": pg_insert}.get(self.engine.dialect.name)
        self._plans: dict[int, PlanRecord] = {}  # plans never change once stored: a safe cache
        try:
            metadata.create_all(self.engine)
            self._migrate()
        except DatabaseError as exc:  # cannot connect (OperationalError), or the file is not a database
            raise self._unusable("cannot open it", exc) from None
        try:  # a store the service cannot write to (read-only) would answer every registration 503: refused now
            with self._begin() as c:
                c.execute(nodes_t.update().where(false()).values(cores=nodes_t.c.cores))
        except DatabaseError as exc:
            raise self._unusable("cannot write to it", exc, "; the service stores its jobs and plans there") from None

    def _unusable(self, what: str, exc: DatabaseError, why: str = "") -> StoreUnavailable:
        """Let go of the engine and say, in one line, why this store cannot serve."""
        self.engine.dispose()
        shown = self.engine.url.render_as_string(hide_password=True)
        return StoreUnavailable(f"job store {shown}: {what}: {first_line(exc.orig or exc, type(exc).__name__)}{why}")

    def close(self) -> None:
        self.engine.dispose()

    def _migrate(self) -> None:
        """Bring a store written by an older adlrec to the current tables, keeping every row.

        One change so far: ``adlrec_points.data_wait`` was NOT NULL, so a heartbeat without a share
        was stored as 0.  SQLite cannot drop a constraint in place: the table is rebuilt as SQLite's
        documentation prescribes.  pysqlite runs the scratch table's CREATE outside the transaction,
        so a left-over one (a migration killed before its commit) is dropped first; the copy, the
        drop and the rename commit together, so the old table stays whole until the new one replaces it."""
        wait = next(c for c in inspect(self.engine).get_columns(points_t.name) if c["name"] == "data_wait")
        if wait["nullable"]:
            return
        with self._begin() as c:
            if self._sqlite:
                scratch = MetaData()  # the copy's foreign key needs the tables it names beside it
                for t in (nodes_t, jobs_t):
                    t.to_metadata(scratch)
                new = points_t.to_metadata(scratch, name=f"{points_t.name}_new")
                c.exec_driver_sql(f"DROP TABLE IF EXISTS {new.name}")
                new.create(c)
                cols = ", ".join(col.name for col in points_t.columns)
                c.exec_driver_sql(f"INSERT INTO {new.name} ({cols}) SELECT {cols} FROM {points_t.name}")
                c.exec_driver_sql(f"DROP TABLE {points_t.name}")
                c.exec_driver_sql(f"ALTER TABLE {new.name} RENAME TO {points_t.name}")
            else:
                c.exec_driver_sql(f"ALTER TABLE {points_t.name} ALTER COLUMN data_wait DROP NOT NULL")

    # -- nodes --------------------------------------------------------------------------------
    def put_node(self, node: NodeInfo) -> NodeInfo:
        with self._begin() as c:
            self._add_node(c, node, replace=True)
        return node

    def _add_node(self, c: Connection, node: NodeInfo, replace: bool) -> None:
        """Insert ``node``, or (``replace``) set the budgets of the one of that name; one statement where the
        database has an upsert, so that another writer inserting the same node at once (a second service on
        the database; on PostgreSQL, another thread of this one) cannot make it fail on the primary key."""
        values = dict(name=node.name, cores=node.cores, memory_mb=node.memory_mb)
        if self._upsert is not None:
            ins = self._upsert(nodes_t).values(**values)
            budgets = dict(cores=ins.excluded.cores, memory_mb=ins.excluded.memory_mb)
            c.execute(
                ins.on_conflict_do_update(index_elements=[nodes_t.c.name], set_=budgets)
                if replace
                else ins.on_conflict_do_nothing(index_elements=[nodes_t.c.name])
            )
        elif c.execute(select(nodes_t.c.name).where(nodes_t.c.name == node.name)).first() is None:
            c.execute(nodes_t.insert().values(**values))
        elif replace:
            c.execute(
                nodes_t.update().where(nodes_t.c.name == node.name).values(cores=node.cores, memory_mb=node.memory_mb)
            )

    def node(self, name: str) -> NodeInfo:
        with self.engine.connect() as c:
            row = c.execute(select(nodes_t).where(nodes_t.c.name == name)).first()
        if row is None:
            raise UnknownNode(f"no node named {name!r}")
        return NodeInfo(row.name, row.cores, row.memory_mb)

    def nodes(self) -> list[NodeInfo]:
        with self.engine.connect() as c:
            rows = c.execute(select(nodes_t).order_by(nodes_t.c.name)).all()
        return [NodeInfo(r.name, r.cores, r.memory_mb) for r in rows]

    # -- jobs ---------------------------------------------------------------------------------
    def register(self, spec: JobSpec, default_node: NodeInfo) -> tuple[JobRecord, bool]:
        """Add a job, or replace the spec of one with the same id; returns (job, created).

        The node is created with ``default_node``'s budgets if it is unknown.  Registering again
        reactivates the job and forgets its measured points (the curve may have changed).
        """
        now = self.clock()
        with self._begin() as c:
            self._add_node(c, NodeInfo(spec.node, default_node.cores, default_node.memory_mb), replace=False)
            old = c.execute(select(jobs_t.c.seq).where(jobs_t.c.job_id == spec.job_id)).first()
            seq = (c.execute(select(func.max(jobs_t.c.seq))).scalar() or 0) + 1
            values = dict(
                node=spec.node,
                seq=seq,
                spec=_spec_json(spec),
                status=ACTIVE,
                registered_at=now,
                last_seen=now,
                finished_at=None,
                reported_workers=None,
                reported_throughput=None,
                data_wait=None,
            )
            if old is None:
                c.execute(jobs_t.insert().values(job_id=spec.job_id, **values))
            else:
                c.execute(points_t.delete().where(points_t.c.job_id == spec.job_id))
                c.execute(jobs_t.update().where(jobs_t.c.job_id == spec.job_id).values(**values))
            row = c.execute(select(jobs_t).where(jobs_t.c.job_id == spec.job_id)).one()
        return _job(row), old is None

    def finish(self, job_id: str) -> JobRecord:
        now = self.clock()
        with self._begin() as c:
            row = c.execute(select(jobs_t).where(jobs_t.c.job_id == job_id)).first()
            if row is None:
                raise UnknownJob(f"no job {job_id!r}")
            if row.status != FINISHED:
                c.execute(jobs_t.update().where(jobs_t.c.job_id == job_id).values(status=FINISHED, finished_at=now))
            row = c.execute(select(jobs_t).where(jobs_t.c.job_id == job_id)).one()
        return _job(row)

    def job(self, job_id: str) -> JobRecord:
        with self.engine.connect() as c:
            row = c.execute(select(jobs_t).where(jobs_t.c.job_id == job_id)).first()
        if row is None:
            raise UnknownJob(f"no job {job_id!r}")
        return _job(row)

    def jobs(self, status: str | None = None, node: str | None = None) -> list[JobRecord]:
        q = select(jobs_t).order_by(jobs_t.c.seq)
        if status is not None:
            q = q.where(jobs_t.c.status == status)
        if node is not None:
            q = q.where(jobs_t.c.node == node)
        with self.engine.connect() as c:
            return [_job(r) for r in c.execute(q).all()]

    def points(self, job_id: str) -> list[MeasuredPoint]:
        with self.engine.connect() as c:
            rows = c.execute(select(points_t).where(points_t.c.job_id == job_id).order_by(points_t.c.workers)).all()
        return [MeasuredPoint(r.workers, r.throughput, r.samples, r.data_wait) for r in rows]

    def update_curves(self, curves: dict[str, tuple[tuple[float, ...], str]]) -> None:
        """Replace predicted curves (e.g. after the registered model moved): job id -> (curve, source)."""
        with self._begin() as c:
            for job_id, (curve, source) in curves.items():
                row = c.execute(select(jobs_t.c.spec).where(jobs_t.c.job_id == job_id)).first()
                if row is None:
                    continue
                spec = dict(row.spec) | {"curve": list(curve), "curve_source": source}
                c.execute(jobs_t.update().where(jobs_t.c.job_id == job_id).values(spec=spec))

    def open_jobs(self) -> list[tuple[JobRecord, list[MeasuredPoint]]]:
        """Every job that has not finished (active or expired), in registration order, with its points."""
        with self.engine.connect() as c, c.begin():
            rows = c.execute(select(jobs_t).where(jobs_t.c.status != FINISHED).order_by(jobs_t.c.seq)).all()
            points: dict[str, list[MeasuredPoint]] = {}
            for r in c.execute(
                select(points_t)
                .join(jobs_t, jobs_t.c.job_id == points_t.c.job_id)
                .where(jobs_t.c.status != FINISHED)
                .order_by(points_t.c.job_id, points_t.c.workers)
            ):
                points.setdefault(r.job_id, []).append(MeasuredPoint(r.workers, r.throughput, r.samples, r.data_wait))
        return [(_job(r), points.get(r.job_id, [])) for r in rows]

    def write_beats(self, jobs: Iterable[JobRecord], points: Iterable[tuple[str, MeasuredPoint]]) -> None:
        """Write what heartbeats changed, in one transaction: each job's state and last report, and
        measured points (absolute values, inserted or replaced).  A finished job's row is left as it is.

        Plain SQL through the driver's ``executemany``: a flush of a thousand heartbeats is a hot
        path of its own, and SQLAlchemy's per-row processing would cost tens of milliseconds."""
        job_rows = [
            (j.status, j.last_seen, j.reported_workers, j.reported_throughput, j.data_wait, j.job_id) for j in jobs
        ]
        point_rows = [(job_id, p.workers, p.throughput, p.samples, p.data_wait) for job_id, p in points]
        if not job_rows and not point_rows:
            return
        q = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"
        with self._begin() as c:
            if job_rows:
                c.exec_driver_sql(
                    f"UPDATE adlrec_jobs SET status = {q}, last_seen = {q}, reported_workers = {q}, "
                    f"reported_throughput = {q}, data_wait = {q} WHERE job_id = {q} AND status != '{FINISHED}'",
                    job_rows,
                )
            if point_rows and self._upsert is not None:  # SQLite and PostgreSQL spell the upsert alike
                c.exec_driver_sql(
                    f"INSERT INTO adlrec_points (job_id, workers, throughput, samples, data_wait) "
                    f"VALUES ({q}, {q}, {q}, {q}, {q}) ON CONFLICT (job_id, workers) DO UPDATE SET "
                    "throughput = excluded.throughput, samples = excluded.samples, data_wait = excluded.data_wait",
                    point_rows,
                )
            else:
                for job_id, workers, throughput, samples, wait in point_rows:
                    key = (points_t.c.job_id == job_id, points_t.c.workers == workers)
                    values = dict(throughput=throughput, samples=samples, data_wait=wait)
                    if c.execute(points_t.update().where(*key).values(**values)).rowcount == 0:
                        c.execute(points_t.insert().values(job_id=job_id, workers=workers, **values))

    def latest_plans(self) -> dict[str, PlanRecord]:
        """Each node's current plan."""
        with self.engine.connect() as c:
            ids = c.execute(select(func.max(plans_t.c.plan_id)).group_by(plans_t.c.node)).scalars().all()
            return {p.node: p for p in (self._plan(c, i) for i in ids) if p is not None}

    # -- plans --------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """Nodes, active jobs, their measured points and each node's current plan, read together."""
        with self.engine.connect() as c, c.begin():
            nodes = {r.name: NodeInfo(r.name, r.cores, r.memory_mb) for r in c.execute(select(nodes_t)).all()}
            jobs = tuple(
                _job(r) for r in c.execute(select(jobs_t).where(jobs_t.c.status == ACTIVE).order_by(jobs_t.c.seq))
            )
            active = {j.job_id for j in jobs}
            points: dict[str, dict[int, float]] = {}
            for r in c.execute(
                select(points_t.c.job_id, points_t.c.workers, points_t.c.throughput)
                .join(jobs_t, jobs_t.c.job_id == points_t.c.job_id)
                .where(jobs_t.c.status == ACTIVE)
            ):
                if r.job_id in active:
                    points.setdefault(r.job_id, {})[r.workers] = r.throughput
            latest_ids = c.execute(select(func.max(plans_t.c.plan_id)).group_by(plans_t.c.node)).scalars().all()
            latest = {p.node: p for p in (self._plan(c, i) for i in latest_ids)}
        return Snapshot(nodes=nodes, jobs=jobs, points=points, latest=latest)

    def add_plans(self, outcomes: Iterable[NodeOutcome]) -> list[PlanRecord]:
        """Store the changed plans of a recompute, all or none; returns them with their new ids."""
        now = self.clock()
        stored = []
        with self._begin() as c:
            for o in outcomes:
                if not o.changed or o.plan is None or o.request is None:
                    continue
                plan, request = plan_dict(o.plan), request_dict(o.request)
                res = c.execute(plans_t.insert().values(node=o.node, created_at=now, plan=plan, request=request))
                stored.append(PlanRecord(int(res.inserted_primary_key[0]), o.node, now, o.plan, o.request))
        for rec in stored:
            self._cache(rec)
        return stored

    def latest_plan_ids(self) -> dict[str, int]:
        """Each node's current plan id, in one query (``GET /nodes`` made one per node, each decoding the plan)."""
        with self.engine.connect() as c:
            rows = c.execute(select(plans_t.c.node, func.max(plans_t.c.plan_id)).group_by(plans_t.c.node)).all()
        return {node: int(i) for node, i in rows}

    def latest_plan(self, node: str) -> PlanRecord | None:
        with self.engine.connect() as c:
            i = self._latest_id(c, node)
            return None if i is None else self._plan(c, i)

    def plan(self, plan_id: int) -> PlanRecord | None:
        with self.engine.connect() as c:
            return self._plan(c, plan_id)

    def plans(self, node: str | None = None, before: int | None = None, limit: int = 50) -> list[PlanRecord]:
        """Plan history, newest first; page with ``before`` = the last plan id of the previous page."""
        q = select(plans_t.c.plan_id).order_by(plans_t.c.plan_id.desc()).limit(limit)
        if node is not None:
            q = q.where(plans_t.c.node == node)
        if before is not None:
            q = q.where(plans_t.c.plan_id < before)
        with self.engine.connect() as c:
            return [self._plan(c, i) for i in c.execute(q).scalars().all()]

    def counts(self) -> dict[str, int]:
        """Jobs per status and the number of stored plans (for metrics)."""
        with self.engine.connect() as c:
            by_status = dict(c.execute(select(jobs_t.c.status, func.count()).group_by(jobs_t.c.status)).all())
            n_plans = c.execute(select(func.count()).select_from(plans_t)).scalar() or 0
        return {s: int(by_status.get(s, 0)) for s in (ACTIVE, FINISHED, EXPIRED)} | {"plans": int(n_plans)}

    # -- helpers ------------------------------------------------------------------------------
    def _begin(self):
        return _Tx(self.engine, self._write_lock)

    @staticmethod
    def _latest_id(c: Connection, node: str) -> int | None:
        return c.execute(select(func.max(plans_t.c.plan_id)).where(plans_t.c.node == node)).scalar()

    def _plan(self, c: Connection, plan_id: int) -> PlanRecord | None:
        hit = self._plans.get(plan_id)
        if hit is not None:
            return hit
        r = c.execute(select(plans_t).where(plans_t.c.plan_id == plan_id)).first()
        if r is None:
            return None
        rec = PlanRecord(
            plan_id=int(r.plan_id),
            node=r.node,
            created_at=float(r.created_at),
            plan=AllocationPlan.from_dict(_loads(r.plan)),
            request=AllocationRequest.from_dict(_loads(r.request)),
        )
        self._cache(rec)
        return rec

    def _cache(self, rec: PlanRecord) -> None:
        if len(self._plans) >= _PLAN_CACHE:
            self._plans.clear()  # plans are immutable, so a cache this crude is still always right
        self._plans[rec.plan_id] = rec


class _Tx:
    """``engine.begin()``, under the write lock where the database has a single writer."""

    def __init__(self, engine: Engine, lock: threading.Lock | None) -> None:
        self.engine, self.lock = engine, lock

    def __enter__(self) -> Connection:
        if self.lock is not None:
            self.lock.acquire()
        try:
            self._ctx = self.engine.begin()
            return self._ctx.__enter__()
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            self._ctx.__exit__(*exc)
        finally:
            if self.lock is not None:
                self.lock.release()


def assignment(job: JobRecord, plan: PlanRecord | None) -> Assignment:
    """What a job should run with (each of its ranks): its count in its node's current plan, else what it
    runs (or asked for) within its bounds, with no plan id."""
    if plan is not None and job.status == ACTIVE and job.job_id in plan.plan.workers:
        per_rank = plan.plan.workers[job.job_id] // job.spec.ranks  # a plan counts a job's total workers
        return Assignment(job.job_id, per_rank, plan.plan_id, job.status)
    s = job.spec
    hi = s.max_workers if s.max_workers is not None else len(s.curve) - 1
    fallback = job.reported_workers if job.reported_workers is not None else s.requested_workers
    return Assignment(job.job_id, max(s.min_workers, min(hi, fallback)), None, job.status)


def plan_dict(p: AllocationPlan) -> dict[str, Any]:
    """``p.to_dict()``, without the deep copies of ``dataclasses.asdict`` (a recompute stores a plan
    per node, with every job's curve in its request: asdict made that the recompute's largest cost)."""
    return {f.name: (dict(v) if isinstance(v, dict) else v) for f in _PLAN_FIELDS for v in (getattr(p, f.name),)}


def request_dict(r: AllocationRequest) -> dict[str, Any]:
    """``r.to_dict()``, likewise."""
    jobs = [{f.name: getattr(j, f.name) for f in _JOB_FIELDS} | {"curve": list(j.curve)} for j in r.jobs]
    return {
        "cores": r.cores,
        "memory_mb": r.memory_mb,
        "jobs": jobs,
        "objective": r.objective,
        "threshold": r.threshold,
    }


_PLAN_FIELDS = dataclasses.fields(AllocationPlan)
_JOB_FIELDS = dataclasses.fields(JobDemand)


def _loads(v: Any) -> Any:
    return json.loads(v) if isinstance(v, str) else v


def _spec_json(s: JobSpec) -> dict[str, Any]:
    return {
        "job_id": s.job_id,
        "node": s.node,
        "curve": list(s.curve),
        "curve_source": s.curve_source,
        "features": s.features,
        "gpus": s.gpus,
        "weight": s.weight,
        "min_workers": s.min_workers,
        "max_workers": s.max_workers,
        "requested_workers": s.requested_workers,
        "mem_per_worker_mb": s.mem_per_worker_mb,
        "main_cores": s.main_cores,
        "ranks": s.ranks,
    }


def _job(r: Any) -> JobRecord:
    d = _loads(r.spec)
    spec = JobSpec(**(d | {"curve": tuple(float(t) for t in d["curve"])}))
    return JobRecord(
        spec=spec,
        status=r.status,
        registered_at=float(r.registered_at),
        last_seen=float(r.last_seen),
        finished_at=r.finished_at,
        reported_workers=r.reported_workers,
        reported_throughput=r.reported_throughput,
        data_wait=r.data_wait,
    )
