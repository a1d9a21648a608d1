"""``ResizableLoader``: a map-style ``DataLoader`` whose worker count changes mid-epoch, losing nothing.

The object keeps the epoch's batch list and a :class:`~adlrec.loader.schedule.Schedule` of which
pool (one inner ``DataLoader`` each) serves which batch.  ``resize(n)`` rewrites the schedule from a
cut past every batch already handed to workers (plus a short *handover*): growing adds a pool of the
difference beside the running ones, shrinking drops running pools when some of them add up to ``n``,
and otherwise a pool of ``n`` replaces them.  New pools start at once while the old ones keep serving
up to the cut: make-before-break, with the switch at a batch boundary.  The order of batches never
depends on worker counts.
"""

from __future__ import annotations

import _thread
import functools
import itertools
import logging
import math
import multiprocessing
import numbers
import os
import signal
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Collection, Iterable, Sequence
from multiprocessing.context import BaseContext
from typing import Any

import psutil
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset

from adlrec.errors import first_line
from adlrec.loader.errands import Errands
from adlrec.loader.order import EpochSampler, batches_of, draw_seed
from adlrec.loader.pacing import ForkPacer, deferred_sigint, paced
from adlrec.loader.pool import BatchRange, InnerLoader, Pool, shutdown
from adlrec.loader.schedule import Schedule, Stretch
from adlrec.loader.workers import WorkerGate, WorkerSetup, can_pin
from adlrec.loader.zygote import Zygote, ZygoteContext, can_use_zygote
from adlrec.words import count

__all__ = [
    "AUTO_ZYGOTE_GB",
    "MAX_POOLS",
    "EpochIterator",
    "ResizableLoader",
    "handover_batches",
    "kept_pools",
    "split_workers",
    "warmup_leads",
]

log = logging.getLogger("adlrec.loader")
wait_clock = time.perf_counter  # times ``waited_s`` (a module attribute, so that a test can replace it)

STATE_VERSION = 1
# What starting a pool can fail with when the system is short of something (processes or threads: fork's
# EAGAIN; open files: EMFILE; memory: ENOMEM): the loader then goes on with the workers it has.  Any other
# error (a dataset that does not pickle under spawn) is the user's to see.
START_ERRORS = (OSError, MemoryError)
MAX_POOLS = 8  # pools woven at once; a resize that would need more replaces them with one
SPLIT_POOLS = 4  # at most this many of them at an epoch's start (split_workers)
SPARE_STARTERS = 2  # threads kept ready to start a resize's new pools (errands.py); more start their own
# What a fork costs per GB of the forking process's resident memory, on top of a small process's:
# os.fork measured here took 6-10 ms with torch loaded, ~40 ms with 1 GB more touched, ~100 ms with 4 GB.
FORK_S_PER_GB = 0.025
# fork_server=None forks resizes' workers from a zygote when the training process holds at least this
# much resident memory at an epoch's start (each of its own forks then holds the GIL for 20 ms or more).
# bench/resize.py measured the two on a par in a 0.2 GB process (a step that is all sleep) and the
# zygote ahead from 0.9 GB on (a step holding the GIL for 2 of its 3 ms; docs/loader.md).
AUTO_ZYGOTE_GB = 0.5


def whole(name: str, value: Any, minimum: int = 0) -> int:
    """``value`` as an int, if it is a whole number (not a bool) ``>= minimum``; else an error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def check_flag(name: str, value: Any, none_ok: bool = False) -> None:
    """An error naming ``name`` unless ``value`` is a bool (or ``None`` where allowed): ``"no"`` is not False."""
    if isinstance(value, bool) or (none_ok and value is None):
        return
    expected = "True, False or None" if none_ok else "True or False"
    raise TypeError(f"{name} must be {expected}, got {value!r}")


def check_function(name: str, value: Any) -> None:
    """An error naming ``name`` unless ``value`` is callable or ``None``."""
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be a function or None, got {value!r}")


def check_context(value: Any) -> BaseContext | None:
    """A multiprocessing context from its start method's name (or a context); else an error naming the argument."""
    if value is None or isinstance(value, BaseContext):
        return value
    methods = multiprocessing.get_all_start_methods()
    if isinstance(value, str) and value in methods:
        return multiprocessing.get_context(value)
    raise ValueError(f"multiprocessing_context must be one of {', '.join(methods)} (or a context), got {value!r}")


def check_sampler(sampler: Any) -> Iterable[int] | None:
    """A sampler the loader can split and resume: iterable, and sized (an epoch's batch count must be known
    before it starts, for ``len()`` and to check a saved state)."""
    if sampler is None:
        return None
    if isinstance(sampler, (str, bytes)) or not isinstance(sampler, Iterable):
        raise TypeError(f"sampler must be an iterable of dataset indices (e.g. a DistributedSampler), got {sampler!r}")
    if not hasattr(sampler, "__len__"):
        raise TypeError(
            f"sampler must have a length (len(sampler): the indices of an epoch), as {type(sampler).__name__} "
            "does not; ResizableLoader needs an epoch's batch count before it starts"
        )
    return sampler


def check_cores(cores: Any) -> tuple[int, ...] | None:
    """``cores`` as a tuple of the cores this process may run on (where pinning works), or ``None``."""
    if cores is None:
        return None
    if isinstance(cores, (str, bytes)) or not isinstance(cores, Iterable):
        raise TypeError(f"cores must be a sequence of core numbers (e.g. [0, 1]), got {cores!r}")
    out = tuple(whole("cores[]", c) for c in cores)
    if not out:
        raise ValueError("cores must name at least one core, got an empty sequence")
    if can_pin():
        allowed = os.sched_getaffinity(0)
        bad = sorted(set(out) - allowed)
        if bad:
            raise ValueError(f"cores {bad} are not cores this process may run on; expected some of {sorted(allowed)}")
    return out


def handover_batches(
    start_method: str,
    workers: int,
    batch_interval_s: float | None,
    start_s: float | None = None,
    old_workers: int = 0,
    extra_forks: int = 0,
    process_gb: float = 0.0,
) -> int:
    """Batches the loop takes from the old pool after a resize, while ``workers`` new ones start and warm up.

    The new pool must first start: ``start_s``, how long starting such a pool took here (measured);
    without it, the typical times measured on this project's machines: 15 ms plus 20 ms per forked worker
    of a small process (35-95 ms for 1-4), plus :data:`FORK_S_PER_GB` per fork for each GB the forking process holds
    (``process_gb``; a fork copies its page tables), and 1 s plus 1 s per worker spawned or forkserver; and at least
    one batch per worker, as a pool started in a thread forks one worker per batch.  ``extra_forks`` more forks come first (a zygote to start), each
    costing what one worker's start does.  Then its workers' gates open one per batch, the first
    :func:`warmup_leads` batches before the switch.
    """
    if workers == 0 or batch_interval_s is None or batch_interval_s <= 0:
        return 0
    forks = workers + extra_forks
    if start_s is None:
        fork_s = 0.02 + FORK_S_PER_GB * process_gb
        start_s = 0.015 + fork_s * forks if start_method == "fork" else 1.0 + 1.0 * forks
    else:
        start_s *= forks / workers
    # forked in a thread one per batch (see pacing.py), so never in fewer than ``forks`` batches
    return math.ceil(max(forks, start_s / batch_interval_s)) + warmup_leads(workers, old_workers)[0]


def warmup_leads(workers: int, old_workers: int) -> tuple[int, ...]:
    """For each new worker, how many batches before the switch its gate opens.

    A pool of ``n`` workers in steady state starts each batch about ``n`` batch times before the loop
    takes it, worker ``i``'s first batch being the ``i``-th after the switch; the old pool's
    ``old_workers`` still share the cores meanwhile, so each lead is that much longer.
    """
    return tuple(workers - i + old_workers for i in range(workers))


def split_workers(workers: int, max_pools: int = SPLIT_POOLS) -> tuple[int, ...]:
    """The pools an epoch starts ``workers`` workers as, largest first: 1, 2, 4, ... workers and the rest.

    Some of them then add up to every smaller count, so a shrink drops pools (nothing starts, and the
    dropped workers' cores are free once they have served what they hold) instead of starting a pool
    beside the running ones.  Woven, they serve as one pool of ``workers`` does: every worker every
    ``workers``-th batch.  With ``max_pools`` reached the rest is one pool, and the counts between the
    small pools' sum and the rest are reached by replacing.
    """
    if workers <= 1:
        return (workers,)
    sizes: list[int] = []
    size = 1
    while len(sizes) < max_pools - 1 and sum(sizes) + size <= workers:
        sizes.append(size)
        size *= 2
    rest = workers - sum(sizes)
    return tuple(sorted([*sizes, rest] if rest else sizes, reverse=True))


def kept_pools(now: Stretch, workers: int, done: Collection[int] = ()) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Which of the pools serving ``now`` keep running when the loader goes to ``workers`` (and their weights).

    Growing keeps them all (a pool of the difference joins them, up to ``MAX_POOLS``); shrinking keeps
    the fewest, oldest pools that add up to ``workers`` exactly, if any do.  None are kept when going to
    or from 0 workers (an in-process loader is not woven with pools), or when no subset fits.  Pools in
    ``done`` have told torch they have nothing more this epoch, so they cannot be given more.
    """
    if workers == 0 or now.workers == 0:
        return (), ()
    pairs = [(p, w) for p, w in zip(now.pools, now.weights, strict=True) if p not in done]
    if workers > now.workers:
        return (now.pools, now.weights) if len(pairs) == len(now.pools) < MAX_POOLS else ((), ())
    for size in range(1, len(pairs) + 1):
        for subset in itertools.combinations(pairs, size):
            if sum(w for _, w in subset) == workers:
                return tuple(p for p, _ in subset), tuple(w for _, w in subset)
    return (), ()


class EpochIterator:
    """What ``iter(loader)`` returns: the live epoch's batches, until it ends or a newer ``iter()`` begins.

    A loader serves one epoch at a time: once a newer ``iter()`` has begun, taking a batch from an older
    iterator that had not reached its epoch's end is an error, not a silently shorter epoch.
    """

    def __init__(self, loader: ResizableLoader, generation: int) -> None:
        self.loader = loader
        self.generation = generation
        self.taken = 0  # batches this iterator handed out
        self.ended = False  # it handed out its epoch's last batch

    def __iter__(self) -> EpochIterator:
        return self

    def __next__(self) -> Any:
        if self.generation != self.loader._generation and not self.ended:
            raise RuntimeError(
                f"ResizableLoader: this iterator's epoch was replaced by a newer iter() of the same loader after "
                f"{self.taken} of its {len(self.loader)} batches; a ResizableLoader serves one epoch at a time "
                "(finish or leave one loop over it before starting another)"
            )
        clock = wait_clock  # not the loader's injected clock, whose readings tests count as batch intervals
        t = clock()
        try:
            batch = self.loader._next(self.generation)
        except StopIteration:
            self.ended = True
            raise
        finally:
            self.loader.waited_s += clock() - t
        self.taken += 1
        self.ended = self.loader._consumed >= len(self.loader)  # its last batch: a newer iter() cuts nothing short
        return batch

    def __len__(self) -> int:
        return len(self.loader)

    def __del__(self) -> None:
        """Dropped (the loop broke out of it, or raised): stop its epoch's workers now, as a ``DataLoader``'s
        iterator does; before, they ran on, holding their memory and prefetched batches, until the loader's
        next ``iter()``, ``close()`` or collection."""
        loader = getattr(self, "loader", None)  # absent if __init__ failed
        if loader is not None:
            loader._leave(self.generation)


def busy(method: Callable[..., Any]) -> Callable[..., Any]:
    """Count the loader busy while ``method`` runs: an iterator the garbage collector drops meanwhile (in
    this thread, with the loader's locks possibly held) leaves its epoch's pools to this or the next call."""

    @functools.wraps(method)
    def call(self: ResizableLoader, *args: Any, **kwargs: Any) -> Any:
        self._busy += 1
        try:
            return method(self, *args, **kwargs)
        finally:
            self._busy -= 1

    return call


class _Pools:
    """Everything that owns worker processes; no reference back to the loader, so a finalizer can close it."""

    def __init__(self) -> None:
        self.live: list[Pool] = []  # the live epoch's, oldest first
        self.schedule: Schedule | None = None  # the live epoch's: which pool serves which batch
        self.kept: list[Pool] = []  # persistent pools kept between epochs (woven, if several)
        # stopping drained pools (and zygotes) off the loop's path, and threads ready to start a resize's pools
        self.errands = Errands("adlrec-loader-reaper", spares=SPARE_STARTERS, spare_name="adlrec-loader-start")
        self.ids = itertools.count()
        self.zygote: Zygote | None = None  # forks the workers of resizes (docs/loader.md), once one needed it
        # in-process pools serving the live epoch's share of pools that could not start
        self.stand_ins: set[int] = set()

    def by_id(self, pool_id: int) -> Pool:
        for p in self.live:
            if p.id == pool_id:
                return p
        raise RuntimeError(f"ResizableLoader: the schedule names pool {pool_id}, which is not running")

    def reap(self, pool: Pool) -> None:
        self.errands.submit(shutdown, pool)

    def join_reapers(self) -> None:
        self.errands.join()

    def stop_live(self) -> None:
        while self.live:
            shutdown(self.live.pop())
        self.schedule = None
        self.stand_ins.clear()

    def zygote_for(self, objects: tuple[Any, ...]) -> Zygote | None:
        """The zygote for a resize's pool: holding ``objects`` (dataset, collate_fn, worker_init_fn), new
        if those changed since it was forked; ``None`` if they changed while its workers still run."""
        z = self.zygote
        if z is not None and all(a is b for a, b in zip(z.objects, objects, strict=True)):
            return z
        if z is not None:
            if self._zygote_busy():
                return None
            z.stop()
        self.zygote = Zygote(objects)
        return self.zygote

    def _zygote_busy(self) -> bool:
        """Whether a pool may still use the zygote: one running or kept that it forked, or any pool still
        shutting down (a stopped pool's start thread may still be asking it for workers)."""
        return self.errands.busy() or any(p.zygote is not None for p in [*self.live, *self.kept])

    def retire_zygote(self) -> None:
        """Stop the zygote if none of its workers run (the next epoch's resizes fork a fresh one, which
        sees the dataset as it is then).  Call after the reapers have joined."""
        if self.zygote is not None and not self._zygote_busy():
            self.zygote.stop()
            self.zygote = None

    def retire_idle_zygote(self) -> None:
        """Stop the zygote, off the loop's thread, once none of its pools is left, nor any still shutting
        down.  Mid-epoch, for an epoch resized to 0 workers: with no worker sharing its copy of the
        training process's pages, it alone would hold every page training writes until the epoch ends."""
        if self.zygote is None or self._zygote_busy():  # a drained pool may still be shutting down its workers
            return
        zygote, self.zygote = self.zygote, None  # a later resize forks a fresh one
        self.errands.submit(zygote.stop)  # joined with the reapers at the epoch's end

    def close(self) -> None:
        self.stop_live()
        while self.kept:
            shutdown(self.kept.pop())
        self.errands.close()
        if self.zygote is not None:
            self.zygote.stop()
            self.zygote = None


class ResizableLoader:
    """Batches of a map-style dataset, like ``DataLoader``, with :meth:`resize` to change workers mid-epoch.

    Iterating yields one epoch's batches; every index of the epoch comes exactly once and in the same
    order whatever the worker counts, resizes included.  ``len()`` is the epoch's batch count and never
    changes mid-epoch.  ``sampler.set_epoch(e)`` (or :meth:`set_epoch`) picks the epoch, as Lightning
    does each epoch; without it each ``iter()`` starts the next epoch, as a shuffling ``DataLoader``
    draws a new order each pass (unless the last ``iter()`` neither yielded a batch nor ran to its end: an
    ``iter()`` alone, as Lightning's check that a loader is iterable, uses up no epoch and starts no worker).  Call
    :meth:`close` (or use ``with``) to stop the workers of an epoch left unfinished.  Iterate from one
    thread; another thread may call :meth:`request_resize`.

    ``cores``: pin every worker to these cores (Linux ``sched_setaffinity``; a no-op elsewhere).
    ``handover``: batches beyond those in flight that the old pool serves after a resize; ``None``
    estimates where to switch from how long such a pool took to start (measured, else the start
    method's typical time), its warm-up (:func:`warmup_leads`) and the measured batch interval.  ``background_start``: start a resize's new pool in a
    thread, so the loop keeps taking the old pool's batches meanwhile (forking from a thread; False
    starts it inside ``resize``, which then blocks for the pool's start).  ``fork_server``: with fork,
    have the workers of a resize's pools forked by a zygote (:mod:`adlrec.loader.zygote`: one fork of
    this process at each epoch's start, which then holds the dataset as the epoch's first workers do)
    instead of by this process, each of whose forks holds the GIL for milliseconds to tens of
    milliseconds (docs/loader.md: what it costs and when it pays).  ``None`` (the default) decides at
    each epoch's start: a zygote when this process holds at least :data:`AUTO_ZYGOTE_GB` of resident
    memory, forked then if the epoch starts a pool of workers (else at its first resize).
    ``split_pools``: start an epoch's workers as several woven pools (:func:`split_workers`: 4 as 2,
    1 and 1) so that a later shrink drops some instead of starting a pool; ``False`` starts one pool.
    ``seed``: with ``shuffle``, the order of epoch ``e`` equals that of the ``e``-th pass of
    ``DataLoader(shuffle=True, generator=torch.Generator().manual_seed(seed))``; ``None`` draws a seed
    from torch's global RNG once.  ``sampler``: any sampler with a deterministic order per epoch, e.g.
    a ``DistributedSampler`` (which shards per rank: Lightning adds none to a non-``DataLoader``).
    """

    def __init__(
        self,
        dataset: Dataset[Any],
        batch_size: int = 1,
        *,
        shuffle: bool | None = False,
        seed: int | None = None,
        sampler: Iterable[int] | None = None,
        drop_last: bool = False,
        num_workers: int = 0,
        collate_fn: Callable[[list[Any]], Any] | None = None,
        pin_memory: bool = False,
        persistent_workers: bool = False,
        worker_init_fn: Callable[[int], None] | None = None,
        prefetch_factor: int = 2,
        multiprocessing_context: str | BaseContext | None = None,
        timeout: float = 0.0,
        cores: Sequence[int] | None = None,
        handover: int | None = None,
        background_start: bool = True,
        fork_server: bool | None = None,
        split_pools: bool = True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if isinstance(dataset, IterableDataset):
            raise TypeError(
                f"ResizableLoader needs a map-style dataset (with __len__ and __getitem__) so that it can "
                f"split and resume epochs; got the IterableDataset {type(dataset).__name__}"
            )
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(
                f"ResizableLoader needs a map-style dataset with __len__ and __getitem__; "
                f"{type(dataset).__name__} lacks {'__len__' if not hasattr(dataset, '__len__') else '__getitem__'}"
            )
        batch_size = whole("batch_size", batch_size, 1)
        num_workers = whole("num_workers", num_workers)
        prefetch_factor = whole("prefetch_factor", prefetch_factor, 1)
        handover = None if handover is None else whole("handover", handover)
        seed = None if seed is None else whole("seed", seed)
        cores = check_cores(cores)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout >= 0:
            raise ValueError(f"timeout must be a number of seconds >= 0, got {timeout!r}")
        multiprocessing_context = check_context(multiprocessing_context)
        for name, value in (
            ("drop_last", drop_last),
            ("pin_memory", pin_memory),
            ("persistent_workers", persistent_workers),
            ("background_start", background_start),
            ("split_pools", split_pools),
        ):
            check_flag(name, value)
        check_flag("fork_server", fork_server, none_ok=True)
        check_flag("shuffle", shuffle, none_ok=True)  # None: DataLoader's default, no shuffling
        check_function("collate_fn", collate_fn)
        check_function("worker_init_fn", worker_init_fn)
        sampler = check_sampler(sampler)
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.collate_fn = collate_fn
        self.pin_memory = pin_memory
        self.persistent_workers = persistent_workers
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor
        self.multiprocessing_context = multiprocessing_context
        self.timeout = timeout
        self.cores = cores
        self.handover = handover
        self.background_start = background_start
        self.fork_server = fork_server
        self.split_pools = split_pools
        self.sampler = EpochSampler(
            len(dataset),  # type: ignore[arg-type]
            shuffle=bool(shuffle),
            seed=draw_seed() if seed is None else seed,
            sampler=sampler,
        )
        self._clock = clock
        # seconds the training loop spent inside next() on this loader's iterators: waiting for batches
        # (and loading them, with 0 workers); ADLCallback reports it as the wait for data
        self.waited_s = 0.0
        self._workers = num_workers
        self._requested: int | None = None  # from request_resize, applied at the next batch
        self._lock = threading.Lock()
        self._pools = _Pools()
        self._finalizer = weakref.finalize(self, self._pools.close)
        self._batches: list[list[int]] | None = None  # the live epoch's batches; None between epochs
        self._epoch = -1  # the epoch last started
        self._consumed = 0  # batches of that epoch handed to the loop
        self._finished = True  # whether that epoch was served to its end
        # whether that epoch was used: it handed the loop a batch, ran to its end, or was resumed at its end
        self._yielded = False
        self._epoch_start = 0  # the position that epoch began at (after a load_state_dict, not 0)
        self._opening = False  # the live epoch's pools start with its first batch
        self._loop_thread: int | None = None  # the thread that iterates the live epoch
        self._resume_at = 0  # batches to skip at the next iter() (from load_state_dict)
        self._generation = 0  # counts iter() calls, so a replaced epoch's iterator stops
        self._busy = 0  # calls of the loader's under way (see busy)
        self._failed: tuple[int, str] | None = None  # the iter() generation an error stopped, and what to say
        self._last_t: float | None = None
        self._interval: float | None = None  # smoothed time between batches handed to the loop
        self._start_s: dict[int, float] = {}  # worker count -> how long starting such a pool last took
        self._process_gb = 0.0  # this process's resident memory at the epoch's start (a fork's cost grows with it)
        self._zygote_on = bool(fork_server)  # whether this epoch's resizes fork from a zygote (fork_server)
        self._serving: int | None = None  # workers of the pool that served the last batch
        self._retry: int | None = None  # a count that could not start, tried again at the next epoch's start
        self._warned: set[int] = set()  # worker counts already warned of as more than the cores
        self._shortages: set[tuple[int, int, int, str]] = set()  # start failures already warned of (_stand_in)
        self._warn_oversubscribed(num_workers)

    def _warn_oversubscribed(self, workers: int, stacklevel: int = 3) -> None:
        """Warn once per count of more workers than the cores they may run on, as ``DataLoader`` does (the
        inner loaders do not: a resize's pools would repeat it, and under the service a count is its plan)."""
        cores = len(self.cores) if self.cores else len(os.sched_getaffinity(0)) if can_pin() else os.cpu_count() or 1
        if workers > cores and workers not in self._warned:
            self._warned.add(workers)
            warnings.warn(
                f"ResizableLoader: {workers} DataLoader workers on the {cores} cores they may run on; more workers "
                "than cores take turns on them, each holding its own memory",
                UserWarning,
                stacklevel=stacklevel,  # the caller's line
            )

    # -- what DataLoader users and Lightning look at ---------------------------------------------

    # Batches are made from ``sampler`` by ``batch_size``, as a DataLoader without a custom batch sampler
    # says with None (Lightning reads it to tell whether a loader shuffles).
    batch_sampler = None

    @property
    def num_workers(self) -> int:
        """The worker count now requested (the pool serving right now may still be the previous one)."""
        return self._workers

    @property
    def serving_workers(self) -> int | None:
        """Workers of the pool that served the last batch (a resize's new pool takes over later)."""
        return self._serving

    @property
    def start_method(self) -> str:
        ctx = self.multiprocessing_context
        return ctx.get_start_method() if ctx is not None else multiprocessing.get_start_method()

    def __len__(self) -> int:
        if self._batches is not None:
            return len(self._batches)
        n = len(self.sampler)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)

    # -- iteration -------------------------------------------------------------------------------

    @busy
    def __iter__(self) -> EpochIterator:
        self._start_epoch()
        return EpochIterator(self, self._generation)

    def _leave(self, generation: int) -> None:
        """The iterator of ``generation`` was dropped: stop its epoch's pools if that epoch is still the live
        one.  Only in the thread that iterates, outside the loader's own calls (:func:`busy`); elsewhere the
        next ``iter()``, ``close()`` or the loader's collection stops them, as before."""
        if (
            generation == self._generation
            and self._batches is not None
            and not self._busy
            and threading.get_ident() == self._loop_thread
        ):
            # Called from __del__, where Python prints an exception as "Exception ignored" and drops it: a ^C
            # while the workers stop (the loop broke out) was lost, and training went on.  It is noted, and
            # sent again by a thread not waited for (Thread.start waits): that thread needs the GIL, which this
            # one keeps past the few steps left of __del__, so the KeyboardInterrupt comes in the caller.
            with deferred_sigint() as deferred:
                self._abandon()
            if deferred:
                _thread.start_new_thread(os.kill, (os.getpid(), signal.SIGINT))

    @busy
    def _next(self, generation: int) -> Any:
        if self._failed is not None and self._failed[0] == generation:
            raise RuntimeError(self._failed[1])
        if self._batches is None or generation != self._generation:
            raise StopIteration  # this epoch ended, or a newer iter() replaced it
        self._loop_thread = threading.get_ident()  # resize() belongs to this thread
        with self._lock:
            requested, self._requested = self._requested, None
        if requested is not None:
            self.resize(requested)
        if self._opening:  # the epoch's first batch: start its workers now (iter() alone starts none)
            self._opening = False
            self._open_epoch()
        pools, position = self._pools, self._consumed
        if pools.schedule is None or position >= len(self._batches):
            self._yielded = True  # run to its end: used, even an epoch of no batch (drop_last), as a DataLoader's
            self._end_epoch()
            raise StopIteration
        try:
            pool = self._started(position)
            batch = next(pool.it)  # type: ignore[arg-type]  # _started returns a started pool
        except StopIteration:
            exc = RuntimeError(
                f"ResizableLoader: pool {pool.id} ({count(pool.workers, 'worker')}) ran out before batch {position}"
            )
            self._fail(generation, position, exc)
            raise exc from None
        except BaseException as exc:
            self._fail(generation, position, exc)
            raise
        self._consumed += 1
        self._yielded = True
        serving = pools.schedule.stretch_at(position)  # a stand-in's share is loaded here, not by workers
        self._serving = sum(w for p, w in zip(serving.pools, serving.weights, strict=True) if p not in pools.stand_ins)
        self._retire_done()
        if pools.zygote is not None and self._workers == 0:
            pools.retire_idle_zygote()
        for pending in pools.live:
            pending.advance(self._consumed)
        self._tick()
        return batch

    def _fail(self, generation: int, position: int, exc: BaseException) -> None:
        """Loading batch ``position`` raised ``exc`` (from the dataset, a dead worker, a timeout): stop every
        worker, and have each later ``next()`` of this epoch say so.  Before, they just stopped: a loop that
        logged the error and asked for the next batch, as it may with a ``DataLoader``, got an epoch silently
        cut short there."""
        assert self._batches is not None
        self._failed = (
            generation,
            f"ResizableLoader: this epoch stopped at batch {position} of {len(self._batches)}, whose loading raised "
            f"{type(exc).__name__}{': ' if first_line(exc) else ''}{first_line(exc)}; its workers were stopped and "
            "no later batch comes (iter() starts the next epoch; load_state_dict(state_dict()) resumes this one "
            "at that batch)",
        )
        self.close()

    def _started(self, position: int) -> Pool:
        """The pool serving ``position``, started: one the system could not start is replaced (:meth:`_stand_in`)."""
        pools = self._pools
        while True:  # each turn a pool that failed is replaced by an in-process one, which cannot fail to start
            assert pools.schedule is not None
            pool = pools.by_id(pools.schedule.owner(position))
            pool.open_all()  # a pool serving the loop: all its workers (a resize's, once the switch is here)
            if pool.it is not None:
                return pool
            try:
                pool.wait_started()
            except START_ERRORS as exc:
                self._stand_in((pool.id,), pool.workers, exc)
                continue
            if pool.start_s is not None:  # per worker's share, without the zygote's fork
                self._start_s[pool.workers] = pool.start_s * pool.workers / (pool.workers + pool.extra_forks)
            assert pool.it is not None
            return pool

    def _stand_in(self, pool_ids: Sequence[int], workers: int, exc: BaseException) -> None:
        """Pools ``pool_ids`` (``workers`` in all) could not start (``exc``): in-process pools serve their
        share of the epoch, and the loader goes on with the workers that did start.  Nothing is lost or
        repeated, the training loop sees no error, and a plan the system cannot run leaves the running
        pools running.  The count asked for is tried again at the next epoch's start (a shortage of files
        or processes often passes), unless another count is asked for first."""
        pools, schedule = self._pools, self._pools.schedule
        assert schedule is not None
        for pool_id in pool_ids:
            for failed in [p for p in pools.live if p.id == pool_id]:
                pools.live.remove(failed)
                shutdown(failed)  # drops its start error, whose traceback held torch's half-made iterator
            stand_in = next(pools.ids)
            with schedule.lock:
                schedule.replace(pool_id, stand_in)
            pools.live.append(self._open(stand_in, self._consumed, 0, background=False))
            pools.stand_ins.add(stand_in)
        live = {p.id: p.workers for p in pools.live}
        last = schedule.last
        going_on = sum(w for p, w in zip(last.pools, last.weights, strict=True) if live.get(p, 0) > 0)
        asked = self._workers if self._retry is None else self._retry
        # A lasting shortage fails the same way at every epoch's retry: one warning, the repeats at INFO.
        shortage = (workers, going_on, asked, type(exc).__name__)
        level = logging.INFO if shortage in self._shortages else logging.WARNING
        self._shortages.add(shortage)
        log.log(
            level,
            "ResizableLoader: could not start %s (%s: %s); going on with %d (no sample is "
            "lost), %d again at the next epoch's start",
            count(workers, "DataLoader worker"),
            type(exc).__name__,
            str(exc),  # not the exception: a handler keeping records would keep torch's half-made iterator
            going_on,
            asked,
        )
        self.resize(going_on)
        self._retry = asked if asked != going_on else None

    def _start_epoch(self) -> None:
        """Begin an epoch: its order and batches.  Its workers start with its first batch (:meth:`_open_epoch`).

        Without ``set_epoch``, the epoch after the last one started, unless that one neither yielded a batch
        nor ran to its end: an ``iter()`` nobody took a batch from (Lightning's check that the loader is iterable) does not
        use up an epoch's order, as it starts no worker.
        """
        self._abandon()
        self._generation += 1
        self._loop_thread = threading.get_ident()
        self.sampler.adopt_own_epoch()  # sampler.set_epoch(e) on the caller's own sampler picks the epoch too
        # the last epoch again, from where it began, if nothing used it (no batch, not run or resumed to its end)
        again = not self.sampler.epoch_set and not self._yielded and self._epoch >= 0
        if self.sampler.epoch_set:
            epoch = self.sampler.epoch
        else:
            epoch = self._epoch if again else self._epoch + 1
            self.sampler.set_epoch(epoch)
        self.sampler.epoch_set = False
        batches = batches_of(self.sampler.order(), self.batch_size, self.drop_last)
        start = min(self._epoch_start if again else self._resume_at, len(batches))
        self._resume_at, self._epoch_start = 0, start
        self._epoch, self._batches, self._consumed, self._finished = epoch, batches, start, False
        self._yielded = 0 < len(batches) <= start  # resumed at its end: used up, though it yields nothing
        self._last_t = None
        self._opening = start < len(batches)

    def _open_epoch(self) -> None:
        """Start the live epoch's pools (or take over the persistent ones kept from the last epoch)."""
        assert self._batches is not None
        batches, start = self._batches, self._consumed
        try:
            self._process_gb = psutil.Process().memory_info().rss / 2**30
        except (OSError, psutil.Error):  # /proc unreadable (out of open files): the last epoch's figure will do
            pass
        self._zygote_on = self._process_gb >= AUTO_ZYGOTE_GB if self.fork_server is None else self.fork_server
        with self._lock:  # read once: request_resize may set it from another thread
            if self._retry is not None:  # a count that could not start last epoch: try it again
                self._workers, self._retry = self._retry, None
            pools, workers = self._pools, self._workers
        # now, while the loop waits for the epoch's workers anyway; spares only for pools started in threads
        pools.errands.spares_wanted = SPARE_STARTERS if self.background_start else 0
        pools.errands.ensure_thread()
        kept, pools.kept = pools.kept, []
        if not (kept and sum(p.workers for p in kept) == workers):
            for pool in kept:
                shutdown(pool)
            kept = []
            pools.retire_zygote()  # none of its workers run now: a fresh one sees the dataset as it is now
        if workers > 0 and (self.fork_server or not kept) and self._uses_zygote():
            # One fork now, while the loop waits for the epoch's first batch anyway.  By default only when
            # the epoch forks a pool now: the zygote's copy of this process's pages is then the one the
            # epoch's workers hold too; kept pools hold an earlier epoch's (a resize forks it then).  With
            # persistent pools kept, their zygote is kept too: it holds the dataset as their workers do.
            # Never for an epoch of 0 workers: its first batch would stop that zygote (retire_idle_zygote),
            # a fork for nothing; its first resize forks one.
            zygote = pools.zygote_for(self._shared())
            if zygote is not None:
                try:
                    zygote.ensure_running()
                except START_ERRORS as exc:  # the epoch's workers fork from here; a resize tries the zygote again
                    log.warning("ResizableLoader: could not fork the zygote (%s: %s)", type(exc).__name__, exc)
        if kept:
            # persistent pools: the same weave from the start of the new epoch
            stretch = Stretch(start, tuple(p.id for p in kept), tuple(p.workers for p in kept))
            pools.schedule = Schedule(len(batches), stretch)
            for pool in kept:
                pool.range.configure(batches, pools.schedule, start)
                pool.launch(False)
                pools.live.append(pool)
            return
        sizes = split_workers(workers) if self.split_pools else (workers,)
        ids = tuple(next(pools.ids) for _ in sizes)
        pools.schedule = Schedule(len(batches), Stretch(start, ids, sizes))
        for k, (pool_id, size) in enumerate(zip(ids, sizes, strict=True)):
            numbers = tuple(range(sum(sizes[:k]), sum(sizes[: k + 1])))
            pools.live.append(self._open(pool_id, start, size, background=False, numbers=numbers, of=workers))

    def _open(
        self,
        pool_id: int,
        start: int,
        workers: int,
        background: bool,
        opens: tuple[int, ...] = (),
        numbers: tuple[int, ...] | None = None,
        of: int | None = None,
        pacer: ForkPacer | None = None,
    ) -> Pool:
        """Pool ``pool_id``, serving what the schedule gives it from ``start`` on with ``workers`` workers.

        ``opens``: a resize's new pool, whose workers are held until the loop has had that many batches.
        ``numbers``, ``of``: its workers' numbers (default ``0, 1, ...``) among ``of`` (default ``workers``),
        the workers of the stretch it opens in (:class:`~adlrec.loader.workers.WorkerSetup`).
        ``pacer``: another pool's that the same resize opens, to share (one fork per batch for all).
        """
        assert self._batches is not None and self._pools.schedule is not None
        rng = BatchRange(pool_id)
        gate = context = zygote = None
        extra_forks = 0  # the zygote's own fork, when this pool's start makes it
        shared, pacer = pacer, None
        if opens and workers > 0:
            if background:  # paced by the loop's thread, so never when starting inside it
                pacer = shared or ForkPacer()
                if self._uses_zygote():
                    zygote = self._pools.zygote_for(self._shared())
                if zygote is not None:
                    # Paced like the training process's own forks: the zygote (if it is not running yet),
                    # then each worker, one per batch the loop takes.  A fork in the zygote costs no GIL
                    # here, but it and the worker's start-up take a core, which on saturated cores the
                    # running pool's next batch needs.  (Pools sharing a pacer: whichever starts first
                    # forks the zygote; its start time is counted with the first pool's.)
                    extra_forks = int(not zygote.running and shared is None)
                    context = ZygoteContext(zygote, pacer)
                else:
                    context = paced(self._context(), pacer)
                    pacer = pacer if context is not None else None
            gate = WorkerGate(workers, context or self._context())
        numbers = tuple(range(workers)) if numbers is None else numbers
        inner = self._inner(rng, start, workers, gate, context, zygote, numbers, workers if of is None else of)
        pool = Pool(
            pool_id,
            start,
            workers,
            rng,
            inner,
            pacer=pacer,
            gate=gate,
            opens=opens,
            zygote=zygote,
            extra_forks=extra_forks,
            numbers=numbers,
        )
        rng.configure(self._batches, self._pools.schedule, start)
        background = background and workers > 0
        pool.launch(background, self._pools.errands.take_spare() if background else None)
        return pool

    def _uses_zygote(self) -> bool:
        return self._zygote_on and self.background_start and self.start_method == "fork" and can_use_zygote()

    def _shared(self) -> tuple[Any, ...]:
        """What a zygote holds for its workers, by reference (:class:`~adlrec.loader.zygote.Kept`)."""
        return (self.dataset, self.collate_fn, self.worker_init_fn)

    def _context(self) -> BaseContext:
        ctx = self.multiprocessing_context
        return ctx if ctx is not None else multiprocessing.get_context()

    def _inner(
        self,
        rng: BatchRange,
        start: int,
        workers: int,
        gate: WorkerGate | None = None,
        context: BaseContext | None = None,
        zygote: Zygote | None = None,
        numbers: tuple[int, ...] | None = None,
        of: int | None = None,
    ) -> DataLoader[Any]:
        # Worker i of a pool gets its generator's draw + i.  Pools opened at the same batch (an epoch's
        # split start, a split replace) need generators of their own, so the seed also mixes in the number
        # of the pool's first worker; before, worker 0 of each drew the same random numbers.  (A CPU
        # generator keeps only a seed's low 32 bits, so the factor must not be a multiple of 2**32.)
        first = numbers[0] if numbers else 0
        seed = (self.sampler.seed * 1_000_003 + self._epoch * 10_007 + start + first * 1_000_000_007) % 2**63
        # a zygote's workers get the dataset and functions it already holds, by reference
        dataset, collate_fn, init_fn = (
            (zygote.kept(0), zygote.kept(1), zygote.kept(2))
            if zygote is not None
            else (self.dataset, self.collate_fn, self.worker_init_fn)
        )
        kw: dict[str, Any] = {}
        if collate_fn is not None:
            kw["collate_fn"] = collate_fn
        if workers > 0:
            kw |= dict(
                worker_init_fn=WorkerSetup(self.cores, init_fn, gate, numbers, of),
                # forks one at a time with any pool starting in a thread (pacing.FORK_LOCK)
                multiprocessing_context=context or paced(self._context(), None) or self.multiprocessing_context,
                prefetch_factor=self.prefetch_factor,
                # Always persistent inside: the loader, not the iterator's exhaustion, decides when a
                # pool stops, so a drained pool can be shut down off the training loop's path.
                persistent_workers=True,
                timeout=self.timeout,
            )
        return InnerLoader(
            dataset,
            batch_sampler=rng,
            num_workers=workers,
            pin_memory=self.pin_memory,
            generator=torch.Generator().manual_seed(seed),  # each pool's seeds: not from the global RNG
            **kw,
        )

    def _retire_done(self) -> None:
        """Retire the pools that serve nothing more from the loop's position on.

        With ``persistent_workers``, the pools of the epoch's last stretch wait for its end (woven
        pools run out at different batches) and are kept for the next epoch if the count still holds.
        """
        assert self._batches is not None
        pools = self._pools
        schedule = pools.schedule
        assert schedule is not None
        epoch_end = self._consumed >= len(self._batches)
        last = schedule.last
        persist = self.persistent_workers and last.workers == self._workers > 0
        done = [
            p
            for p in pools.live
            if schedule.next_for(p.id, self._consumed) is None and (epoch_end or not (persist and p.id in last.pools))
        ]
        if not done:
            return
        pools.live = [p for p in pools.live if p not in done]
        keep = epoch_end and persist and set(last.pools) <= {p.id for p in done}
        for pool in done:
            if keep and pool.id in last.pools:
                pool.open_all()
                pool.wait_started()  # its start thread must be done before the next epoch resets it
                pool.it = None
                pools.kept.append(pool)
            elif epoch_end or pool.workers == 0:
                shutdown(pool)
            else:
                pools.reap(pool)  # a drained pool mid-epoch: its join need not delay the next batch
        if keep:
            pools.kept.sort(key=lambda p: last.pools.index(p.id))

    def _end_epoch(self) -> None:
        self._batches = None
        self._finished = True
        self._pools.stop_live()
        self._pools.errands.close()  # every drained pool stopped; the next epoch starts the thread again
        self._pools.retire_zygote()

    def _abandon(self) -> None:
        """Stop the pools of an epoch left unfinished (the loop broke out, or a new iter() began)."""
        self._pools.stop_live()
        self._pools.errands.close()  # every drained pool stopped; the next epoch starts the thread again
        self._pools.retire_zygote()
        self._batches = None

    def _tick(self) -> None:
        now = self._clock()
        if self._last_t is not None:
            dt = now - self._last_t
            self._interval = dt if self._interval is None else 0.8 * self._interval + 0.2 * dt
        self._last_t = now

    # -- resizing --------------------------------------------------------------------------------

    @busy
    def resize(self, num_workers: int, *, cores: Sequence[int] | None = None) -> None:
        """Continue the epoch with ``num_workers`` workers from the next batch; ``cores`` re-pins new pools.

        Call it from the thread that iterates, between batches.  With no live epoch it sets the count
        for the next one.  Growing adds a pool of the difference beside the running ones (up to
        ``MAX_POOLS``); shrinking drops running pools if some of them add up to ``num_workers``;
        otherwise a pool of ``num_workers`` replaces them.  A new pool starts now in a thread (with
        fork, one worker per batch the loop takes) and its workers wait for their turn; the running
        pools serve the batches they already have in flight (plus the handover), and a dropped pool is
        shut down once drained.
        """
        num_workers = whole("num_workers", num_workers)
        cores = check_cores(cores)
        if self._batches is not None and threading.get_ident() != self._loop_thread:
            raise RuntimeError(
                "resize() called from another thread than the one iterating the loader; call it from that "
                "thread between batches, or request_resize(n) from any thread (applied at the next batch)"
            )
        if cores is not None:
            self.cores = cores
        self._warn_oversubscribed(num_workers, stacklevel=4)  # resize is wrapped (busy)
        self._workers = num_workers
        self._retry = None  # a count asked for now replaces one that could not start
        pools = self._pools
        schedule = pools.schedule
        if self._batches is None or schedule is None or schedule.last.workers == num_workers:
            return
        now = schedule.last
        running = now.workers
        with schedule.lock:  # a pool starting in a thread takes batches meanwhile
            # pools torch asks no more, or already retired: they cannot be given more batches
            live = {p.id for p in pools.live}
            done = {p.id for p in pools.live if p.range.exhausted} | (set(now.pools) - live) | pools.stand_ins
            serving = schedule.stretch_at(min(self._consumed, schedule.length - 1))
            if serving is not now and serving.workers == num_workers and set(serving.pools) <= live - done:
                # back to the count serving now, before a pending cut: the serving pools go on
                kept, weights = serving.pools, serving.weights
            else:
                kept, weights = kept_pools(now, num_workers, done)
            added = num_workers - sum(weights)
            extra = 0  # batches past those handed out
            if self.handover is not None:
                want, extra = self._consumed, self.handover if added > 0 else 0
            elif added > 0:
                # a pool woven beside running ones opens its gates as the cut nears; a replacing one also
                # waits for the pools it replaces to share the cores with it (warmup_leads)
                zygote_fork = self._uses_zygote() and (self._pools.zygote is None or not self._pools.zygote.running)
                ahead = handover_batches(  # a zygote still to fork is one fork more before the workers
                    self.start_method,
                    added,
                    self._interval,
                    self._start_s.get(added),
                    0 if kept else running,
                    extra_forks=int(zygote_fork),
                    process_gb=self._process_gb,
                )
                want = self._consumed + ahead
            else:
                want = self._consumed  # dropping pools, or to 0 workers: nothing to start
            # past everything handed out (a pool that handed out nothing yet holds nothing back)
            at = max([want] + [p.range.cursor + extra for p in pools.live if p.range.handed])
            # the new pools: a pool of the difference beside kept ones; replacing them, a split start as an
            # epoch's (so that a later shrink drops pools), unless some of its pools would serve nothing
            sizes = (added,) if added > 0 or not kept else ()
            if self.split_pools and not kept and at < schedule.length:
                split = split_workers(added)
                if all(c > 0 for c in Stretch(at, tuple(range(len(split))), split).counts(schedule.length)):
                    sizes = split
            new_ids = tuple(next(pools.ids) for _ in sizes)
            # the new workers' numbers: the lowest that no kept worker has (after a drop the kept ones may
            # be, say, 2 of 4: a grow to 3 numbers the new pool's 0 and 1)
            taken = {n for p in pools.live if p.id in kept for n in p.numbers}
            free = (n for n in itertools.count() if n not in taken)
            numbers = [tuple(next(free) for _ in range(size)) for size in sizes]
            replacing = not kept  # the pools running now serve only up to the cut
            kept, weights = kept + new_ids, weights + sizes
            if at >= schedule.length or (
                new_ids and Stretch(at, kept, weights).count_for(new_ids[0], schedule.length) == 0
            ):
                return  # the running pools already hold the rest of the epoch; the next one uses the new count
            for p in pools.live:
                if not p.range.handed:  # it looks from where it opened; what it gets now may start earlier
                    p.range.cursor = min(p.range.cursor, at)
            schedule.rewrite(at, kept, weights)
        pacer = None
        for pool_id, size, pool_numbers in zip(new_ids, sizes, numbers, strict=True):
            # worker i's first batch is at + offset + i; in steady state a pool of n starts each batch
            # n batches ahead, and a replaced pool's workers share the cores until the switch
            lead = num_workers + (running if replacing else 0)
            offset = weights[: kept.index(pool_id)]
            opens = tuple(at + sum(offset) + i - lead for i in range(size))
            try:
                pool = self._open(
                    pool_id,
                    at,
                    size,
                    background=self.background_start,
                    opens=opens,
                    numbers=pool_numbers,
                    of=num_workers,
                    pacer=pacer,
                )
            except START_ERRORS as exc:  # the schedule names it and the pools after it: stand-ins serve them
                k = new_ids.index(pool_id)
                self._stand_in(new_ids[k:], sum(sizes[k:]), exc)
                return
            pacer = pacer or pool.pacer  # the next pools fork in the same turns
            pool.advance(self._consumed, fork=False)  # its first fork comes with the next batch
            pools.live.append(pool)
        self._retire_done()

    def request_resize(self, num_workers: int) -> None:
        """Thread-safe: apply ``resize(num_workers)`` at the next batch the loop asks for."""
        num_workers = whole("num_workers", num_workers)
        self._warn_oversubscribed(num_workers)
        with self._lock:
            self._requested = num_workers
            if self._batches is None:
                self._workers, self._retry = num_workers, None

    # -- state -----------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, int]:
        """Where the loop stands: the epoch and how many of its batches it has had (at any worker count)."""
        if self._finished and self._batches is None:
            self.sampler.adopt_own_epoch()
            nxt = self.sampler.epoch if self.sampler.epoch_set else self._epoch + 1
            epoch, consumed = nxt, 0
        else:
            epoch, consumed = self._epoch, self._consumed
        return {
            "version": STATE_VERSION,
            "epoch": epoch,
            "batches_consumed": consumed,
            "batches": len(self),
            "seed": self.sampler.seed,
            "samples": len(self.sampler),  # with batch_size: tells another dataset of as many batches apart
            "batch_size": self.batch_size,
        }

    @busy
    def load_state_dict(self, state: dict[str, int]) -> None:
        """The next ``iter()`` resumes ``state``'s epoch at its next batch, with this loader's worker count."""
        if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
            got = state.get("version") if isinstance(state, dict) else state
            raise ValueError(f"unknown ResizableLoader state (version {got!r}); expected what state_dict() returns")
        for key in ("epoch", "batches_consumed", "batches", "seed"):
            if key not in state:
                raise ValueError(f"ResizableLoader state lacks {key!r}; expected what state_dict() returns")
            try:
                whole(f"state[{key!r}]", state[key])
            except TypeError as exc:  # a bad state is a bad value, whatever is wrong in it
                raise ValueError(str(exc)) from None
        for key in ("samples", "batch_size"):  # absent from a state saved before they were recorded
            if key in state:
                try:
                    whole(f"state[{key!r}]", state[key])
                except TypeError as exc:
                    raise ValueError(str(exc)) from None
        epoch, consumed, batches, seed = (int(state[k]) for k in ("epoch", "batches_consumed", "batches", "seed"))
        n = len(self)  # the live epoch's count, or the next one's: the same (it never changes)
        shape = (state.get("samples", len(self.sampler)), state.get("batch_size", self.batch_size), batches)
        if shape != (len(self.sampler), self.batch_size, n):
            raise ValueError(
                f"the saved epoch had {shape[0]} samples in {batches} batches of {shape[1]}, this loader has "
                f"{len(self.sampler)} in {n} of {self.batch_size}: a different dataset, sampler, batch_size or drop_last"
            )
        if consumed > batches:
            raise ValueError(f"state['batches_consumed'] is {consumed}, more than the epoch's {batches} batches")
        # all checked: nothing above changed the loader
        self._abandon()
        self.sampler.seed = seed
        self.sampler.set_epoch(epoch)
        self._resume_at = consumed
        self._epoch, self._consumed, self._finished = epoch, consumed, False
        self._yielded = False

    # -- lifetime --------------------------------------------------------------------------------

    @busy
    def close(self) -> None:
        """Stop every worker this loader started (the live epoch's and a kept persistent pool) and join them."""
        self._pools.close()
        if self._batches is not None:
            self._batches = None

    def __enter__(self) -> ResizableLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
