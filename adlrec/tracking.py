"""Everything adlrec stores in MLflow: the only module that imports mlflow.

One run per profiled curve, in a stable experiment.  A run is written in one go after the sweep
has finished: created, filled (tags, params, stepped metrics, artifacts), then marked FINISHED with
the tag ``adlrec.complete=true``.  If anything fails while writing, the run is marked FAILED, and
readers only ever return complete runs.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
# A new SQLite store runs its migrations through alembic, which logs a page of INFO lines.
logging.getLogger("alembic").setLevel(logging.WARNING)
logging.getLogger("mlflow.store.db.utils").setLevel(logging.WARNING)

import mlflow  # noqa: E402
from mlflow.entities import Metric, Param, RunStatus, RunTag  # noqa: E402
from mlflow.exceptions import MlflowException  # noqa: E402
from mlflow.tracking import MlflowClient  # noqa: E402

from adlrec.errors import TrackingError, UsageError  # noqa: E402
from adlrec.profile.report import curve_csv, plot_curve  # noqa: E402
from adlrec.schemas import Profile  # noqa: E402

__all__ = ["ProfileRun", "Tracker"]

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


@dataclass(frozen=True)
class ProfileRun:
    run_id: str
    profile: Profile


class Tracker:
    """A connection to one tracking store and one experiment."""

    def __init__(self, tracking_uri: str, experiment: str, artifact_root: Path | None = None) -> None:
        self.tracking_uri = tracking_uri
        self.experiment = experiment
        self.artifact_root = artifact_root
        if tracking_uri.startswith("sqlite:///"):
            Path(tracking_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.client = MlflowClient(tracking_uri=tracking_uri)

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
            return self.client.create_experiment(self.experiment, artifact_location=location)
        except MlflowException as exc:
            raise UsageError(f"tracking store {self.tracking_uri}: {_first_line(exc)}") from exc

    # -- writing ---------------------------------------------------------------------------
    def log_profile(self, profile: Profile) -> str:
        """Log a finished profile as one complete run and return its id."""
        exp_id = self.experiment_id()
        assert exp_id is not None
        tags = _profile_tags(profile)
        run = self.client.create_run(
            exp_id,
            run_name=f"{profile.workload}-{profile.device.label}-{time.strftime('%Y%m%d-%H%M%S')}",
            tags=tags,
        )
        run_id = run.info.run_id
        try:
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
                }.items()
            ]
            for i in range(0, len(metrics), 900):  # MLflow caps a batch at 1000 entries
                self.client.log_batch(
                    run_id,
                    metrics=metrics[i : i + 900],
                    params=[Param(k, str(v)[:6000]) for k, v in params.items()] if i == 0 else [],
                )
            with tempfile.TemporaryDirectory(prefix="adlrec-") as tmp:
                d = Path(tmp)
                (d / "curve.csv").write_text(curve_csv(profile))
                plot_curve(profile, d / "curve.png")
                (d / PROFILE_ARTIFACT).write_text(json.dumps(profile.to_dict(), indent=2))
                (d / "hardware.json").write_text(json.dumps(profile.hardware.to_dict(), indent=2))
                for name in ("curve.csv", "curve.png", PROFILE_ARTIFACT, "hardware.json"):
                    self.client.log_artifact(run_id, str(d / name))
            self.client.log_batch(run_id, tags=[RunTag(COMPLETE_TAG, "true")])
            self.client.set_terminated(run_id, RunStatus.to_string(RunStatus.FINISHED))
        except BaseException as exc:
            self.client.set_terminated(run_id, RunStatus.to_string(RunStatus.FAILED))
            if isinstance(exc, (OSError, MlflowException)):
                raise TrackingError(
                    f"could not log run {run_id} to {self.tracking_uri}: {type(exc).__name__}: {_first_line(exc)}; "
                    "the run is marked FAILED"
                ) from exc
            raise
        return run_id

    # -- reading ---------------------------------------------------------------------------
    def runs(self, include_incomplete: bool = False) -> list[Any]:
        """MLflow run objects of this experiment (complete ones only unless asked), newest first."""
        exp_id = self.experiment_id(create=False)
        if exp_id is None:
            return []
        query = "" if include_incomplete else f"tags.`{COMPLETE_TAG}` = 'true' and attributes.status = 'FINISHED'"
        return list(_all_runs(self.client, exp_id, query))

    def profiles(self) -> list[ProfileRun]:
        """Every complete profile in the experiment, newest first."""
        out = []
        for run in self.runs():
            with tempfile.TemporaryDirectory(prefix="adlrec-") as tmp:
                path = mlflow.artifacts.download_artifacts(
                    run_id=run.info.run_id,
                    artifact_path=PROFILE_ARTIFACT,
                    dst_path=tmp,
                    tracking_uri=self.tracking_uri,
                )
                data = json.loads(Path(path).read_text())
            out.append(ProfileRun(run_id=run.info.run_id, profile=Profile.from_dict(data)))
        return out


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


def _is_local(uri: str) -> bool:
    return uri.startswith("sqlite:") or uri.startswith("file:") or "://" not in uri


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
