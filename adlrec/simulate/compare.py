"""Replay one trace under several policies and compare them with a baseline (``even``).

This is the one place that times the policies: the clock is a parameter (``time.perf_counter`` by
default), and only wraps the policy calls, so the replay itself stays clock-free.

Comparisons: aggregate throughput gain ``X_p / X_base - 1`` and makespan reduction
``1 - M_p / M_base`` (positive is better for both).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from adlrec.schemas import AllocationPlan, AllocationRequest
from adlrec.simulate.engine import simulate
from adlrec.simulate.records import Node, SimConfig, SimResult, TraceJob

__all__ = ["PolicyRun", "compare_policies", "comparison_csv", "comparison_rows", "comparison_table"]

Policy = Callable[[AllocationRequest], AllocationPlan]


@dataclass(frozen=True)
class PolicyRun:
    result: SimResult
    policy_s: float  # seconds spent inside the policy, over all its decisions

    @property
    def decisions_per_s(self) -> float:
        return self.result.decisions / self.policy_s if self.policy_s > 0 else float("inf")


def compare_policies(
    trace: Sequence[TraceJob],
    policies: Mapping[str, Policy],
    node: Node,
    config: SimConfig,
    clock: Callable[[], float] = time.perf_counter,
) -> list[PolicyRun]:
    """One replay per policy, in the mapping's order."""
    runs = []
    for name, policy in policies.items():
        spent = [0.0]

        def timed(request: AllocationRequest, policy: Policy = policy, spent: list[float] = spent) -> AllocationPlan:
            t = clock()
            try:
                return policy(request)
            finally:
                spent[0] += clock() - t

        runs.append(PolicyRun(simulate(trace, timed, node, config, name=name), spent[0]))
    return runs


def comparison_rows(runs: Sequence[PolicyRun], baseline: str = "even") -> list[dict[str, float | str]]:
    """One dict per policy; ``vs`` figures against ``baseline`` (the first run when it is absent).

    A baseline whose makespan is 0 (every job done within the clock's resolution at its arrival, e.g.
    tiny jobs at Unix-millisecond arrivals) has no throughput or makespan to compare with: those
    figures are NaN, which the table prints as ``-`` and MLflow logging leaves out."""
    base = next((r for r in runs if r.result.policy == baseline), runs[0]).result
    rows = []
    for run in runs:
        r = run.result
        rows.append(
            {
                "policy": r.policy,
                "aggregate_throughput": r.aggregate_throughput,
                "throughput_vs_base_pct": 100 * (r.aggregate_throughput / base.aggregate_throughput - 1)
                if base.aggregate_throughput > 0
                else math.nan,
                "makespan_s": r.makespan_s,
                "makespan_vs_base_pct": 100 * (1 - r.makespan_s / base.makespan_s) if base.makespan_s > 0 else math.nan,
                "mean_jct_s": r.mean_jct_s,
                "busy_gpu_fraction": r.busy_gpu_fraction,
                "samples_per_s": r.samples_per_s,
                "cpu_share": r.mean_cpu_share,
                "resizes": r.resizes,
                "decisions": r.decisions,
                "decisions_per_s": run.decisions_per_s,
            }
        )
    return rows


def comparison_csv(rows: Sequence[Mapping[str, float | str]]) -> str:
    keys = list(rows[0])
    lines = [",".join(keys)]
    for row in rows:
        lines.append(",".join(f"{row[k]:.6g}" if isinstance(row[k], float) else str(row[k]) for k in keys))
    return "\n".join(lines) + "\n"


def comparison_table(rows: Sequence[Mapping[str, float | str]], title: str, baseline: str = "even"):
    """A rich table of the comparison."""
    from rich.table import Table

    base = baseline if any(r["policy"] == baseline for r in rows) else str(rows[0]["policy"])
    table = Table(title=title, title_justify="left")
    for name in (
        "policy",
        f"throughput vs {base}",
        f"makespan vs {base}",
        "thr./held GPU",
        "makespan",
        "mean JCT",
        "busy GPUs",
        "CPU share",
        "resizes",
        "decisions/s",
    ):
        table.add_column(name, justify="left" if name == "policy" else "right")
    for r in rows:
        table.add_row(
            str(r["policy"]),
            _signed(float(r["throughput_vs_base_pct"])),
            _signed(float(r["makespan_vs_base_pct"])),
            f"{r['aggregate_throughput']:.3f}",
            _hours(float(r["makespan_s"])),
            _hours(float(r["mean_jct_s"])),
            f"{r['busy_gpu_fraction']:.1%}",
            f"{r['cpu_share']:.2f}",
            str(r["resizes"]),
            f"{r['decisions_per_s']:,.0f}" if r["decisions_per_s"] != float("inf") else "-",
        )
    return table


def _signed(pct: float) -> str:
    return "-" if math.isnan(pct) else f"{pct:+.1f}%"


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"
