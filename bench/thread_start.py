"""What handing work to another thread costs the training loop's thread, on saturated cores.

    python bench/thread_start.py [--workers 4] [--sample-ms 1.5] [--trials 40]

A ``ResizableLoader`` with ``--workers`` CPU-bound workers (pure-Python samples of ~``--sample-ms``)
keeps every core busy while the loop takes batches.  Between batches the loop hands a no-op to
another thread, alternately in the two ways the loader has had of stopping a drained pool:

  new thread   ``threading.Thread(...).start()``: a thread per errand (the loader until 3931d48);
               ``start`` returns only once the new thread runs, which waits for a core
  errands      ``Errands.submit``: a thread started ahead (with the epoch's workers) takes it
  spare        ``Errands.take_spare().run``: a thread started ahead runs it (a resize's new pool starts
               so; the errand thread starts the next spare)

Prints, for each, the time the loop's thread spent in the call (median, 90th percentile, max, in
ms) beside the loop's median batch time.  Asserts nothing.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import warnings

import psutil
from rich.console import Console
from rich.table import Table

from adlrec.loader import ResizableLoader
from adlrec.loader.errands import Errands

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from _args import above, at_least, interruptible, parser  # noqa: E402
from resize import Busy, calibrate  # noqa: E402  (the resize bench's CPU-bound samples)


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--sample-ms", type=float, default=1.5)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--trials", type=int, default=40, help="calls of each kind")
    args = ap.parse_args()
    at_least(ap, args, workers=1, batch_size=1, trials=1)
    above(ap, args, sample_ms=0)
    warnings.filterwarnings("ignore", message=".*DataLoader workers on the .* cores.*")
    batches = 20 + 3 * args.trials * 2
    ds = Busy(batches * args.batch_size, calibrate(args.sample_ms))
    errands = Errands("bench-errands", spares=1)
    errands.ensure_thread()
    took: dict[str, list[float]] = {"new thread": [], "errands": [], "spare": []}
    gaps: list[float] = []
    missed = 0  # spare calls that found no spare ready
    with ResizableLoader(ds, args.batch_size, num_workers=args.workers, multiprocessing_context="fork") as loader:
        it = iter(loader)
        for _ in range(20):  # every worker busy before the first trial
            next(it)
        last = time.perf_counter()
        for trial in range(args.trials):
            kinds = list(took)
            for kind in kinds[trial % 3 :] + kinds[: trial % 3]:
                next(it)
                now = time.perf_counter()
                gaps.append(now - last)
                t = time.perf_counter()
                if kind == "new thread":
                    threading.Thread(target=lambda: None, daemon=True).start()
                elif kind == "errands":
                    errands.submit(lambda: None)
                else:
                    spare = errands.take_spare()
                    if spare is None:  # the errand thread has not replaced the last one yet
                        threading.Thread(target=lambda: None, daemon=True).start()
                        missed += 1
                    else:
                        spare.run(lambda: None)
                took[kind].append(time.perf_counter() - t)
                next(it)
                last = time.perf_counter()
    errands.close()
    table = Table(
        title=(
            f"the loop thread's time handing a no-op to another thread; {psutil.cpu_count()} cores, "
            f"{args.workers} CPU-bound workers ({args.sample_ms} ms samples, batch {args.batch_size}); "
            f"median batch time {1e3 * statistics.median(gaps):.1f} ms; {args.trials} calls each"
        ),
        title_justify="left",
    )
    for col in ("way", "median", "p90", "max"):
        table.add_column(col, justify="left" if col == "way" else "right")
    for kind, xs in took.items():
        p90 = statistics.quantiles(xs, n=10, method="inclusive")[-1]
        table.add_row(kind, *(f"{1e3 * v:.3f} ms" for v in (statistics.median(xs), p90, max(xs))))
    console = Console(width=160)
    console.print(table)
    console.print(f"spare calls that found none ready (and started a thread instead): {missed} of {args.trials}")
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
