"""Measure steady-state throughput of one configuration: a batch source, a step, a time budget.

The loop times every batch (from the previous batch's end to this one's), and the time blocked on
the batch source, excludes the warm-up, and stops once the rate's relative standard error is under
the target or the budget is spent.  Around the measurement window it reads the CPU time and memory
of the job's process tree (the training process and its DataLoader workers).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import psutil

from adlrec.errors import JobContractError
from adlrec.profile.steady import estimate_rate, warmup_end

__all__ = ["EndlessSampler", "Measurement", "TreeUsage", "describe_error", "measure", "worker_init"]


GROUPS = 10  # batch-means groups for the rate's standard error


@dataclass(frozen=True)
class TreeUsage:
    cpu_util: float  # CPU seconds of the tree over the window / (window x logical cores)
    worker_uss_mb: float
    worker_pss_mb: float
    main_rss_mb: float
    workers_seen: int


@dataclass(frozen=True)
class Measurement:
    rate: float  # samples/s over the window
    rse: float
    batches: int
    seconds: float
    stable: bool
    wait_fraction: float  # share of the window spent blocked in next(batches)
    usage: TreeUsage


class EndlessSampler:
    """Indices ``0..n-1`` in a fresh seeded permutation each pass, forever (no epoch boundaries).

    A measurement must not pay for worker restarts at epoch ends, which a real job pays once per
    epoch, not once per few hundred batches as a small profiling dataset would.
    """

    def __init__(self, n: int, seed: int = 0) -> None:
        self.n = n
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        import torch

        g = torch.Generator().manual_seed(self.seed)
        while True:
            yield from torch.randperm(self.n, generator=g).tolist()


def worker_init(worker_id: int) -> None:
    """One intra-op thread per worker: the loader's parallelism is its processes, not BLAS threads."""
    import torch

    torch.set_num_threads(1)


class _Tree:
    def __init__(self, exclude: frozenset[int] = frozenset()) -> None:
        self.main = psutil.Process()
        self.cores = psutil.cpu_count(logical=True) or 1
        self.exclude = exclude  # children that are not the loader's (started before it, by someone else)

    def workers(self) -> list[psutil.Process]:
        return [p for p in self.main.children(recursive=True) if p.pid not in self.exclude]

    def cpu_seconds(self, procs: list[psutil.Process]) -> float:
        total = _cpu(self.main)
        for p in procs:
            total += _cpu(p)
        return total

    def memory(self, procs: list[psutil.Process]) -> tuple[float, float, int]:
        uss, pss, n = 0.0, 0.0, 0
        for p in procs:
            try:
                info = p.memory_full_info()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            uss += info.uss
            pss += getattr(info, "pss", info.uss)
            n += 1
        mb = 2**20
        return (uss / n / mb if n else 0.0, pss / n / mb if n else 0.0, n)


def _cpu(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return 0.0
    return t.user + t.system


def measure(
    batches: Iterator[Any],
    step: Callable[[Any], None],
    *,
    batch_size: int,
    budget_s: float,
    rse_target: float,
    min_batches: int,
    warmup_s: float,
    warmup_batches: int,
    clock: Callable[[], float] = time.perf_counter,
    what: str = "the dataset",
    step_what: str = "the training step",
    exclude: frozenset[int] = frozenset(),
) -> Measurement:
    """Run ``step`` over ``batches`` until the rate is stable or ``budget_s`` of window is spent.

    ``batches`` must be endless; if it stops, the measurement fails with a contract error.

    ``exclude``: pids of child processes that are not loader workers (their CPU and memory are not counted).
    """
    tree = _Tree(exclude)
    durations: list[float] = []
    waits: list[float] = []
    start = None  # index where the window starts
    procs: list[psutil.Process] = []
    cpu0 = 0.0
    t_window0 = 0.0
    mem = (0.0, 0.0, 0)
    mem_sampled = False
    last = clock()
    warm_deadline = last + max(warmup_s, 0.0) + budget_s  # warm-up may not take forever either

    while True:
        if start is None:
            # checked before each batch is drawn, so the window's clock starts before its first batch (with no
            # warm-up, before the first batch of all) and the window holds only batches timed inside it
            start = warmup_end(durations, warmup_batches, warmup_s)
            if start is None and last > warm_deadline:
                start = len(durations)  # the source is too slow to warm up in time: measure anyway
            if start is not None:
                procs = tree.workers()
                cpu0 = tree.cpu_seconds(procs)
                t_window0 = last
        try:
            batch = next(batches)
        except StopIteration:  # an endless source ended: a StopIteration raised in the job's code
            raise JobContractError(
                f"{what} ran out of batches after {len(durations)}: the DataLoader's sampler never ends, so a "
                "__getitem__ or collate_fn raised StopIteration; raise another exception (e.g. IndexError) instead"
            ) from None
        except JobContractError:
            raise
        except (Exception, SystemExit) as exc:  # sys.exit() in the job's code is its error, not adlrec's exit
            raise JobContractError(f"{what} raised {describe_error(exc)}") from exc
        got = clock()
        try:
            step(batch)
        except JobContractError:
            raise
        except (Exception, SystemExit) as exc:
            raise JobContractError(f"{step_what} raised {describe_error(exc)}") from exc
        now = clock()
        durations.append(now - last)
        waits.append(got - last)
        last = now

        if start is None:
            continue

        window = durations[start:]
        elapsed = now - t_window0
        if not mem_sampled and (elapsed >= budget_s / 2 or len(window) >= min_batches):
            mem = tree.memory(procs)
            mem_sampled = True
        if len(window) % 5 == 0 or elapsed >= budget_s:
            est = estimate_rate(window, [batch_size] * len(window), GROUPS)
            if est.stable(rse_target, min_batches) or elapsed >= budget_s:
                break

    assert start is not None  # the loop ends only inside a window
    window, win_waits = durations[start:], waits[start:]
    est = estimate_rate(window, [batch_size] * len(window), GROUPS)
    cpu1 = tree.cpu_seconds(procs)
    if not mem_sampled:
        mem = tree.memory(procs)
    wall = max(est.seconds, 1e-9)
    rss = tree.main.memory_info().rss / 2**20
    return Measurement(
        rate=est.rate,
        rse=est.rse,
        batches=est.batches,
        seconds=est.seconds,
        # Stopping early needs min_batches; a window that ran its whole budget is called stable
        # when its error is under target with at least one batch per batch-means group.
        stable=est.stable(rse_target, min(min_batches, GROUPS)),
        wait_fraction=min(1.0, sum(win_waits) / wall),
        usage=TreeUsage(
            cpu_util=min(1.0, max(0.0, (cpu1 - cpu0) / (wall * tree.cores))),
            worker_uss_mb=mem[0],
            worker_pss_mb=mem[1],
            main_rss_mb=rss,
            workers_seen=mem[2],
        ),
    )


def describe_error(exc: BaseException) -> str:
    """``Type: message`` on one line; for DataLoader worker errors, the original exception's line."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    if lines and lines[0].startswith("Caught ") and "DataLoader worker" in lines[0]:
        return f"{lines[-1]} (in a DataLoader worker)"
    return f"{type(exc).__name__}: {lines[0] if lines else '(no message)'}"
