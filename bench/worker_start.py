"""What starting one DataLoader worker costs in CPU, the cost a resize adds to cores the loop's batches need.

    python bench/worker_start.py [--repeats 15]

Each variant runs in a fresh Python process (what a process has imported decides what its forked
workers must import themselves).  There a loader over a tiny dataset starts one worker (fork),
``--repeats`` times; the worker records, as it loads its first sample, its own CPU time and minor page
faults since the fork (a forked process's CPU clock and ``getrusage`` start at zero), which the batch
carries back.  The table has the medians, and the wall time from ``iter()`` to the first batch.

  DataLoader, torch only        a plain ``DataLoader`` in a process that imported torch and nothing
                                else: each worker imports ``numpy.random`` itself, since torch's worker
                                loop seeds numpy's global RNG and numpy 2 loads ``numpy.random`` lazily
  DataLoader, numpy.random too  the same after ``import numpy.random`` in the training process
  ResizableLoader               adlrec's loader, which imports ``numpy.random`` when it is imported, with
                                its worker set-up (one thread, the watch on the training process)
  ResizableLoader, grown        the same, the worker of a ``resize(1 -> 2)``'s new pool (forked by the
                                training process, held at its gate until the loop reaches it)
  ResizableLoader, zygote       the same grow with ``fork_server=True``: forked by the zygote

Linux or any POSIX with fork; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

from _args import interruptible, parser

VARIANTS = (
    "DataLoader, torch only",
    "DataLoader, numpy.random too",
    "ResizableLoader",
    "ResizableLoader, grown",
    "ResizableLoader, zygote",
)


class FirstSample:
    """64 samples; the first of each batch is the loading process's pid, CPU ms and minor faults so far."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):  # noqa: ANN204 - torch tensors, imported in the child only
        import os

        import torch

        if i % 8 == 0:
            usage = resource.getrusage(resource.RUSAGE_SELF)
            return torch.tensor([os.getpid(), time.process_time() * 1e3, usage.ru_minflt], dtype=torch.float64)
        return torch.zeros(3, dtype=torch.float64)


def measure(variant: str, repeats: int) -> dict[str, list[float]]:
    """In the child process: ``repeats`` first batches of ``variant``."""
    from torch.utils.data import DataLoader

    if variant == "DataLoader, numpy.random too":
        import numpy.random  # noqa: F401
    resizable = variant.startswith("ResizableLoader")
    if resizable:
        from adlrec.loader import ResizableLoader
    out: dict[str, list[float]] = {"cpu_ms": [], "faults": [], "wall_ms": []}
    for _ in range(repeats):
        t = time.perf_counter()
        if not resizable:
            loader = DataLoader(FirstSample(), batch_size=8, num_workers=1, multiprocessing_context="fork")
            batch = next(iter(loader))
        elif variant == "ResizableLoader":
            loader = ResizableLoader(FirstSample(), 8, num_workers=1, multiprocessing_context="fork")
            batch = next(iter(loader))
        else:  # a grow 1 -> 2: the new pool's worker serves every other batch after the handover
            loader = ResizableLoader(
                FirstSample(),
                8,
                num_workers=1,
                multiprocessing_context="fork",
                fork_server=variant.endswith("zygote"),
                handover=0,
            )
            it = iter(loader)
            next(it)
            loader.resize(2)
            t = time.perf_counter()
            new = loader._pools.live[-1]
            for batch in it:  # the first batch the new pool's worker loaded
                if new.it is not None and int(batch[0][0]) in {w.pid for w in new.it._workers}:
                    break
        out["wall_ms"].append((time.perf_counter() - t) * 1e3)
        out["cpu_ms"].append(float(batch[0][1]))
        out["faults"].append(float(batch[0][2]))
        if resizable:
            loader.close()
        del loader, batch
    return out


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--repeats", type=int, default=15, help="worker starts per variant (median)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error(f"--repeats: expected a whole number >= 1, got {args.repeats}")
    if args.child:
        print(json.dumps(measure(args.child, args.repeats)))
        return 0

    from rich.console import Console
    from rich.table import Table

    table = Table(
        title=f"one worker's start-up (fork), median of {args.repeats}: from the fork to its first sample",
        title_justify="left",
    )
    for col in ("variant", "worker CPU", "minor faults", "iter() to first batch"):
        table.add_column(col, justify="left" if col == "variant" else "right")
    for variant in VARIANTS:
        done = subprocess.run(
            [sys.executable, __file__, "--child", variant, "--repeats", str(args.repeats)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            print(f"{variant}: the measuring process failed:\n{done.stderr}", file=sys.stderr)
            return 1
        got = json.loads(done.stdout.strip().splitlines()[-1])
        table.add_row(
            variant,
            f"{statistics.median(got['cpu_ms']):.1f} ms",
            f"{statistics.median(got['faults']):,.0f}",
            f"{statistics.median(got['wall_ms']):.1f} ms",
        )
    Console(width=120).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
