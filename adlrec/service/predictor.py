"""Predicted curves for registering jobs: the registered throughput model, else the analytic one.

The model is loaded from the MLflow registry by alias (``models:/adlrec-throughput@champion``) and
reloaded when the alias moves to another version (:meth:`Predictor.refresh`, run by each periodic
recompute).  When no model is registered, or the registry cannot be read before one is loaded, the
analytic model predicts and :attr:`Predictor.source` says so.  A registry that stops answering once a
model is loaded keeps that model in use (its ``note`` says so): falling back then re-predicted every
active job's curve with the analytic model, and again with the model when the registry came back,
each time changing the plans and resizing the jobs for an outage of the registry alone.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adlrec.errors import first_line
from adlrec.predict.features import ProbeFeatures
from adlrec.predict.models import AnalyticModel, as_throughputs

__all__ = ["ModelInfo", "Predictor"]

log = logging.getLogger("adlrec.service")

MODEL_NAME = "adlrec-throughput"  # adlrec.tracking.MODEL_NAME, kept here so importing this needs no mlflow
# MLflow's error codes for "no such model" and "no such alias" (adlrec.tracking._ABSENT): any other failure
# of the lookup is the registry not answering, which says nothing of which model is the champion
ABSENT = frozenset({"RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"})


@dataclass(frozen=True)
class ModelInfo:
    """The throughput model in use."""

    name: str  # registered model name, or "analytic" for the fallback
    version: str | None  # registry version; None for the fallback
    alias: str  # the alias the service follows
    source: str  # how a predicted curve names its origin: "adlrec-throughput v3" or "analytic"
    note: str = ""  # why the fallback is in use, if it is


class Predictor:
    """Thread-safe: routes predict while the scheduler refreshes."""

    def __init__(self, tracking_uri: str, artifact_root: Path | None, alias: str = "champion") -> None:
        self.tracking_uri = tracking_uri
        self.artifact_root = artifact_root
        self.alias = alias
        self._lock = threading.Lock()
        self._pyfunc: Any = None
        self._info = ModelInfo("analytic", None, alias, "analytic", "not loaded yet")
        self._registry: Any = None
        self._unloadable: str | None = None  # the version that failed to load, not tried again until it changes

    @property
    def info(self) -> ModelInfo:
        return self._info

    def refresh(self) -> bool:
        """Load the model the alias points at if it moved; returns True when the model changed."""
        try:
            if self._registry is None:
                from adlrec.tracking import ModelRegistry  # mlflow is heavy: import it only here

                self._registry = ModelRegistry(self.tracking_uri, self.artifact_root)
            champ = self._registry.client.get_model_version_by_alias(MODEL_NAME, self.alias)
            version = str(champ.version)
        except Exception as exc:
            if self._info.version is not None and getattr(exc, "error_code", None) not in ABSENT:
                return self._keep(exc)  # the registry is away: the champion in use is still the champion
            # no model, no alias, or no model loaded yet and the registry away: fall back, say why
            return self._fall_back(f"no {MODEL_NAME}@{self.alias} in {self.tracking_uri} ({type(exc).__name__})")
        if version in (self._info.version, self._unloadable):
            if self._info.note and version == self._info.version:  # the registry answers again
                log.info("throughput model: the registry answers again; %s is still @%s", self._info.source, self.alias)
                with self._lock:
                    self._info = ModelInfo(self._info.name, self._info.version, self.alias, self._info.source)
            return False
        try:
            loaded = self._registry.load(self.alias)
        except Exception as exc:  # TrackingError: a champion this adlrec cannot load (its artifacts gone, its
            # pickle another adlrec's): the service starts and predicts with the analytic model, and says why
            self._unloadable = version
            return self._fall_back(str(exc), logging.ERROR)
        if loaded is None:
            return False
        pyfunc, version = loaded
        with self._lock:
            self._pyfunc = pyfunc
            self._info = ModelInfo(MODEL_NAME, version, self.alias, f"{MODEL_NAME} v{version}")
        log.info("throughput model: %s@%s is version %s", MODEL_NAME, self.alias, version)
        return True

    def _keep(self, exc: Exception) -> bool:
        """The registry did not answer while a model is in use: keep it (its jobs' curves stay), say so once."""
        note = (
            f"the registry at {self.tracking_uri} did not answer the last check ({type(exc).__name__}); "
            f"predicting with {self._info.source} until it does"
        )
        if self._info.note != note:
            log.warning("throughput model: %s: %s", note, first_line(exc))
            with self._lock:
                self._info = ModelInfo(self._info.name, self._info.version, self.alias, self._info.source, note)
        return False

    def _fall_back(self, note: str, level: int = logging.INFO) -> bool:
        """Predict with the analytic model from now on, ``note`` saying why; True if a model was in use."""
        was_model = self._info.version is not None
        if self._info.note != note:
            log.log(level, "throughput model: analytic fallback; %s", note)
        with self._lock:
            self._pyfunc = None
            self._info = ModelInfo("analytic", None, self.alias, "analytic", note)
        return was_model

    def predict(self, features: ProbeFeatures, max_workers: int) -> tuple[tuple[float, ...], str]:
        """The curve for w = 0..max_workers and its source."""
        workers = list(range(max_workers + 1))
        with self._lock:
            pyfunc, info = self._pyfunc, self._info
        source = info.source
        if pyfunc is None:
            curve = AnalyticModel().predict(features, workers)
        else:
            from adlrec.tracking import predict_throughputs  # loaded with the model, so mlflow already is

            try:
                curve = predict_throughputs(pyfunc, features.to_dict(), workers)
            except Exception as exc:  # it predicted the test probe, not this one: the job still registers
                log.error(
                    "throughput model: %s failed on a probe (%s: %s); the analytic model predicts that job",
                    info.source,
                    type(exc).__name__,
                    first_line(exc),
                )
                curve = AnalyticModel().predict(features, workers)
                source = f"analytic ({info.source} failed on this probe: {type(exc).__name__})"
        return tuple(float(t) for t in as_throughputs(curve)), source
