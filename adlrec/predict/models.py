"""Throughput models: predict a job's whole curve ``T(w)`` from its probe features.

Three kinds, compared on the same held-out data by :mod:`adlrec.predict.evaluate`:

* ``analytic``: a pipeline model.  In-process loading is serial with the step; with ``w`` workers
  the loader overlaps the step and delivers ``L(w)``, and the job runs at the slower of the two.
  ``L`` grows from the one-worker rate with the parallel efficiency seen between one and two
  workers, up to the free cores, then declines with a contention term.  On ``cpu`` the step itself
  needs the cores the workers take, so throughput is capped where both together fill the node.
* ``interp``: Synergy-style: the probed points (0, 1, 2 workers; ``min(C, P(w))``) interpolated,
  flat past the last probed point.
* ``learned``: gradient boosting on the features plus ``w`` that learns a multiplicative
  correction to ``analytic`` (``log T - log analytic``), so it extrapolates like the pipeline model
  where data are thin and corrects it where they are not.

Every model is a pure function of (spec, features, workers) once fitted; the fitted state of
``learned`` is a scikit-learn estimator.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import astuple, dataclass, field
from typing import Any, Protocol

import numpy as np

from adlrec.predict.features import ProbeFeatures
from adlrec.schemas import ENOUGH_SHARE

__all__ = [
    "as_throughputs",
    "AnalyticModel",
    "InterpModel",
    "LearnedModel",
    "ThroughputModel",
    "analytic_curve",
    "make_model",
    "smallest_reaching",
]

_TINY = math.ulp(0.0)  # the smallest positive float
CONTENTION = 0.15  # relative loss of loader rate per extra worker, as a share of free cores, past them


class ThroughputModel(Protocol):
    kind: str

    def spec(self) -> dict[str, Any]: ...

    def fit(self, X: Sequence[ProbeFeatures], curves: Sequence[Sequence[float]]) -> ThroughputModel: ...

    def predict(self, f: ProbeFeatures, workers: Sequence[int]) -> np.ndarray: ...


def analytic_curve(f: ProbeFeatures, workers: Sequence[int]) -> np.ndarray:
    c, p0, p1, p2 = f.ceiling, f.prep_rate_0, f.prep_rate_1, f.prep_rate_2
    free = max(1, f.cores - 1) if f.compute_on_cpu else f.cores
    efficiency = min(1.0, max(0.2, p2 / (2 * p1)))
    out = []
    for w in workers:
        if w < 0:
            raise ValueError(f"workers must be >= 0, got {w}")
        if w == 0:
            # load then step, one after the other; cold reads add in full
            out.append(1.0 / (1.0 / c + 1.0 / p0 + f.fetch_extra_s))
            continue
        m = min(w, free)
        loader = p1 * (1.0 + efficiency * (m - 1))
        if w > free:
            loader /= 1.0 + CONTENTION * (w - free) / free
        loader = 1.0 / (1.0 / loader + f.fetch_extra_s / w)
        cap = c
        if f.compute_on_cpu:
            # step and loading share the node's cores: T * (cores / C + 1 / P0) <= cores
            cap = 1.0 / (1.0 / c + 1.0 / (f.cores * p0))
        out.append(min(cap, loader))
    return np.asarray(out, dtype=float)


@dataclass
class AnalyticModel:
    kind: str = "analytic"

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def fit(self, X, curves) -> AnalyticModel:
        return self

    def predict(self, f: ProbeFeatures, workers: Sequence[int]) -> np.ndarray:
        return analytic_curve(f, workers)


@dataclass
class InterpModel:
    kind: str = "interp"

    def spec(self) -> dict[str, Any]:
        return {"kind": self.kind}

    def fit(self, X, curves) -> InterpModel:
        return self

    def predict(self, f: ProbeFeatures, workers: Sequence[int]) -> np.ndarray:
        probed_w = [0.0, 1.0, 2.0]
        probed_t = [
            1.0 / (1.0 / f.ceiling + 1.0 / f.prep_rate_0),
            min(f.ceiling, f.prep_rate_1),
            min(f.ceiling, f.prep_rate_2),
        ]
        return np.interp(np.asarray(workers, dtype=float), probed_w, probed_t)


def _row(f: ProbeFeatures, w: int, a: float) -> list[float]:
    # Ratios as differences of logs, and the analytic value floored at the smallest float: any rate
    # ProbeFeatures accepts (> 0) gives a row.  A quotient of a tiny rate by a large one underflowed to 0,
    # and math.log(0) made registering such a probe with the service an HTTP 500.
    c = math.log(f.ceiling)
    return [
        float(w),
        w / f.cores,
        min(w, f.cores) / f.cores,
        float(f.cores),
        c,
        math.log(f.prep_rate_0) - c,
        math.log(f.prep_rate_1) - c,
        math.log(f.prep_rate_2) - math.log(f.prep_rate_1),
        math.log(max(a, _TINY)) - c,
        f.fetch_extra_s * f.ceiling,
        math.log(f.batch_size),
        1.0 if f.compute_on_cpu else 0.0,
    ]


@dataclass
class LearnedModel:
    n_estimators: int = 300
    max_depth: int = 3
    learning_rate: float = 0.05
    subsample: float = 0.8
    seed: int = 0
    kind: str = "learned"
    estimator: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Refuse what scikit-learn would refuse only when fitting, as one line naming the range."""
        for name, ok, valid in (
            ("n_estimators", self.n_estimators >= 1, "a whole number >= 1"),
            ("max_depth", self.max_depth >= 1, "a whole number >= 1"),
            ("learning_rate", 0 < self.learning_rate < math.inf, "a finite number > 0"),
            ("subsample", 0 < self.subsample <= 1, "a number in (0, 1]"),
            ("seed", 0 <= self.seed < 2**32, "a whole number in [0, 2**32 - 1]"),
        ):
            if not ok:
                raise ValueError(f"{name}={getattr(self, name)!r}: expected {valid}")

    def spec(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "n_estimators": self.n_estimators,
            "max_depth": self.max_depth,
            "learning_rate": self.learning_rate,
            "subsample": self.subsample,
            "seed": self.seed,
        }

    def fit(self, X: Sequence[ProbeFeatures], curves: Sequence[Sequence[float]]) -> LearnedModel:
        from sklearn.ensemble import GradientBoostingRegressor

        rows, targets = [], []
        # Boosting with subsample < 1 draws rows by position: in the order given, the same curves read from
        # the store (newest first) and from profiles/ (by file name) fitted different models, and scored
        # differently in cross validation.  In a canonical order the model depends on the curves alone.
        pairs = sorted(zip(X, curves, strict=True), key=lambda fc: (astuple(fc[0]), tuple(fc[1])))
        for f, curve in pairs:
            ws = list(range(len(curve)))
            a = analytic_curve(f, ws)
            for w, t, a_w in zip(ws, curve, a, strict=True):
                if t > 0:
                    rows.append(_row(f, w, a_w))
                    targets.append(math.log(t / a_w))
        if len(rows) < 2:
            raise ValueError("need at least two measured points to fit the learned model")
        self.estimator = GradientBoostingRegressor(
            n_estimators=self.n_estimators,
            max_depth=self.max_depth,
            learning_rate=self.learning_rate,
            subsample=self.subsample,
            random_state=self.seed,
        ).fit(np.asarray(rows), np.asarray(targets))
        return self

    def predict(self, f: ProbeFeatures, workers: Sequence[int]) -> np.ndarray:
        if self.estimator is None:
            raise RuntimeError("LearnedModel.predict before fit")
        a = analytic_curve(f, workers)
        X = np.asarray([_row(f, w, a_w) for w, a_w in zip(workers, a, strict=True)])
        # the correction is learned from measurements that scatter around the ceiling, some above it:
        # no job trains faster than its step alone allows, whatever noise the model learned
        return np.minimum(a * np.exp(self.estimator.predict(X)), f.ceiling)


_KINDS = {"analytic": AnalyticModel, "interp": InterpModel, "learned": LearnedModel}


def make_model(spec: dict[str, Any]) -> ThroughputModel:
    """A fresh, unfitted model from its spec (``{"kind": ..., **hyperparameters}``)."""
    spec = dict(spec)
    kind = spec.pop("kind", None)
    if kind not in _KINDS:
        raise ValueError(f"unknown model kind {kind!r}; expected one of {', '.join(sorted(_KINDS))}")
    try:
        return _KINDS[kind](**spec)
    except TypeError as exc:
        raise ValueError(f"bad hyperparameters for {kind}: {exc}") from None


def as_throughputs(curve: Any) -> np.ndarray:
    """A registered model's predicted curve as throughputs: a count predicted below 0 or not finite has none
    (0).  A model adlrec did not fit may predict either; the service and ``adlrec predict`` read it alike."""
    curve = np.asarray(curve, dtype=float)
    return np.where(np.isfinite(curve), np.maximum(curve, 0.0), 0.0)


def smallest_reaching(curve: Sequence[float], share: float = ENOUGH_SHARE) -> int:
    """The fewest workers whose throughput reaches ``share`` of the curve's maximum."""
    peak = max(curve)
    return next(w for w, t in enumerate(curve) if t >= share * peak)
