"""The profiling sweep: a job's throughput and stall decomposition at each worker count.

Order of work, each part measured to a steady state (see :mod:`adlrec.profile.meter`):

1. fetch cost: the dataset's raw files read cold, then cached;
2. the compute ceiling: training steps on one batch already on the device, no loader;
3. for each worker count ``w`` from 0 to ``max_workers``: the loader alone (preprocessing rate,
   half the budget) and training with the loader (throughput, the full budget);
4. the compute ceiling again: if it moved by more than the two measurements' errors, the machine's
   speed changed during the sweep, and the profile's notes say so.

Nothing is logged here; the caller logs the finished :class:`~adlrec.schemas.Profile` in one go, so
a sweep that fails leaves no half curve behind.
"""

from __future__ import annotations

import itertools
import multiprocessing
import pickle
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone

import psutil

from adlrec.config import Settings
from adlrec.errors import JobContractError
from adlrec.job import Job
from adlrec.profile.decompose import decompose
from adlrec.profile.device import make_step
from adlrec.profile.fetch import FetchCost, measure_fetch
from adlrec.profile.hardware import detect_hardware
from adlrec.profile.meter import EndlessSampler, Measurement, describe_error, measure, worker_init
from adlrec.profile.steady import drift
from adlrec.schemas import Baseline, DeviceSpec, Hardware, Profile, ProfilePoint
from adlrec.words import count

__all__ = ["Progress", "default_max_workers", "profile_job"]


@dataclass(frozen=True)
class Progress:
    stage: str  # what was just measured, e.g. "w=2 train"
    done: int
    total: int


def default_max_workers(logical_cores: int) -> int:
    """A little past the core count, so the curve shows where oversubscription bends it; at most 16."""
    return max(1, min(16, logical_cores + 2))


class JobBench:
    """One job on one device, ready to measure: the parts a sweep and a probe are made of."""

    def __init__(self, job: Job, device: DeviceSpec, settings: Settings) -> None:
        import torch

        # Sweeps go past the core count on purpose; torch's advice against that is noise here.
        warnings.filterwarnings("ignore", message="This DataLoader will create", category=UserWarning)
        torch.manual_seed(job.config.seed)
        self.job, self.device, self.settings = job, device, settings
        self.dataset = job.dataset()
        self.step = make_step(job, device)
        # processes this one had before any loader (a service's writer, a test's helpers) are not workers
        self._foreign = frozenset(p.pid for p in psutil.Process().children(recursive=True))
        self._picklable = False  # checked once, before the first loader with workers

    def fetch(self) -> FetchCost:
        files = self.job.files(self.dataset)
        return measure_fetch(files, len(self.dataset), max_files=self.settings.fetch_sample_files)

    def ceiling(self, budget_s: float) -> Measurement:
        """Training steps on one batch already on the device: no loader at all."""
        return self._run(itertools.repeat(self.step.place(self._first_batch())), self.step, budget_s, 3)

    def _first_batch(self) -> object:
        try:
            return next(iter(self._loader(0)))
        except (Exception, SystemExit) as exc:  # sys.exit() in __getitem__ too: a line, not adlrec's silent exit
            raise JobContractError(f"{self.job.path.name}: the dataset raised {describe_error(exc)}") from exc

    def _check_picklable(self) -> None:
        """Refuse a batch pickle cannot write: a worker could never send it, and the loader would wait for it."""
        if self._picklable:
            return
        batch = self._first_batch()
        try:
            pickle.Pickler(_Discard(), protocol=pickle.HIGHEST_PROTOCOL).dump(batch)
        except Exception as exc:
            raise JobContractError(
                f"{self.job.path.name}: a batch cannot be pickled ({describe_error(exc)}); DataLoader worker "
                "processes send batches by pickling them, so __getitem__ and collate_fn must return picklable "
                "objects (tensors, numbers, lists, dicts)"
            ) from exc
        self._picklable = True

    def loader_alone(self, workers: int, budget_s: float) -> Measurement:
        with self._batches(workers) as it:
            return self._run(it, _noop, budget_s, _warmup_batches(workers))

    def training(self, workers: int, budget_s: float) -> Measurement:
        with self._batches(workers) as it:
            return self._run(it, self.step, budget_s, _warmup_batches(workers))

    def _run(self, batches: Iterator, step_fn: Callable, budget_s: float, warmup_batches: int) -> Measurement:
        s = self.settings
        return measure(
            batches,
            step_fn,
            batch_size=self.job.batch_size,
            budget_s=budget_s,
            rse_target=s.rse_target,
            min_batches=s.min_batches,
            warmup_s=s.warmup_s,
            warmup_batches=warmup_batches,
            what=f"{self.job.path.name}: the dataset",
            step_what=f"{self.job.path.name}: the training step (forward, loss_fn, backward, optimizer step)",
            exclude=self._foreign,
        )

    def _loader(self, workers: int):
        import torch
        from torch.utils.data import DataLoader

        seed = self.settings.seed
        return DataLoader(
            self.dataset,
            batch_size=self.job.batch_size,
            sampler=EndlessSampler(len(self.dataset), seed),
            num_workers=workers,
            collate_fn=self.job.collate_fn,
            pin_memory=self.device.kind == "cuda",
            worker_init_fn=worker_init if workers else None,
            prefetch_factor=2 if workers else None,
            generator=torch.Generator().manual_seed(seed),
            timeout=self.settings.worker_timeout_s if workers else 0,
            # fork where the platform has it: workers inherit the job's module, which adlrec imports
            # from a path, so spawned workers could not unpickle the job's classes.
            multiprocessing_context=_FORK if workers else None,
        )

    @contextmanager
    def _batches(self, workers: int) -> Iterator[Iterator]:
        """A loader's iterator whose workers are shut down however the block ends.

        Dropping the reference is not enough when the block raised: the traceback's frames keep
        the iterator, and its worker processes, alive.  torch has no public close(), so call the
        method its own ``__del__`` calls.
        """
        if workers:
            self._check_picklable()
        it = iter(self._loader(workers))
        try:
            yield it
        except JobContractError as exc:
            if not _timed_out(exc.__cause__):
                raise
            raise JobContractError(
                f"{self.job.path.name}: no batch came from the DataLoader workers in {self.settings.worker_timeout_s:g} s "
                "(ADLREC_WORKER_TIMEOUT_S): a __getitem__ or collate_fn that never returns, or a worker that lost "
                "its batch"
            ) from exc.__cause__
        finally:
            shutdown = getattr(it, "_shutdown_workers", None)
            if shutdown is not None:
                shutdown()


def _warmup_batches(workers: int) -> int:
    return 2 * workers + 3  # the prefetch burst: every worker's first two batches arrive together


def profile_job(
    job: Job,
    device: DeviceSpec,
    settings: Settings,
    *,
    max_workers: int | None = None,
    command: str = "",
    on_progress: Callable[[Progress], None] | None = None,
    hardware: Hardware | None = None,
) -> Profile:
    hardware = hardware or detect_hardware()
    if max_workers is None:
        max_workers = default_max_workers(hardware.logical_cores)
    total = 3 + 2 * (max_workers + 1)
    done = 0

    def report(stage: str) -> None:
        nonlocal done
        done += 1
        if on_progress is not None:
            on_progress(Progress(stage=stage, done=done, total=total))

    bench = JobBench(job, device, settings)
    budget = settings.point_budget_s
    fetch = bench.fetch()
    report("fetch")
    ceiling = bench.ceiling(budget)
    report("ceiling")

    points: list[ProfilePoint] = []
    for w in range(max_workers + 1):
        prep = bench.loader_alone(w, budget / 2)
        report(f"w={w} loader")
        train = bench.training(w, budget)
        report(f"w={w} train")
        shares = decompose(train.rate, ceiling.rate, prep.rate, fetch.extra_s, w)
        points.append(
            ProfilePoint(
                workers=w,
                throughput=train.rate,
                rse=train.rse,
                batches=train.batches,
                seconds=train.seconds,
                stable=train.stable,
                wait_fraction=train.wait_fraction,
                stall_fraction=shares.stall_fraction,
                prep_share=shares.prep_share,
                fetch_share=shares.fetch_share,
                prep_rate=prep.rate,
                cpu_util=train.usage.cpu_util,
                worker_uss_mb=train.usage.worker_uss_mb,
                worker_pss_mb=train.usage.worker_pss_mb,
                main_rss_mb=train.usage.main_rss_mb,
            )
        )
    ceiling_end = bench.ceiling(budget)  # the bookend: did the machine's speed hold over the sweep?
    report("ceiling again")
    prep0 = points[0].prep_rate

    notes = []
    if device.emulated:
        notes.append(f"training step emulated by a {device.step_ms:g} ms wait; data loading is real")
    moved = drift(ceiling.rate, ceiling.rse, ceiling_end.rate, ceiling_end.rse, settings.rse_target)
    if moved is not None:
        notes.append(
            f"the compute ceiling moved from {ceiling.rate:,.1f} to {ceiling_end.rate:,.1f} samples/s ({moved:+.0%}) "
            "between the sweep's start and end: the machine's speed changed while it ran, so the points "
            "may differ by more than their own errors; profile again on a quieter machine, or compare two sweeps"
        )
    notes.extend(_small_epoch(len(bench.dataset), job.batch_size, max_workers))
    unstable = [p.workers for p in points if not p.stable]
    if unstable:
        notes.append(
            f"throughput error above the {settings.rse_target:.0%} target (or under 10 batches) when the "
            f"budget ran out at workers={unstable}: raise --budget for tighter figures"
        )
    return Profile(
        workload=job.name,
        source_hash=job.source_hash,
        params=dict(job.params),
        batch_size=job.batch_size,
        device=device,
        hardware=hardware,
        baseline=Baseline(
            ceiling=ceiling.rate,
            ceiling_rse=ceiling.rse,
            prep_rate=prep0,
            fetch_cold_s=fetch.cold_s,
            fetch_cached_s=fetch.cached_s,
            fetch_bytes=fetch.bytes_per_sample,
            fetch_method=fetch.method,
            ceiling_end=ceiling_end.rate,
            ceiling_end_rse=ceiling_end.rse,
        ),
        points=tuple(points),
        budget_s=settings.point_budget_s,
        rse_target=settings.rse_target,
        command=command,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        notes=tuple(notes),
    )


_FORK = "fork" if "fork" in multiprocessing.get_all_start_methods() else None


def _small_epoch(samples: int, batch_size: int, max_workers: int) -> list[str]:
    """A note when an epoch has fewer batches than the sweep has workers.

    The sweep's sampler runs across epoch ends, so every worker always has a batch to make; a real
    job's loader hands out one epoch's batches at a time, so at most that many workers are busy, and
    the points above that count show a rate the job cannot reach.
    """
    per_epoch = -(-samples // batch_size)  # the last batch may be partial
    if per_epoch >= max_workers:
        return []
    if samples < batch_size:
        shape = (
            f"the dataset holds {samples} samples, less than one batch of {batch_size}: a real epoch is one "
            f"batch of {samples}, while the sweep's batches repeat samples to make {batch_size}"
        )
    else:
        shape = f"an epoch of {samples} samples is {count(per_epoch, 'batch')} of {batch_size}"
    return [
        f"{shape}; a real epoch keeps at most {per_epoch} of its workers busy, while the sweep draws batches "
        f"across epoch ends, so the points above {count(per_epoch, 'worker')} show more than the "
        "job can get"
    ]


def _noop(batch: object) -> None:
    return None


def _timed_out(exc: BaseException | None) -> bool:
    """Whether ``exc`` is torch's error for a DataLoader ``timeout`` that expired."""
    return isinstance(exc, RuntimeError) and str(exc).startswith("DataLoader timed out")


class _Discard:
    """A file that forgets what is written: pickles a batch without holding a copy of it."""

    def write(self, data: bytes) -> int:
        return len(data)
