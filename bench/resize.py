"""The wait a training loop sees at a resize, in batch times: make-before-break vs rebuilding the loader.

    python bench/resize.py [--repeats 3] [--sample-ms 1.5,6,0.2+4] [--batch-size 8] [--step-ms 3]
                           [--changes 1:2,2:4,4:1,0:2,2:4:2] [--window 30] [--main-mb 0]
                           [--step-python-ms 0] [--one-pool]

Each sample costs real CPU in the worker (pure-Python arithmetic, ~``--sample-ms``; one table row
group per value); a value ``CPU+IO`` adds ``IO`` ms of waiting per sample (a sleep, as a read from
remote storage: a loader bound by I/O, whose workers do not compete for the cores); the loop's step
is an emulated accelerator (a sleep of ``--step-ms``, of which ``--step-python-ms`` is instead a
busy loop of Python that holds the GIL, as a real step's kernel dispatch does: a fork that holds the
GIL then delays the step too, which a sleep hides).  For each worker-count change a->b, one run:
``--window`` batches at ``a`` workers, the change, then batches until the new pool has served
``--window`` of them.  A chain ``a:c:b`` first resizes ``a -> c`` and lets that settle, then
measures ``c -> b``: ``2:4:2`` measures the shrink back after a grow (which drops the pool the grow
added).  An epoch's workers start as several pools (``split_pools``: 4 as 2, 1 and 1), so ``4:1``
drops pools too; with ``--one-pool`` every loader starts one pool, which at ``4:1`` a pool of 1
replaces (make-before-break columns and the control).  Workers start with ``--start-method`` (fork by default).

  make-before-break  ``ResizableLoader.resize(b)``: the new pool starts, the old one serves what it
                     has in flight (plus the estimated handover), the switch is at a batch boundary.
                     The training process forks each new worker itself, one per batch (the pacing),
                     each fork holding the GIL (``fork_server=False``; the default below
                     ``AUTO_ZYGOTE_GB`` of training process, printed at the end).
  zygote             the same with ``fork_server=True``: the loader's zygote (forked at the epoch's
                     start) forks the new workers, paced one per batch as the training process's
                     forks are (the default from ``AUTO_ZYGOTE_GB`` on).
  rebuild            a plain ``DataLoader`` torn down and recreated at ``b`` workers over the indices
                     the loop has not consumed (what one does without adlrec).

After the change, make-before-break runs until the new pool has served ``--window`` batches ("mbb
switch": after how many batches it served its first; "never" if the epoch ran out first, and then
the row did not measure a switch).  A batch's *wait* is the time it takes beyond the step: waiting
for the batch, and any delay of the step itself (its Python part kept from the GIL by a fork, a
sleep overrunning on busy cores).  Over the change call and every batch after it, in units of the
median batch time before it, against a baseline wait per batch of max(normal wait before, normal
wait after): the 90th percentile of the waits of the 10 batches before the change, and of the last
10, so that a batch served at either pool's normal pace is not counted as a stall.  (Not the median:
a pool of several workers often delivers in bursts, e.g. 2 ms and 99 ms alternating for two workers
that finish together, and a median baseline would count every other steady batch as a stall.)
  longest  the longest single wait over the baseline (the change call counts as part of the first)
  total    all the waiting over the baseline (change call + sum of the excesses)
The goal is make-before-break longest <= 1 batch time.  The last column is the control: the same
loader measured the same way over as many batches with no resize, at ``a`` and at ``b`` workers, the
larger of the two longest waits, in the row's batch time: what this machine shows anyway (on 2 cores
with batches of a few ms, and more workers than cores, it is not 0).  ``--main-mb N`` makes the
training process touch N MB first, as a real one holds its model, optimizer and pinned buffers: a
fork's cost grows with the forking process's memory (about 25 ms per GB here).  Medians over
``--repeats``; asserts nothing.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psutil
import torch
from _args import at_least, interruptible, parser, sample_costs, worker_changes
from rich.console import Console
from rich.table import Table
from torch.utils.data import DataLoader, Dataset

from adlrec.loader import ResizableLoader, WorkerSetup, batches_of
from adlrec.loader.resizable import AUTO_ZYGOTE_GB
from adlrec.words import count as count_of

START = {"method": "fork"}  # set from --start-method
STEP = {"python_s": 0.0}  # set from --step-python-ms
SPLIT = {"pools": True}  # False with --one-pool


class Busy(Dataset):
    """``n`` samples of a small tensor, each after ``work`` iterations of Python arithmetic and ``io_s`` of sleep."""

    def __init__(self, n: int, work: int, io_s: float = 0.0) -> None:
        self.n, self.work, self.io_s = n, work, io_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        acc = i
        if self.io_s:
            time.sleep(self.io_s)
        for j in range(self.work):
            acc = (acc * 31 + j) % 1_000_003
        return torch.full((16,), float(acc))


def calibrate(ms: float) -> int:
    """Iterations of Busy's loop that take about ``ms`` milliseconds here.

    Busy is called once first: its first call also pays torch's first ``torch.full`` (several ms), which
    once made the probe read 7x slow and the "1.5 ms" samples cost 0.2 ms.  The median of 5 probes.
    """
    probe = 20_000
    Busy(1, 1)[0]
    times = []
    for _ in range(5):
        t = time.perf_counter()
        Busy(1, probe)[0]
        times.append(time.perf_counter() - t)
    return max(1, round(ms / 1e3 / (statistics.median(times) / probe)))


def sample_ms(ds: Busy) -> float:
    """What one of ``ds``'s samples costs here (median of 5, in ms): what the table's rows are labelled with."""
    times = []
    for i in range(5):
        t = time.perf_counter()
        ds[i]
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


@dataclass
class Run:
    batch_s: float  # median loop batch time before the change
    call_s: float  # time spent in the change itself (resize, or teardown + rebuild)
    worst_wait_s: float  # longest wait over the baseline just after the change (the call included)

    total_wait_s: float  # all the waiting over the baseline for the K batches just after the change
    after: int = 0  # batches measured after the change

    @property
    def longest(self) -> float:
        return self.worst_wait_s / self.batch_s

    @property
    def total(self) -> float:
        return self.total_wait_s / self.batch_s


def drive(batches: Iterator, count: int, step_s: float) -> tuple[list[float], list[float]]:
    """Take ``count`` batches with a ``step_s`` step each; what each batch lost, and each batch time.

    A batch loses the time it takes beyond its step: the wait for the batch, and any delay of the step
    itself (its Python part waiting for the GIL while this process forks, its sleep overrunning).
    """
    waits, times = [], []
    for _ in range(count):
        t0 = time.perf_counter()
        next(batches)
        t1 = time.perf_counter()
        spin = min(STEP["python_s"], step_s)
        while time.perf_counter() - t1 < spin:  # the step's Python part: it needs the GIL
            pass
        time.sleep(step_s - spin)  # the device's part: the GIL is free
        t2 = time.perf_counter()
        waits.append(max(0.0, t2 - t0 - step_s))
        times.append(t2 - t0)
    return waits, times


def normal_wait(waits: list[float]) -> float:
    """The 90th percentile of a steady run of waits: the longest that is still the pool's normal pace."""
    return statistics.quantiles(waits, n=10, method="inclusive")[-1] if len(waits) > 1 else waits[0]


def summarise(
    waits_before: list[float], before: list[float], call_s: float, after: list[float], b: int, n: int = 0
) -> Run:
    base = max(normal_wait(waits_before[-10:]), normal_wait(after[-10:]))
    excess = [max(0.0, w - base) for w in after]
    excess[0] += call_s
    return Run(statistics.median(before), call_s, max(excess), sum(excess), n or len(after))


SETUP_BATCHES = 60  # per set-up resize of a chain: enough for its new pool to take over


def make_before_break(
    ds: Dataset,
    bs: int,
    path: tuple[int, ...],
    window: int,
    step_s: float,
    handover: int | None = None,
    fork_server: bool = False,
) -> tuple[Run, int | None]:
    """The run of the change ``path[-2] -> path[-1]``, after the set-up resizes ``path[1:-1]`` from
    ``path[0]``; and after how many batches the new count served its first (None: it never did)."""
    b = path[-1]
    loader = ResizableLoader(
        ds,
        bs,
        num_workers=path[0],
        multiprocessing_context=START["method"],
        handover=handover,
        fork_server=fork_server,
        split_pools=SPLIT["pools"],
    )
    with loader:
        it = iter(loader)
        for c in path[1:-1]:  # e.g. 2:4:2 grows to 4 (two pools of 2) before the measured 4 -> 2
            loader.resize(c)
            for _ in range(SETUP_BATCHES):
                drive(it, 1, step_s)
                if loader.serving_workers == c:
                    break
        drive(it, 10, step_s)  # warm-up
        waits_before, before = drive(it, window, step_s)
        t = time.perf_counter()
        loader.resize(b)
        call_s = time.perf_counter() - t
        after: list[float] = []
        switch = None
        # until the new pool has served a window of batches (or the epoch runs out)
        while switch is None or len(after) < switch + window:
            try:
                w, _ = drive(it, 1, step_s)
            except StopIteration:
                break
            after += w
            if switch is None and loader.serving_workers == b:
                switch = len(after)
    return summarise(waits_before, before, call_s, after, b, len(after)), switch


def steady(ds: Dataset, bs: int, a: int, window: int, step_s: float, count: int) -> Run:
    """The control: the same loader and measurement with no resize, over ``count`` batches after the point
    where the change would be.  Its longest wait is this machine's noise floor for the row."""
    loader = ResizableLoader(ds, bs, num_workers=a, multiprocessing_context=START["method"], split_pools=SPLIT["pools"])
    with loader:
        it = iter(loader)
        drive(it, 10, step_s)
        waits_before, before = drive(it, window, step_s)
        after, _ = drive(it, count, step_s)
    return summarise(waits_before, before, 0.0, after, a)


def rebuild(ds: Dataset, bs: int, a: int, b: int, window: int, step_s: float) -> Run:
    batches = batches_of(list(range(len(ds))), bs, drop_last=False)

    def plain(rest: list[list[int]], workers: int) -> Iterator:
        kw: dict = dict(worker_init_fn=WorkerSetup(), multiprocessing_context=START["method"]) if workers else {}
        return iter(DataLoader(ds, batch_sampler=rest, num_workers=workers, **kw))

    it = plain(batches, a)
    drive(it, 10, step_s)
    waits_before, before = drive(it, window, step_s)
    t = time.perf_counter()
    shutdown: Callable[[], None] | None = getattr(it, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()  # what dropping the last reference to the iterator does
    it = plain(batches[10 + window :], b)
    call_s = time.perf_counter() - t
    after, _ = drive(it, window, step_s)
    if (shutdown := getattr(it, "_shutdown_workers", None)) is not None:
        shutdown()
    return summarise(waits_before, before, call_s, after, b)


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sample-ms", default="1.5,6,0.2+4", help="comma-separated per-sample costs: CPU ms, or CPU+IO ms")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--step-ms", type=float, default=3.0)
    ap.add_argument(
        "--step-python-ms",
        type=float,
        default=0.0,
        help="of each step, ms of Python that holds the GIL (a real step dispatches its kernels so)",
    )
    ap.add_argument("--window", type=int, default=30)
    ap.add_argument("--changes", default="1:2,2:4,4:1,0:2,2:4:2", help="a:b or a chain a:c:b, comma-separated")
    ap.add_argument("--handover", type=int, default=None, help="batches; default: the loader's estimate")
    ap.add_argument("--start-method", choices=["fork", "forkserver", "spawn"], default="fork")
    ap.add_argument("--max-after", type=int, default=400, help="batches the epoch holds after the change")
    ap.add_argument(
        "--main-mb",
        type=int,
        default=0,
        help="MB of memory the training process touches first: a fork costs what it does in a real one",
    )
    ap.add_argument(
        "--one-pool", action="store_true", help="start each epoch's workers as one pool (split_pools=False)"
    )
    args = ap.parse_args()
    at_least(ap, args, repeats=1, batch_size=1, step_ms=0, step_python_ms=0, window=1, handover=0, max_after=1)
    at_least(ap, args, main_mb=0)
    sample_costs(ap, args.sample_ms)
    changes = worker_changes(ap, args.changes)
    ballast = torch.ones(args.main_mb * 2**18) if args.main_mb > 0 else None  # 4 bytes each, all touched
    START["method"] = args.start_method
    STEP["python_s"] = args.step_python_ms / 1e3
    SPLIT["pools"] = not args.one_pool
    warnings.filterwarnings("ignore", message=".*worker processes in total.*")  # 4 workers on 2 cores
    warnings.filterwarnings("ignore", message=".*DataLoader workers on the .* cores.*")  # ResizableLoader's
    setup = max(len(c) - 2 for c in changes) * SETUP_BATCHES
    step_s = args.step_ms / 1e3
    table = Table(
        title=(
            f"wait at a resize, in batch times (median of {args.repeats}); {args.start_method}; batch {args.batch_size}; "
            f"step {args.step_ms} ms ({args.step_python_ms} ms of it holding the GIL); {psutil.cpu_count()} cores; "
            f"training process "
            f"{psutil.Process().memory_info().rss / 2**20:,.0f} MB; "
            f"{'one pool' if args.one_pool else 'split pools'} at an epoch's start; goal: make-before-break longest <= 1"
        ),
        title_justify="left",
    )
    cols = ("sample", "change", "batch time", "mbb switch", "mbb call", "mbb longest", "mbb total")
    loop = ("mbb, zygote: longest", "total")
    rest = ("rebuild call", "rebuild longest", "rebuild total", "longest: rebuild / mbb", "no resize longest")
    for col in (*cols, *loop, *rest):
        table.add_column(col, justify="left" if col in ("sample", "change") else "right")
    rows: list[tuple[float, float]] = []  # (make-before-break longest, control) per row
    zygote_rows: list[float] = []  # the zygote column's longest per row
    measured: list[str] = []  # what each --sample-ms value's samples cost here, in the training process
    for sample in args.sample_ms.split(","):
        cpu_ms, _, io_ms = sample.partition("+")
        ds = Busy(
            (setup + 10 + args.window + args.max_after) * args.batch_size,
            calibrate(float(cpu_ms)),
            float(io_ms or 0) / 1e3,
        )
        measured.append(f"{sample} ms: {sample_ms(ds):.2f} ms")
        for path in changes:
            a, b = path[-2:]
            runs = [
                make_before_break(ds, args.batch_size, path, args.window, step_s, args.handover)
                for _ in range(args.repeats)
            ]
            mbb = [r for r, _ in runs]
            switches = [sw for _, sw in runs]
            forked = [  # the same loader with its zygote forking the new workers
                make_before_break(ds, args.batch_size, path, args.window, step_s, args.handover, fork_server=True)[0]
                for _ in range(args.repeats)
            ]
            reb = [rebuild(ds, args.batch_size, a, b, args.window, step_s) for _ in range(args.repeats)]
            count = round(statistics.median(r.after for r in mbb))
            # in the row's unit: the batch time before the change (at ``a`` workers)
            ctl = [
                max(steady(ds, args.batch_size, n, args.window, step_s, count).worst_wait_s for n in (a, b))
                / statistics.median(r.batch_s for r in mbb)
                for _ in range(args.repeats)
            ]
            m_long = statistics.median(r.longest for r in mbb)
            r_long = statistics.median(r.longest for r in reb)
            z_long = statistics.median(r.longest for r in forked)
            rows.append((m_long, statistics.median(ctl)))
            zygote_rows.append(z_long)
            table.add_row(
                f"{cpu_ms}+{io_ms} ms" if io_ms else f"{cpu_ms} ms",
                " -> ".join(map(str, path)),
                f"{1e3 * statistics.median(r.batch_s for r in mbb):.1f} ms",
                "never" if None in switches else f"+{statistics.median(switches):.0f}",
                f"{1e3 * statistics.median(r.call_s for r in mbb):.1f} ms",
                f"{m_long:.2f}",
                f"{statistics.median(r.total for r in mbb):.2f}",
                f"{z_long:.2f}",
                f"{statistics.median(r.total for r in forked):.2f}",
                f"{1e3 * statistics.median(r.call_s for r in reb):.1f} ms",
                f"{r_long:.2f}",
                f"{statistics.median(r.total for r in reb):.2f}",
                f"{r_long / m_long:.1f}x" if m_long > 0.005 else "-",
                f"{statistics.median(ctl):.2f}",
            )
    console = Console(width=200)
    console.print(table)
    console.print("one sample costs here (median of 5, in the training process): " + "; ".join(measured))
    console.print(goal_summary(rows))
    better = sum(z < m for z, (m, _) in zip(zygote_rows, rows, strict=True))
    worse = sum(z > m for z, (m, _) in zip(zygote_rows, rows, strict=True))
    console.print(
        f"zygote longest <= 1 batch time: {sum(z <= 1 for z in zygote_rows)} of {len(zygote_rows)} rows; "
        f"shorter than make-before-break's in {count_of(better, 'row')}, longer in {worse}"
    )
    process_gb = psutil.Process().memory_info().rss / 2**30
    default = "zygote" if process_gb >= AUTO_ZYGOTE_GB else "make-before-break"
    console.print(
        f"the default (fork_server=None) in this {process_gb:.2f} GB training process is the {default} column "
        f"(the zygote from {AUTO_ZYGOTE_GB} GB; in 0 -> n rows the default forks it at the resize, not with the epoch)"
    )
    del ballast
    return 0


def goal_summary(rows: list[tuple[float, float]]) -> str:
    """How many rows meet the goal, split by whether the machine's own jitter (the control) is under one batch time."""
    quiet = [m for m, c in rows if c <= 1]
    noisy = [(m, c) for m, c in rows if c > 1]
    line = f"make-before-break longest <= 1 batch time: {sum(m <= 1 for m, _ in rows)} of {len(rows)} rows; "
    line += f"{sum(m <= 1 for m in quiet)} of the {len(quiet)} whose control is <= 1"
    if noisy:
        line += (
            ", "
            + f"{sum(m <= 1 for m, _ in noisy)} of the {len(noisy)} whose control is over 1 ("
            + ", ".join(f"{m:.2f} vs control {c:.2f}" for m, c in noisy)
            + ")"
        )
    return line


if __name__ == "__main__":
    sys.exit(interruptible(main))
