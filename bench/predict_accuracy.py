"""Compare throughput models by leave-one-workload-out cross validation over measured curves.

    python bench/predict_accuracy.py [--profiles profiles] [--tracking-uri URI]

Prints one row per model kind: median and p90 absolute percentage error of T(w) on held-out
workloads, the median error of the predicted maximum, and how often the predicted best worker count
reaches 95% of the measured best.  Then the same per held-out workload for the learned model.
"""

from __future__ import annotations

import os
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from _args import interruptible, parser
from rich.console import Console
from rich.table import Table

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

from adlrec.errors import AdlrecError  # noqa: E402
from adlrec.predict.evaluate import cross_validate  # noqa: E402
from adlrec.predict.fit import gather_curves  # noqa: E402
from adlrec.predict.models import LearnedModel  # noqa: E402
from adlrec.predict.report import evaluation_table  # noqa: E402


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--profiles", type=Path, default=Path("profiles"))
    ap.add_argument("--tracking-uri", default=None, help="also use complete profiles from this MLflow store")
    args = ap.parse_args()
    if not args.profiles.is_dir():  # it said 'found 0 in' the folder, as if it were empty
        ap.error(f"--profiles {args.profiles}: no such folder")
    tracker = None
    if args.tracking_uri:
        from adlrec.tracking import Tracker

        try:
            tracker = Tracker(args.tracking_uri, "adlrec-profiles")
        except AdlrecError as exc:  # a store it cannot open: one line, not MLflow's traceback
            print(f"predict_accuracy.py: error: {exc}", file=sys.stderr)
            return 2
    curves = gather_curves(args.profiles, tracker)
    if len({c.group for c in curves}) < 2:
        print(f"need curves of at least 2 workloads; found {len(curves)} in {args.profiles}", file=sys.stderr)
        return 2
    specs = [
        ("analytic (a)", {"kind": "analytic"}),
        ("interp, Synergy-style (b)", {"kind": "interp"}),
        ("learned (c)", LearnedModel().spec()),
    ]
    evals = [(name, cross_validate(spec, curves)) for name, spec in specs]
    console = Console(width=140)
    console.print(evaluation_table(evals, f"leave-one-workload-out CV over {len(curves)} curves in {args.profiles}"))

    learned = evals[-1][1]
    by_group = defaultdict(list)
    for r in learned.rows:
        by_group[r["group"]].append(r["ape"])
    table = Table(title="learned (c): median APE per held-out workload")
    table.add_column("workload (example + params)")
    table.add_column("points", justify="right")
    table.add_column("median APE", justify="right")
    for g, apes in sorted(by_group.items()):
        table.add_row(g, str(len(apes)), f"{np.median(apes):.1%}")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
