"""Fit a throughput model on every curve we have, register it, and move the champion alias only
when it wins the same evaluation.

"The same evaluation" means: the current champion's spec (its kind and hyperparameters) is
cross-validated again on today's curves, beside the new spec, and the new version becomes champion
only with a strictly lower median APE.  A champion fitted on fewer curves is not judged by an old
score.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adlrec.predict.evaluate import Curve, Evaluation, cross_validate, curves_from_profiles
from adlrec.predict.models import make_model
from adlrec.profile.library import load_profiles

__all__ = ["FitOutcome", "fit_and_register", "gather_curves"]


@dataclass(frozen=True)
class FitOutcome:
    run_id: str
    version: str
    evaluation: Evaluation
    previous_champion: str | None  # version, before this fit
    champion_evaluation: Evaluation | None  # the previous champion's spec on the same curves
    promoted: bool
    champion_broken: str | None = None  # why the previous champion could not be used, if it could not


def gather_curves(profiles_dir: Path | None, tracker: Any | None, skipped: list[str] | None = None) -> list[Curve]:
    """Curves from the MLflow store (newest first) and from a profiles/ folder, deduplicated.

    Why each profile or file was left out is appended to ``skipped``; without it, a file in the folder
    that is not a profile raises ``ValueError`` naming it.
    """
    profiles = []
    if tracker is not None:
        profiles += [r.profile for r in tracker.profiles(skipped)]
    if profiles_dir is not None and profiles_dir.is_dir():
        profiles += load_profiles(profiles_dir, skipped)
    return curves_from_profiles(profiles, skipped)


def fit_and_register(curves: Sequence[Curve], spec: dict[str, Any], registry: Any, sources: str) -> FitOutcome:
    """Cross-validate ``spec``, register it, and move the champion alias to it if it wins, or if the current
    champion cannot be used: its model cannot be loaded (its artifacts deleted), so ``adlrec predict``
    would refuse it, its spec is one this adlrec cannot train (an older kind or hyperparameter), or it has
    no spec at all (a version registered under adlrec's name by something else)."""
    evaluation = cross_validate(spec, curves)
    if not all(math.isfinite(v) for v in evaluation.metrics().values()):  # Curve refuses a 0: cannot happen
        raise ValueError(f"cross validation of {spec} gave non-finite metrics {evaluation.metrics()}")
    champion = registry.champion()
    champion_eval, broken = _judge(champion, curves, registry)
    model = make_model(spec).fit([c.features for c in curves], [c.throughput for c in curves])
    run_id, version = registry.register(
        model,
        evaluation,
        params={"curves": len(curves), "workloads": evaluation.groups, "sources": sources},
        champion_metrics=champion_eval.metrics() if champion_eval else None,
        example=curves[0].features.to_dict() | {"workers": 1},
    )
    while True:
        promoted = champion_eval is None or broken is not None or evaluation.median_ape < champion_eval.median_ape
        # Another fit may have moved the alias while this one trained and registered: judge against that
        # champion instead, or a fit started earlier would take the alias from a better model.
        now = registry.champion()
        if (now.version if now else None) == (champion.version if champion else None):
            break
        champion = now
        champion_eval, broken = _judge(champion, curves, registry)
    if promoted:
        registry.set_champion(version)
    return FitOutcome(
        run_id=run_id,
        version=version,
        evaluation=evaluation,
        previous_champion=champion.version if champion else None,
        champion_evaluation=champion_eval,
        promoted=promoted,
        champion_broken=broken,
    )


def _judge(champion: Any, curves: Sequence[Curve], registry: Any) -> tuple[Evaluation | None, str | None]:
    """The champion's spec cross-validated on ``curves``, or why the champion cannot be used."""
    if champion is None:
        return None, None
    if champion.spec is None:
        return None, "which has no adlrec.spec tag: it was not registered by adlrec"
    try:
        champion_eval = cross_validate(champion.spec, curves)
    except ValueError as exc:
        return None, f"whose spec {json.dumps(champion.spec, sort_keys=True)} this adlrec cannot train: {exc}"
    if not registry.loadable():
        return champion_eval, "whose model can no longer be loaded"
    return champion_eval, None
