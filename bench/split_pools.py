"""What starting an epoch's workers as several woven pools costs in steady state: nothing, or how much.

    python bench/split_pools.py [--workers 4] [--batches 200] [--repeats 3] [--sample-ms 6,0.2+4,1.5]

A ``ResizableLoader`` with ``split_pools=True`` (the default: 4 workers as pools of 2, 1 and 1) and
with ``split_pools=False`` (one pool of 4), alternated ``--repeats`` times in one run, each over
``--batches`` batches of 8 after 20 of warm-up, the loop's step a 3 ms sleep.  Samples as in
``bench/resize.py``: CPU-bound (pure-Python arithmetic of ``--sample-ms``) or ``CPU+IO`` (a sleep as
a remote read).  Prints the mean time between batches, median over the repeats (the mean, not the
median interval: a pool's workers deliver in bursts, and how they bunch differs with the weave while
throughput does not).  No resize happens; asserts nothing.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings

from _args import at_least, interruptible, parser, sample_costs
from resize import Busy, calibrate
from rich.console import Console
from rich.table import Table

from adlrec.loader import ResizableLoader
from adlrec.loader.resizable import split_workers

STEP_S = 0.003
BATCH = 8


def mean_interval_ms(ds: Busy, workers: int, split: bool, batches: int) -> float:
    with ResizableLoader(ds, BATCH, num_workers=workers, multiprocessing_context="fork", split_pools=split) as loader:
        it = iter(loader)
        for _ in range(20):
            next(it)
            time.sleep(STEP_S)
        t = time.perf_counter()
        for _ in range(batches):
            next(it)
            time.sleep(STEP_S)
        return (time.perf_counter() - t) / batches * 1e3


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sample-ms", default="6,0.2+4,1.5", help="comma-separated per-sample costs: CPU ms, or CPU+IO ms")
    args = ap.parse_args()
    at_least(ap, args, workers=2, batches=1, repeats=1)  # fewer than 2 workers: nothing to split
    sample_costs(ap, args.sample_ms)
    warnings.filterwarnings("ignore", message=".*worker processes in total.*")
    warnings.filterwarnings("ignore", message=".*DataLoader workers on the .* cores.*")  # ResizableLoader's
    sizes = "+".join(map(str, split_workers(args.workers)))
    table = Table(
        title=f"mean time between batches, {args.workers} workers, batch {BATCH}, step {STEP_S * 1e3:g} ms "
        f"(median of {args.repeats}, alternated)",
        title_justify="left",
    )
    for col in ("sample", f"split pools ({sizes})", "one pool", "split / one"):
        table.add_column(col, justify="left" if col == "sample" else "right")
    for sample in args.sample_ms.split(","):
        cpu_ms, _, io_ms = sample.partition("+")
        ds = Busy(BATCH * (args.batches + 20), calibrate(float(cpu_ms)), float(io_ms or 0) / 1e3)
        got: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(args.repeats):
            for split in (True, False):
                got[split].append(mean_interval_ms(ds, args.workers, split, args.batches))
        split_ms, one_ms = statistics.median(got[True]), statistics.median(got[False])
        table.add_row(f"{sample} ms", f"{split_ms:.2f} ms", f"{one_ms:.2f} ms", f"{split_ms / one_ms:.3f}")
    Console(width=120).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
