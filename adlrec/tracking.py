"""Everything adlrec stores in MLflow: the only module that imports mlflow.

One run per profiled curve, in a stable experiment.  A run is written in one go after the sweep
has finished: created, filled (tags, params, stepped metrics, artifacts), then marked FINISHED with
the tag ``adlrec.complete=true``.  If anything fails while writing, the run is marked FAILED, and
readers only ever return complete runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import math
import os
import re
import sqlite3
import tempfile
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# Reading a profile back downloads its artifact; MLflow would draw a progress bar on stderr for each.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
# Ending a run on a server, MLflow prints "View run ... at: http://..." on stdout: `profile --json`'s stdout is the JSON.
os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
# A new SQLite store runs its migrations through alembic, which logs a page of INFO lines.
logging.getLogger("alembic").setLevel(logging.WARNING)
logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)

import mlflow  # noqa: E402
import mlflow.pyfunc  # noqa: E402
from mlflow.entities import Metric, Param, RunStatus, RunTag  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from adlrec.config import sqlite_file  # noqa: E402
from adlrec.errors import TrackingError, UsageError  # noqa: E402
from adlrec.folders import ensure_folder  # noqa: E402
from adlrec.profile.report import curve_csv, plot_curve  # noqa: E402
from adlrec.schemas import Profile, json_text  # noqa: E402

log = logging.getLogger(__name__)

__all__ = [
    "Champion",
    "ModelRegistry",
    "ProfileRun",
    "ThroughputPyfunc",
    "Tracker",
    "check_server",
    "check_sqlite_store",
    "log_simulation",
    "prompt_reads",
]

COMPLETE_TAG = "adlrec.complete"
PROFILE_ARTIFACT = "profile.json"
_POINT_METRICS = (
    "throughput",
    "rse",
    "stall_fraction",
    "prep_share",
    "fetch_share",
    "wait_fraction",
    "prep_rate",
    "cpu_util",
    "worker_uss_mb",
    "worker_pss_mb",
    "main_rss_mb",
)
_PARAM_MAX = 6000  # MLflow's longest param value (MAX_PARAM_VAL_LENGTH)
# where a store's URI may come from, said when the caller does not know which of them it was
_ANY_ORIGIN = "--tracking-uri or MLFLOW_TRACKING_URI, else --data-dir or ADLREC_DATA_DIR"


def check_server(tracking_uri: str, origin: str = "", timeout_s: float = 5.0) -> None:
    """Raise :class:`TrackingError` at once when ``tracking_uri`` is an MLflow server that does not
    answer (refused, no such host, timed out, TLS refused): MLflow's own client retries for minutes
    (``MLFLOW_HTTP_REQUEST_MAX_RETRIES``) with no output before it says so.  The probe is MLflow's
    own request, once, so its TLS, proxy and credential settings (``MLFLOW_TRACKING_INSECURE_TLS``,
    ``MLFLOW_TRACKING_SERVER_CERT_PATH``, ...) apply.  Any HTTP answer, even an error, counts as a
    server that is there.  Other URIs are not checked.  ``origin`` is the flag or variable that named the
    server, when the caller knows it."""
    if urllib.parse.urlsplit(tracking_uri).scheme not in ("http", "https"):
        return
    from mlflow.utils.credentials import get_default_host_creds
    from mlflow.utils.rest_utils import http_request

    try:
        http_request(
            get_default_host_creds(tracking_uri),
            "/health",
            "GET",
            max_retries=0,
            timeout=timeout_s,
            raise_on_status=False,
        )
    except Exception as exc:  # MlflowException wraps what requests raised; anything else is no answer either
        raise TrackingError(
            f"the MLflow server at {tracking_uri} does not answer ({_request_cause(exc)}); start it, or pass "
            f"another URI (this one set by {origin or '--tracking-uri or MLFLOW_TRACKING_URI'})"
        ) from None


# MLflow's client retries a server that answers with an error (a proxy's 502/503 while the server behind it is
# down, a 500) 7 times, over about 4 minutes, and waits 120 s for each answer; a command that only reads does not.
_READ_LIMITS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "15",
}


@contextlib.contextmanager
def prompt_reads() -> Iterator[None]:
    """For the block, MLflow's client gives up on a failing server after seconds (``_READ_LIMITS``), not
    minutes, unless the user set those variables; a command that only reads loses nothing by failing and
    being run again.  MLflow reads them at each request."""
    saved = {name: os.environ.get(name) for name in _READ_LIMITS}
    for name, value in _READ_LIMITS.items():
        os.environ.setdefault(name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _request_failed(exc: BaseException) -> bool:
    """Whether MLflow raised ``exc`` because its HTTP request got no usable answer (no connection, a timeout,
    error answers past its retries), rather than an answer that says what is wrong."""
    import requests

    return isinstance(exc.__cause__ or exc.__context__, requests.exceptions.RequestException)


def _request_cause(exc: BaseException) -> str:
    """The cause in what MLflow says of a failed request (a page of urllib3's reprs): "Connection refused",
    "too many 503 error responses", "Read timed out", the SSL error."""
    text = str(exc)
    cause = re.search(
        r"\[Errno -?\d+\] ([^\"')]+)|(SSLError\(.{0,120}?\)\)|Read timed out)|ResponseError\('([^']{1,200})'\)", text
    )
    if cause:
        return next(g for g in cause.groups() if g).strip()
    return _first_line(exc)[:200] or type(exc).__name__


def _read_error(exc: MlflowException, tracking_uri: str, origin: str) -> TrackingError:
    """A store that failed a request: one line naming it, what chose it and why."""
    where = f"{tracking_uri} (set by {origin or _ANY_ORIGIN})"
    if _request_failed(exc):
        tries = os.environ.get("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "7")
        return TrackingError(
            f"the MLflow server at {where} does not serve requests ({_request_cause(exc)}, after {tries} retries); "
            "check it, or set MLFLOW_HTTP_REQUEST_MAX_RETRIES and MLFLOW_HTTP_REQUEST_TIMEOUT to wait longer"
        )
    return TrackingError(f"the tracking store at {where} failed a request: {_first_line(exc)[:300]}")


def check_sqlite_store(tracking_uri: str, origin: str = "") -> None:
    """Raise :class:`UsageError` when ``tracking_uri`` names a SQLite database of another program (tables,
    but neither of MLflow's ``alembic_version`` and ``experiments``): opening it, MLflow's migrations
    would add their tables to it.  The file is only read, and left as it was: opened read-only, or
    immutable when it is in WAL mode with no ``-wal`` file beside it (a read-only reader would leave a new
    ``-wal`` and ``-shm`` there).  A file that is missing, empty (a new store) or not SQLite is left to MLflow.
    ``origin`` is the flag or variable that named the store, when the caller knows it."""
    path = sqlite_file(tracking_uri)
    if path is None:
        return
    try:
        with path.open("rb") as f:
            header = f.read(100)
    except OSError:  # not there yet, a folder, no access: MLflow's to create or report
        return
    if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
        return
    immutable = header[18] == 2 and not path.with_name(path.name + "-wal").exists()
    try:
        with contextlib.closing(
            sqlite3.connect(f"{path.resolve().as_uri()}?{'immutable=1' if immutable else 'mode=ro'}", uri=True)
        ) as db:
            tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    except sqlite3.Error:
        return
    tables = [name for name in tables if not name.startswith("sqlite_")]
    if tables and not {"alembic_version", "experiments"} & set(tables):
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        raise UsageError(
            f"tracking store {tracking_uri!r}: {path} is not an MLflow store but another program's SQLite database "
            f"(tables {shown}); expected a new file or an MLflow store (set by "
            f"{origin or _ANY_ORIGIN})"
        )


@dataclass(frozen=True)
class ProfileRun:
    run_id: str
    profile: Profile


class Tracker:
    """A connection to one tracking store and one experiment."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_root: Path | None = None, origin: str = "") -> None:
        """``origin`` is the flag or variable that named the store, when the caller knows it: a refusal names it."""
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.artifact_root = artifact_root
        self.origin = origin
        set_by = origin or _ANY_ORIGIN
        path = sqlite_file(tracking_uri)
        if path is not None:
            ensure_folder(path.parent, "the MLflow store's folder", set_by)
            if path.is_dir():  # MLflow would retry it for 100 s
                raise UsageError(
                    f"tracking store {tracking_uri!r}: a folder, not a database file; expected "
                    f"sqlite:///path/mlflow.db (set by {set_by})"
                )
        # The registry lives in the same store; without registry_uri the client takes MLflow's global one.
        try:
            with _store_lock(tracking_uri):
                check_sqlite_store(tracking_uri, origin)  # before MLflow migrates it
                self.client = MlflowClient(tracking_uri=tracking_uri, registry_uri=tracking_uri)
        except (MlflowException, ImportError) as exc:  # a URI MLflow has no store for, or lacks the driver of
            if isinstance(exc, ImportError):
                why = f"its database driver {exc.name!r} is not installed"
            elif urllib.parse.urlparse(tracking_uri).scheme in ("", "file"):
                why = "a folder is MLflow's file store, which MLflow 3 no longer serves"
            else:
                why = _first_line(exc).split(". ")[0]
            raise UsageError(
                f"tracking store {tracking_uri!r}: {why}; expected sqlite:///path/mlflow.db, another database URI "
                f"or an MLflow server's http(s):// address (set by {set_by})"
            ) from None
        except Exception as exc:  # the database itself: a file that is not SQLite, a folder, no access
            if not type(exc).__module__.startswith("sqlalchemy"):
                raise
            cause = _first_line(getattr(exc, "orig", None) or exc)
            raise UsageError(
                f"tracking store {tracking_uri!r}: cannot be opened as an MLflow database ({cause}); expected "
                f"sqlite:///path/mlflow.db, another database URI or an MLflow server's http(s):// address (set by "
                f"{set_by})"
            ) from None

    # -- experiment ------------------------------------------------------------------------
    def experiment_id(self, create: bool = True) -> str | None:
        """The experiment's id; created (with an explicit artifact location) when missing."""
        try:
            exp = self.client.get_experiment_by_name(self.experiment)
            if exp is not None:
                if exp.lifecycle_stage == "deleted":
                    raise UsageError(
                        f"experiment {self.experiment!r} is deleted in {self.tracking_uri}; restore it "
                        "or choose another with --experiment"
                    )
                return exp.experiment_id
            if not create:
                return None
            location = None
            if self.artifact_root is not None and _is_local(self.tracking_uri):
                location = (self.artifact_root / self.experiment).resolve().as_uri()
            try:
                return self.client.create_experiment(self.experiment, artifact_location=location)
            except MlflowException:  # another command created it since we looked: use that one
                exp = self.client.get_experiment_by_name(self.experiment)
                if exp is None or exp.lifecycle_stage == "deleted":
                    raise
                return exp.experiment_id
        except MlflowException as exc:
            if _request_failed(exc):  # the server's failure, not the user's
                raise _read_error(exc, self.tracking_uri, self.origin) from exc
            raise UsageError(f"tracking store {self.tracking_uri}: {_first_line(exc)}") from exc

    # -- writing ---------------------------------------------------------------------------
    def log_profile(self, profile: Profile) -> str:
        """Log a finished profile as one complete run and return its id."""
        exp_id = self.experiment_id()
        assert exp_id is not None
        run_id = _create_run(
            self.client,
            exp_id,
            self.tracking_uri,
            run_name=f"{profile.workload}-{profile.device.label}-{time.strftime('%Y%m%d-%H%M%S')}",
            tags=_profile_tags(profile),
        )
        with _failed_run_on_error(self.client, run_id, f"could not log run {run_id} to {self.tracking_uri}"):
            now = int(time.time() * 1000)
            params = {f"param.{k}": v for k, v in profile.params.items()}
            params |= {
                "batch_size": profile.batch_size,
                "max_workers": max(p.workers for p in profile.points),
                "budget_s": profile.budget_s,
                "rse_target": profile.rse_target,
                "device": profile.device.label,
                "fetch_method": profile.baseline.fetch_method[:500],
            }
            metrics = [
                Metric(key, float(getattr(p, key)), now, p.workers) for p in profile.points for key in _POINT_METRICS
            ]
            b, best = profile.baseline, profile.best
            metrics += [
                Metric(k, float(v), now, 0)
                for k, v in {
                    "ceiling": b.ceiling,
                    "ceiling_rse": b.ceiling_rse,
                    "inprocess_prep_rate": b.prep_rate,
                    "fetch_cold_ms": b.fetch_cold_s * 1e3,
                    "fetch_cached_ms": b.fetch_cached_s * 1e3,
                    "fetch_bytes": b.fetch_bytes,
                    "best_workers": best.workers,
                    "best_throughput": best.throughput,
                    "enough_workers": profile.enough().workers,
                    "ceiling_end": b.ceiling_end,
                    "ceiling_end_rse": b.ceiling_end_rse,
                }.items()
                if v is not None and math.isfinite(v)  # an error not estimated (inf) is in profile.json only
            ]
            for i in range(0, len(metrics), 900):  # MLflow caps a batch at 1000 entries
                self.client.log_batch(
                    run_id,
                    metrics=metrics[i : i + 900],
                    params=_params(params) if i == 0 else [],
                )
            with tempfile.TemporaryDirectory(prefix="adlrec-") as tmp:
                d = Path(tmp)
                (d / "curve.csv").write_text(curve_csv(profile))
                plot_curve(profile, d / "curve.png")
                (d / PROFILE_ARTIFACT).write_text(json_text(profile.to_dict()))
                (d / "hardware.json").write_text(json_text(profile.hardware.to_dict()))
                for name in ("curve.csv", "curve.png", PROFILE_ARTIFACT, "hardware.json"):
                    self.client.log_artifact(run_id, str(d / name))
            self.client.log_batch(run_id, tags=[RunTag(COMPLETE_TAG, "true")])
            self.client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
        return run_id

    # -- reading ---------------------------------------------------------------------------
    def runs(self, include_incomplete: bool = False) -> list[Any]:
        """MLflow run objects of this experiment (complete ones only unless asked), newest first."""
        exp_id = self.experiment_id(create=False)
        if exp_id is None:
            return []
        query = "" if include_incomplete else f"tags.`{COMPLETE_TAG}` = 'true' and attributes.status = 'FINISHED'"
        try:
            return list(_all_runs(self.client, exp_id, query))
        except MlflowException as exc:
            raise _read_error(exc, self.tracking_uri, self.origin) from exc

    def profiles(self, skipped: list[str] | None = None) -> list[ProfileRun]:
        """Every complete profile in the experiment, newest first.

        A complete run whose ``profile.json`` cannot be read (deleted, moved, damaged) is left out and named in
        ``skipped``; without ``skipped`` it is a :class:`TrackingError`.  Before, it was MLflow's or json's
        traceback, and one such run stopped ``profiles list``, ``profiles export`` and ``model fit`` for all."""
        out = []
        for run in self.runs():
            try:
                profile = self._profile(run.info.run_id)
            except _Unreadable as exc:
                if skipped is None:
                    raise TrackingError(f"{exc} (in {self.tracking_uri})") from exc.__cause__
                skipped.append(str(exc))
                continue
            out.append(ProfileRun(run_id=run.info.run_id, profile=profile))
        return out

    def _profile(self, run_id: str) -> Profile:
        """The profile a complete run holds; :class:`_Unreadable` when it cannot be read."""
        with tempfile.TemporaryDirectory(prefix="adlrec-") as tmp:
            try:
                path = mlflow.artifacts.download_artifacts(
                    run_id=run_id, artifact_path=PROFILE_ARTIFACT, dst_path=tmp, tracking_uri=self.tracking_uri
                )
                data = json.loads(Path(path).read_text(encoding="utf-8"))
                return Profile.from_dict(data)
            except MlflowException as exc:
                if _request_failed(exc):  # the server's failure, not the run's
                    raise _read_error(exc, self.tracking_uri, self.origin) from exc
                raise _Unreadable(f"run {run_id}: its {PROFILE_ARTIFACT} cannot be read: {_first_line(exc)}") from exc
            except KeyError as exc:
                raise _Unreadable(
                    f"run {run_id}: its {PROFILE_ARTIFACT} is no profile: the key {exc} is missing"
                ) from exc
            except (OSError, ValueError, TypeError, AttributeError, RecursionError) as exc:  # JSON, fields, reading
                raise _Unreadable(
                    f"run {run_id}: its {PROFILE_ARTIFACT} is no profile: {type(exc).__name__}: {_first_line(exc)}"
                ) from exc


class _Unreadable(Exception):
    """A complete run whose profile cannot be read back."""


def _profile_tags(profile: Profile) -> dict[str, str]:
    hw = profile.hardware
    return {
        "adlrec.kind": "profile",
        "adlrec.workload": profile.workload,
        "adlrec.model_hash": profile.source_hash,
        "adlrec.device": profile.device.label,
        "adlrec.emulated": str(profile.device.emulated).lower(),
        "adlrec.hardware": hw.summary,
        "adlrec.hardware.fingerprint": hw.fingerprint,
        "adlrec.hardware.cpu": hw.cpu_model,
        "adlrec.hardware.cores": str(hw.logical_cores),
        "adlrec.hardware.gpus": ", ".join(g.name for g in hw.gpus) or "none",
        "adlrec.command": profile.command[:5000],
        "mlflow.note.content": (
            f"{profile.workload} on {profile.device.title}; {hw.summary}; command: `{profile.command}`"
        ),
    }


def _all_runs(client: MlflowClient, exp_id: str, query: str) -> Iterator[Any]:
    token = None
    while True:
        page = client.search_runs(
            [exp_id], filter_string=query, max_results=500, order_by=["attributes.start_time DESC"], page_token=token
        )
        yield from page
        token = page.token
        if not token:
            return


@contextlib.contextmanager
def _store_lock(tracking_uri: str) -> Iterator[None]:
    """Hold an exclusive lock on a SQLite store's folder while MLflow opens the store: opening a new
    store creates its tables by migrations, and two commands started together on one new store both
    migrated it and failed (alembic's "expected to match one row", "duplicate column name")."""
    path = sqlite_file(tracking_uri)
    if path is None:
        yield
        return
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _is_local(uri: str) -> bool:
    return uri.startswith("sqlite:") or uri.startswith("file:") or "://" not in uri


def _first_line(exc: BaseException) -> str:
    """What ``exc`` says first, past SQLAlchemy's "(raised as a result of Query-invoked autoflush; ...)" line,
    which heads a failed insert and says nothing of why it failed."""
    text = str(exc).strip()
    if text.startswith("(raised as a result of ") and "\n" in text:
        text = text.split("\n", 1)[1].strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _create_run(client: MlflowClient, exp_id: str, tracking_uri: str, **kwargs: Any) -> str:
    """A new run's id; a store that cannot create it is a :class:`TrackingError` naming the store (nothing of
    the run was written, so there is no run to mark FAILED)."""
    try:
        return client.create_run(exp_id, **kwargs).info.run_id
    except (OSError, MlflowException) as exc:
        raise TrackingError(
            f"could not create a run in {tracking_uri}: {type(exc).__name__}: {_first_line(exc)}"
        ) from exc


@contextlib.contextmanager
def _failed_run_on_error(client: MlflowClient, run_id: str, what: str) -> Iterator[None]:
    """Marks run ``run_id`` FAILED when the block raises.  A store's error (OSError, MlflowException) comes
    out as a TrackingError: ``what``, the error, and whether the run could be marked; any other, as it was."""
    try:
        yield
    except BaseException as exc:
        marked = "the run is marked FAILED"
        try:
            client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
        except Exception as again:  # the store that failed may fail again: the first error is the one to tell
            log.warning("could not mark run %s FAILED either: %s", run_id, _first_line(again))
            marked = f"the run could not be marked FAILED either ({_first_line(again)})"
        if isinstance(exc, (OSError, MlflowException)):
            raise TrackingError(f"{what}: {type(exc).__name__}: {_first_line(exc)}; {marked}") from exc
        raise


# -- the throughput model in the MLflow Model Registry ---------------------------------------------

MODEL_NAME = "adlrec-throughput"
CHAMPION = "champion"
MODEL_EXPERIMENT = "adlrec-models"
SPEC_TAG = "adlrec.spec"
_ABSENT = frozenset({"RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"})  # no such model, no such alias


class ThroughputPyfunc(mlflow.pyfunc.PythonModel):
    """A fitted throughput model as an ``mlflow.pyfunc`` model.

    Input: one row per (job, worker count): the probe's features (``FEATURE_COLUMNS``) and
    ``workers``.  Output: a ``throughput`` column, predicted samples/s.
    """

    # The model signature validates input; MLflow's type-hint validation would wrap predict and
    # warn, on every import, that it found no list[...] hints.
    _skip_type_hint_validation = True

    def __init__(self, model: Any) -> None:
        self.model = model

    def predict(self, context, model_input, params=None):
        import pandas as pd

        from adlrec.predict.features import FEATURE_COLUMNS, ProbeError, ProbeFeatures

        if not isinstance(model_input, pd.DataFrame):
            model_input = pd.DataFrame(model_input)
        missing = [c for c in (*FEATURE_COLUMNS, "workers") if c not in model_input.columns]
        if missing:
            raise ProbeError(f"probe input is missing column(s) {', '.join(missing)}")
        out = []
        for i, row in enumerate(model_input.to_dict("records")):
            w = row["workers"]
            if not float(w).is_integer() or w < 0:
                raise ProbeError(f"probe input row {i}: workers={w!r}: expected a whole number >= 0")
            try:
                f = ProbeFeatures.from_dict(row)
            except ProbeError as exc:
                raise ProbeError(f"row {i}: {exc}") from None
            out.append(float(self.model.predict(f, [int(w)])[0]))
        return pd.DataFrame({"throughput": out})


def _signature() -> Any:
    from mlflow.models import ModelSignature
    from mlflow.types import ColSpec, Schema

    from adlrec.predict.features import FEATURE_COLUMNS

    types = {"batch_size": "long", "cores": "long", "device_kind": "string"}
    inputs = [ColSpec(types.get(c, "double"), c) for c in FEATURE_COLUMNS] + [ColSpec("long", "workers")]
    return ModelSignature(inputs=Schema(inputs), outputs=Schema([ColSpec("double", "throughput")]))


def _requirements() -> list[str]:
    """Pinned explicitly: letting MLflow infer them costs seconds and guesses."""
    from importlib.metadata import version

    from adlrec import __version__

    pins = [f"{d}=={version(d)}" for d in ("scikit-learn", "numpy", "pandas", "cloudpickle")]
    return [*pins, f"adlrec=={__version__}"]


_OTHER_ADLREC = "its model may have been written by another version of adlrec, or damaged"
# A probe every adlrec model can predict, at the worker counts the service asks first and last
_TEST_PROBE = {
    "ceiling": 1000.0,
    "prep_rate_0": 300.0,
    "prep_rate_1": 250.0,
    "prep_rate_2": 450.0,
    "fetch_extra_s": 0.0,
    "batch_size": 32,
    "cores": 8,
    "device_kind": "cuda",
}


def predict_throughputs(pyfunc: Any, probe: Mapping[str, Any], workers: Sequence[int]) -> Any:
    """A loaded throughput model's samples/s for ``probe`` at each of ``workers`` (a numpy array); raises
    unless it gives one number per count.  Both the registry's load check and the service's predictor ask
    the model this way, so a model that passes the one answers the other in the same shape."""
    import numpy as np
    import pandas as pd

    rows = pd.DataFrame([dict(probe) | {"workers": w} for w in workers])
    out = np.asarray(pyfunc.predict(rows)["throughput"], dtype=float)
    if out.shape != (len(workers),):
        raise ValueError(f"expected {len(workers)} throughputs, got an array of shape {out.shape}")
    return out


def _check_predicts(pyfunc: Any) -> None:
    """Raise unless ``pyfunc`` predicts a finite throughput for each row of a test probe."""
    import numpy as np

    out = predict_throughputs(pyfunc, _TEST_PROBE, (0, 1, 2, 64))
    if not np.all(np.isfinite(out)):
        raise ValueError(f"expected {len(out)} finite throughputs, got {out.tolist()}")


@dataclass(frozen=True)
class Champion:
    version: str
    spec: dict[str, Any] | None  # None: no readable adlrec.spec tag (a version adlrec did not register)
    run_id: str | None


class ModelRegistry:
    """The registered throughput model: versions, the champion alias, loading for prediction."""

    def __init__(self, tracking_uri: str, artifact_root: Path | None = None, origin: str = "") -> None:
        self.tracking_uri = tracking_uri
        self.models = Tracker(tracking_uri, MODEL_EXPERIMENT, artifact_root, origin)
        self.client = self.models.client

    def champion(self) -> Champion | None:
        """The version @champion points at; None when there is none.  A store that fails is an error: read as
        no champion, ``model list`` said there was none and a fit moved the alias to its version."""
        try:
            mv = self.client.get_model_version_by_alias(MODEL_NAME, CHAMPION)
        except MlflowException as exc:
            if exc.error_code in _ABSENT:
                return None  # no registered model, or no alias yet
            raise _read_error(exc, self.tracking_uri, self.models.origin) from exc
        try:
            spec = json.loads(mv.tags.get(SPEC_TAG, "null"))
        except ValueError:
            spec = None
        return Champion(
            version=str(mv.version), spec=spec if isinstance(spec, dict) and spec else None, run_id=mv.run_id
        )

    def register(
        self,
        model: Any,
        evaluation: Any,
        params: dict[str, Any],
        champion_metrics: dict[str, float] | None = None,
        example: dict[str, Any] | None = None,
    ) -> tuple[str, str]:
        """Log a fit as a run and register its model as a new version; returns (run id, version)."""
        import pandas as pd

        exp_id = self.models.experiment_id()
        assert exp_id is not None
        run_id = _create_run(
            self.client, exp_id, self.tracking_uri, run_name=f"fit-{model.kind}-{time.strftime('%Y%m%d-%H%M%S')}"
        )
        with _failed_run_on_error(self.client, run_id, f"could not register the model from run {run_id}"):
            spec = model.spec()
            all_params = {f"spec.{k}": v for k, v in spec.items()} | params
            metrics = {f"cv_{k}": v for k, v in evaluation.metrics().items()}
            metrics |= {f"champion_cv_{k}": v for k, v in (champion_metrics or {}).items()}
            now = int(time.time() * 1000)
            self.client.log_batch(
                run_id,
                metrics=[Metric(k, float(v), now, 0) for k, v in metrics.items()],
                params=_params(all_params),
                tags=[RunTag("adlrec.kind", "model-fit"), RunTag(SPEC_TAG, json.dumps(spec, sort_keys=True))],
            )
            with tempfile.TemporaryDirectory(prefix="adlrec-") as tmp:
                table = Path(tmp) / "evaluation.csv"
                pd.DataFrame(list(evaluation.rows)).to_csv(table, index=False)
                self.client.log_artifact(run_id, str(table))
            with (
                _uris(self.tracking_uri),
                mlflow.start_run(run_id=run_id),
                _quiet("mlflow.pyfunc"),
                _without_registration_notes(),
            ):
                info = mlflow.pyfunc.log_model(
                    name="model",
                    python_model=ThroughputPyfunc(model),
                    signature=_signature(),
                    input_example=pd.DataFrame([example]) if example else None,
                    pip_requirements=_requirements(),
                    registered_model_name=MODEL_NAME,
                )
            version = str(info.registered_model_version)
            self.client.set_model_version_tag(MODEL_NAME, version, SPEC_TAG, json.dumps(spec, sort_keys=True))
            self.client.set_model_version_tag(MODEL_NAME, version, "cv_median_ape", f"{evaluation.median_ape:.6f}")
            self.client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
        return run_id, version

    def set_champion(self, version: str) -> None:
        self.client.set_registered_model_alias(MODEL_NAME, CHAMPION, version)

    def load(self, alias: str = CHAMPION) -> tuple[Any, str] | None:
        """The pyfunc model at ``models:/adlrec-throughput@alias`` and its version, or None when no version
        has the alias.  A version that has it but cannot be loaded (its artifacts deleted or moved) raises
        ``TrackingError``: predicting with another model than the one asked for would hide that.  So does
        one whose pickled model this adlrec cannot unpickle (written by another version of adlrec, or
        damaged): unpickling raises whatever the bytes lead to (AttributeError, ValueError, ...).  So does
        one that loads but cannot predict a probe (an older adlrec's model, trained on other features):
        found only when a job asked, it was a traceback from ``predict`` after the probe, and an HTTP 500
        for every job registering with the service."""
        try:
            mv = self.client.get_model_version_by_alias(MODEL_NAME, alias)
        except MlflowException:
            return None
        try:
            with _uris(self.tracking_uri), _quiet("mlflow.pyfunc"):
                pyfunc = mlflow.pyfunc.load_model(f"models:/{MODEL_NAME}@{alias}")
        except Exception as exc:
            if isinstance(exc, (OSError, MlflowException)):
                raise self._unusable(
                    mv, alias, "cannot be loaded", exc, "its artifacts may have been deleted or moved"
                ) from exc
            raise self._unusable(mv, alias, "cannot be loaded", exc, _OTHER_ADLREC) from exc
        try:
            _check_predicts(pyfunc)
        except Exception as exc:
            raise self._unusable(mv, alias, "loads but cannot predict a test probe", exc, _OTHER_ADLREC) from exc
        return pyfunc, str(mv.version)

    def _unusable(self, mv: Any, alias: str, what: str, exc: Exception, why: str) -> TrackingError:
        return TrackingError(
            f"{MODEL_NAME} v{mv.version} (@{alias}) in {self.tracking_uri} {what}: "
            f"{type(exc).__name__}: {_first_line(exc)}; {why}: "
            f"`adlrec model fit` registers a new version and moves @{alias} to it"
        )

    def loadable(self, alias: str = CHAMPION) -> bool:
        """Whether the version with ``alias``, if any, can be loaded."""
        try:
            self.load(alias)
        except TrackingError:
            return False
        return True

    def versions(self) -> list[Any]:
        try:
            return sorted(self.client.search_model_versions(f"name = '{MODEL_NAME}'"), key=lambda mv: int(mv.version))
        except MlflowException as exc:
            if exc.error_code in _ABSENT:
                return []
            raise _read_error(exc, self.tracking_uri, self.models.origin) from exc


class _quiet:
    """Hold a logger at ERROR for a block: MLflow warns that a python_model object is pickled,
    which is how adlrec ships its own fitted model on purpose."""

    def __init__(self, name: str) -> None:
        self.logger = logging.getLogger(name)

    def __enter__(self) -> None:
        self.level = self.logger.level
        self.logger.setLevel(logging.ERROR)

    def __exit__(self, *exc: object) -> None:
        self.logger.setLevel(self.level)


@contextlib.contextmanager
def _without_registration_notes() -> Iterator[None]:
    """MLflow prints "Successfully registered model ...", "Registered model ... already exists. Creating a
    new version ..." and "Created version ..." to stderr, beside the version `adlrec model fit` reports on
    stdout: keep them out, and pass on anything else written to stderr meanwhile."""
    import io
    import sys

    notes = ("Successfully registered model ", "Registered model ", "Created version ")
    caught = io.StringIO()
    try:
        with contextlib.redirect_stderr(caught):
            yield
    finally:
        rest = [line for line in caught.getvalue().splitlines(keepends=True) if not line.startswith(notes)]
        sys.stderr.write("".join(rest))


class _uris:
    """Point MLflow's fluent API at one store for a block, and put the previous one back."""

    def __init__(self, uri: str) -> None:
        self.uri = uri

    def __enter__(self) -> None:
        self.saved = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
        mlflow.set_tracking_uri(self.uri)
        mlflow.set_registry_uri(self.uri)

    def __exit__(self, *exc: object) -> None:
        mlflow.set_tracking_uri(self.saved[0])
        mlflow.set_registry_uri(self.saved[1])


# -- simulations (adlrec simulate --log-mlflow) --------------------------------------------------
SIMULATION_ARTIFACT = "comparison.csv"


def log_simulation(
    tracker: Tracker,
    params: dict[str, Any],
    rows: list[dict[str, Any]],
    table_csv: str,
    note: str = "",
) -> str:
    """Log one policy comparison as one complete run and return its id.

    ``params`` (policy list, node, trace hash, settings) become run params; every numeric field of
    each row becomes a metric ``<policy>.<field>``; ``table_csv`` is the ``comparison.csv`` artifact.
    """
    exp_id = tracker.experiment_id()
    assert exp_id is not None
    client = tracker.client
    run_id = _create_run(
        client,
        exp_id,
        tracker.tracking_uri,
        run_name=f"simulate-{time.strftime('%Y%m%d-%H%M%S')}",
        tags={"adlrec.kind": "simulation", "mlflow.note.content": note or "adlrec simulate"},
    )
    with _failed_run_on_error(client, run_id, f"could not log run {run_id} to {tracker.tracking_uri}"):
        now = int(time.time() * 1000)
        metrics = [
            Metric(f"{row['policy']}.{key}", float(value), now, 0)
            for row in rows
            for key, value in row.items()
            if key != "policy" and isinstance(value, (int, float)) and value == value and abs(value) != float("inf")
        ]
        for i in range(0, max(1, len(metrics)), 900):
            client.log_batch(
                run_id,
                metrics=metrics[i : i + 900],
                params=_params(params) if i == 0 else [],
            )
        with tempfile.TemporaryDirectory(prefix="adlrec-") as tmp:
            path = Path(tmp) / SIMULATION_ARTIFACT
            path.write_text(table_csv)
            client.log_artifact(run_id, str(path))
        client.log_batch(run_id, tags=[RunTag(COMPLETE_TAG, "true")])
        client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
    return run_id


# ==============================================================================================
# Live metrics of the jobs the allocation service knows: one MLflow run per job (docs/service.md)
# ==============================================================================================
LIVE_EXPERIMENT = "adlrec-live"
LIVE_JOB_TAG = "adlrec.job_id"


@dataclass(frozen=True)
class LiveSample:
    """One heartbeat's measurements of a job, to log as stepped metrics of its run."""

    job_id: str
    node: str
    at: float  # seconds since the epoch
    step: int  # the job's heartbeat number (the metric step)
    metrics: dict[str, float]  # e.g. throughput, workers, data_wait, planned_workers


class LiveRuns:
    """One run per job in experiment ``adlrec-live``: created at its first sample, found again after a
    restart by its ``adlrec.job_id`` tag, ended FINISHED (finished) or KILLED (expired).

    At construction ONE paged search reads every RUNNING run of the experiment and keys it by its
    job-id tag, so later lookups are memory only (a search per job would scan the growing runs table
    once per job).  The writer process is the only one that creates or ends these runs, so the index
    stays right; a job with two running runs (a crash between create and index) keeps the newest."""

    def __init__(self, tracking_uri: str, artifact_root: Path | None = None) -> None:
        self.tracker = Tracker(tracking_uri, LIVE_EXPERIMENT, artifact_root)
        self.client = self.tracker.client
        exp_id = self.tracker.experiment_id()
        assert exp_id is not None
        self.experiment_id = exp_id
        self._runs: dict[str, str] = {}  # job id -> run id of its RUNNING run
        for run in _all_runs(self.client, exp_id, "attributes.status = 'RUNNING'"):  # newest first
            job_id = run.data.tags.get(LIVE_JOB_TAG)
            if job_id is not None:
                self._runs.setdefault(job_id, run.info.run_id)

    def known(self) -> dict[str, str]:
        """Job id -> run id of every running run found or created so far."""
        return dict(self._runs)

    def run_id(self, job_id: str, node: str) -> str:
        """The job's running run, created if it has none."""
        run_id = self._runs.get(job_id)
        if run_id is None:
            run = self.client.create_run(
                self.experiment_id, run_name=f"job-{job_id}", tags={LIVE_JOB_TAG: job_id, "adlrec.node": node}
            )
            run_id = self._runs[job_id] = run.info.run_id
        return run_id

    def log_job(self, job_id: str, samples: list[LiveSample]) -> int:
        """Log one job's samples into its run (created if needed); returns the number of metric values."""
        if not samples:
            return 0
        run_id = self.run_id(job_id, samples[0].node)
        metrics = [Metric(k, float(v), int(s.at * 1000), s.step) for s in samples for k, v in s.metrics.items()]
        for i in range(0, len(metrics), 900):
            self.client.log_batch(run_id, metrics=metrics[i : i + 900])
        return len(metrics)

    def end(self, job_id: str, status: str) -> None:
        """End the job's run, if it has one: ``finished`` -> FINISHED, anything else (expired) -> KILLED."""
        run_id = self._runs.get(job_id)
        if run_id is not None:
            self.client.set_terminated(run_id, "FINISHED" if status == "finished" else "KILLED")
            self._runs.pop(job_id, None)


def _params(params: dict[str, Any]) -> list[Param]:
    """``params`` as MLflow params, a value too long for MLflow cut to its first 6000 characters with a
    warning: a long value (a list of augmentations, notes) is the user's to have, and the run's
    profile.json keeps it whole."""
    out = []
    for key, value in params.items():
        text = str(value)
        if len(text) > _PARAM_MAX:
            log.warning("parameter %s is %d characters as text; MLflow keeps its first %d", key, len(text), _PARAM_MAX)
            text = text[:_PARAM_MAX]
        out.append(Param(key, text))
    return out


__all__ += ["LiveRuns", "LiveSample"]
