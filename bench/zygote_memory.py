"""What the loader's zygote adds to memory: its private pages (USS) before and after the training process writes.

    python bench/zygote_memory.py [--main-mb 1024]

The training process touches ``--main-mb`` MB (as a real one holds its model and buffers), starts an
epoch of a ``ResizableLoader(fork_server=True)`` with 1 worker and then with 0 workers (the zygote
forked at the start), and rewrites all of that memory, as training writes its pages.  Copy-on-write
then copies every page once; the old copy stays with whoever was forked before the write.  The table
shows each process's unique memory (USS: what ending it would free) and proportional share (PSS).
With workers forked at the same time as the zygote, the old pages are shared by all of them: the
zygote adds little of its own.  With no workers it would alone hold them, so the loader stops it at the
epoch's first batch (since 32fe0af; the row says "stopped"; on bc1c8eb it held 1,028 MB).  Linux only (``/proc`` smaps);
asserts nothing.
"""

from __future__ import annotations

import sys

import psutil
import torch
from _args import interruptible, parser
from rich.console import Console
from rich.table import Table

from adlrec.loader import ResizableLoader
from adlrec.loader.zygote import can_use_zygote


def memory(pid: int) -> tuple[float, float]:
    m = psutil.Process(pid).memory_full_info()
    return m.uss / 2**20, m.pss / 2**20


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--main-mb", type=int, default=1024, help="MB the training process touches, then rewrites")
    args = ap.parse_args()
    if args.main_mb < 1:
        ap.error(f"--main-mb: expected a whole number of MB >= 1, got {args.main_mb}")
    ballast = torch.ones(args.main_mb * 2**18)  # 4 bytes each, all touched
    table = Table(
        title=f"the zygote's memory, MB (training process wrote {args.main_mb:,} MB after the forks)",
        title_justify="left",
    )
    for col in ("epoch's workers", "when", "zygote USS", "zygote PSS", "workers USS", "workers PSS", "trainer USS"):
        table.add_column(col, justify="left" if col in ("epoch's workers", "when") else "right")
    for workers in (1, 0):
        with ResizableLoader(
            torch.arange(100), 1, num_workers=workers, multiprocessing_context="fork", fork_server=True
        ) as loader:
            it = iter(loader)
            next(it)
            zygote = loader._pools.zygote
            if zygote is None and not can_use_zygote():
                print("the zygote needs fork and fd passing (Linux)", file=sys.stderr)
                return 1
            if zygote is None:  # since 32fe0af: with no worker sharing its pages, it would hold alone every page
                table.add_row(str(workers), "first batch", "stopped", "-", "-", "-", "-")
                continue
            pids = [w.pid for p in loader._pools.live if p.it is not None and p.workers for w in p.it._workers]
            for when in ("before the write", "after it"):
                if when == "after it":
                    ballast.add_(1.0)  # every page: copied once, the old copy stays with the forked processes
                z_uss, z_pss = memory(zygote.pid)
                w = [memory(pid) for pid in pids]
                table.add_row(
                    str(workers),
                    when,
                    f"{z_uss:,.0f}",
                    f"{z_pss:,.0f}",
                    f"{sum(u for u, _ in w):,.0f}" if w else "-",
                    f"{sum(p for _, p in w):,.0f}" if w else "-",
                    f"{memory(psutil.Process().pid)[0]:,.0f}",
                )
    Console(width=160).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
