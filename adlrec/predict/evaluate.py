"""Leave-one-workload-out cross validation of throughput models over measured curves.

A *workload* is a bundled example (or any model.py) with one set of parameters; all of its curves
(every device and step time it was profiled on) are held out together, so a model is always scored
on a job it has never seen, as a new job would be.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adlrec.predict.features import ProbeError, ProbeFeatures, features_from_profile
from adlrec.predict.models import make_model
from adlrec.profile.check import profile_problem
from adlrec.profile.library import newest_per_key
from adlrec.schemas import ENOUGH_SHARE, Profile

__all__ = ["Curve", "Evaluation", "cross_validate", "curves_from_profiles", "workload_group"]

NEAR_BEST = ENOUGH_SHARE  # the predicted best worker count is a hit if it reaches this share of the true best


@dataclass(frozen=True)
class Curve:
    group: str  # the workload (example + parameters): held out together
    key: str  # the measurement (workload, device, hardware)
    label: str  # for tables: workload and device
    features: ProbeFeatures
    throughput: tuple[float, ...]  # measured T(w) for w = 0..len-1

    def __post_init__(self) -> None:  # errors are relative to T(w): a 0 would make every score NaN
        if not all(0 < t < math.inf for t in self.throughput):
            raise ValueError(f"curve {self.label}: throughput {self.throughput}: expected finite numbers > 0")


@dataclass(frozen=True)
class Evaluation:
    spec: dict[str, Any]
    curves: int
    groups: int
    points: int
    median_ape: float  # median absolute percentage error of T(w), as a fraction
    p90_ape: float
    median_max_error: float  # median |predicted max - measured max| / measured max
    best_hit_rate: float  # share of curves whose predicted best w reaches 95% of the measured best
    rows: tuple[dict[str, Any], ...]  # one per (curve, w): measured, predicted, ape

    def metrics(self) -> dict[str, float]:
        return {
            "median_ape": self.median_ape,
            "p90_ape": self.p90_ape,
            "median_max_error": self.median_max_error,
            "best_hit_rate": self.best_hit_rate,
            "curves": float(self.curves),
            "groups": float(self.groups),
        }


def workload_group(p: Profile) -> str:
    params = {k: v for k, v in sorted(p.params.items())}
    return f"{p.workload} {json.dumps(params, sort_keys=True)}"


def curves_from_profiles(profiles: Iterable[Profile], skipped: list[str] | None = None) -> list[Curve]:
    """One curve per distinct measurement (the newest measured wins, as in ``profiles export``),
    skipping profiles ``profiles import`` would refuse (a throughput of 0, logged before it was checked),
    sweeps that do not cover 0..n workers and profiles the probe's features cannot describe; each skip
    is appended to ``skipped`` as a reason shared by its kind, so that they can be counted."""
    skipped = [] if skipped is None else skipped
    usable = []
    for p in profiles:
        ws = [q.workers for q in p.points]
        if problem := profile_problem(p):
            skipped.append(f"not a valid profile ({problem})")
        elif ws != list(range(len(ws))):
            skipped.append("with worker counts other than 0, 1, 2, ...")
        elif not {0, 1, 2} <= set(ws):
            skipped.append("swept to fewer than 2 workers (the model's features need 0, 1 and 2)")
        else:
            try:
                usable.append((p, features_from_profile(p)))
            except ProbeError as exc:
                skipped.append(f"with features the model cannot use ({exc})")
    return [
        Curve(
            group=workload_group(p),
            key=key,
            label=f"{p.workload} {p.device.label}",
            features=f,
            throughput=tuple(q.throughput for q in p.points),
        )
        for key, (p, f) in newest_per_key(usable, lambda pf: pf[0]).items()
    ]


def cross_validate(spec: dict[str, Any], curves: Sequence[Curve]) -> Evaluation:
    groups = sorted({c.group for c in curves})
    if len(groups) < 2:
        raise ValueError(f"cross validation needs curves of at least 2 workloads, got {len(groups)}")
    rows: list[dict[str, Any]] = []
    max_errors, hits = [], []
    for g in groups:
        train = [c for c in curves if c.group != g]
        test = [c for c in curves if c.group == g]
        model = make_model(spec).fit([c.features for c in train], [c.throughput for c in train])
        for c in test:
            ws = list(range(len(c.throughput)))
            pred = model.predict(c.features, ws)
            meas = np.asarray(c.throughput)
            for w in ws:
                rows.append(
                    {
                        "group": c.group,
                        "curve": c.label,
                        "key": c.key,
                        "workers": w,
                        "measured": float(meas[w]),
                        "predicted": float(pred[w]),
                        "ape": float(abs(pred[w] - meas[w]) / meas[w]),
                    }
                )
            max_errors.append(abs(pred.max() - meas.max()) / meas.max())
            hits.append(meas[int(np.argmax(pred))] >= NEAR_BEST * meas.max())
    apes = np.asarray([r["ape"] for r in rows])
    return Evaluation(
        spec=dict(spec),
        curves=len(curves),
        groups=len(groups),
        points=len(rows),
        median_ape=float(np.median(apes)),
        p90_ape=float(np.quantile(apes, 0.9)),
        median_max_error=float(np.median(max_errors)),
        best_hit_rate=float(np.mean(hits)),
        rows=tuple(rows),
    )
