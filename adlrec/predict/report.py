"""Tables for fits, evaluations and predictions (rich)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.markup import escape
from rich.table import Table

from adlrec.predict.evaluate import Evaluation
from adlrec.schemas import ENOUGH_SHARE, DeviceSpec
from adlrec.words import count, reaching

__all__ = ["evaluation_table", "fit_table", "prediction_line", "prediction_table", "sweep_line"]


def evaluation_table(evals: Sequence[tuple[str, Evaluation]], title: str) -> Table:
    table = Table(title=title)
    for col in ("model", "median APE", "p90 APE", "max error (median)", "best w within 5%", "curves", "workloads"):
        table.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    for name, e in evals:
        table.add_row(
            escape(name),
            f"{e.median_ape:.1%}",
            f"{e.p90_ape:.1%}",
            f"{e.median_max_error:.1%}",
            f"{e.best_hit_rate:.0%}",
            str(e.curves),
            str(e.groups),
        )
    return table


def fit_table(outcome) -> Table:
    rows = [(f"new: {outcome.evaluation.spec['kind']} (v{outcome.version})", outcome.evaluation)]
    if outcome.champion_evaluation is not None:
        rows.append(
            (
                f"champion: {outcome.champion_evaluation.spec['kind']} (v{outcome.previous_champion})",
                outcome.champion_evaluation,
            )
        )
    return evaluation_table(rows, "leave-one-workload-out cross validation, same curves for both")


def prediction_table(
    workload: str, device: DeviceSpec, curve: Sequence[float], measured: Sequence[float] | None
) -> Table:
    table = Table(title=f"{escape(workload)} on {escape(device.title)}: predicted throughput")
    table.add_column("workers", justify="right")
    table.add_column("predicted samples/s", justify="right")
    table.add_column("of max", justify="right")
    if measured is not None:
        table.add_column("measured samples/s", justify="right")
        table.add_column("error", justify="right")
    peak = max(curve)
    for w, t in enumerate(curve):
        row = [str(w), f"{t:,.1f}", _ratio(t, peak, ".0%")]
        if measured is not None:
            row += [f"{measured[w]:,.1f}", _ratio(t - measured[w], measured[w], "+.1%")]
        table.add_row(*row)
    return table


def _ratio(part: float, whole: float, spec: str) -> str:
    """``part / whole`` formatted, or a dash where ``whole`` is 0 (a curve or a measurement of nothing)."""
    return "–" if whole == 0 else format(part / whole, spec)


def prediction_line(curve: Sequence[float], best_w: int, enough_w: int) -> str:
    """The line under the table: the predicted best, and the fewest workers predicted to reach 95% of it."""
    return (
        f"predicted max {curve[best_w]:,.1f} samples/s at {count(best_w, 'worker')}; {reaching(enough_w, ENOUGH_SHARE)}"
    )


def sweep_line(curve: Sequence[float], measured: Sequence[float], best_w: int) -> str:
    """What ``--compare``'s sweep measured: the median error, the measured best, and what the predicted
    best count measured as a share of it."""
    apes = [abs(p - m) / m for p, m in zip(curve, measured, strict=True)]
    best_m = int(np.argmax(measured))
    return (
        f"median APE {float(np.median(apes)):.1%}; measured best {measured[best_m]:,.1f} at {count(best_m, 'worker')}, "
        f"predicted best w={best_w} reaches {measured[best_w] / measured[best_m]:.0%} of it"
    )
