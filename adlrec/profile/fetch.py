"""Fetch cost: seconds per sample to read a dataset's raw bytes cold versus cached.

"Cold" needs the files out of the page cache.  Dropping the whole cache needs root and is refused
in most containers, and would disturb every other job on the node, so adlrec evicts only the
files it reads, with ``posix_fadvise(POSIX_FADV_DONTNEED)`` after flushing them.  The method used
is recorded next to every figure; where eviction is unavailable the cold figure is the first read.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["FetchCost", "measure_fetch", "spread"]

_CHUNK = 1 << 20


@dataclass(frozen=True)
class FetchCost:
    cold_s: float  # seconds per sample, cold
    cached_s: float  # seconds per sample, cached
    bytes_per_sample: float
    method: str

    @property
    def extra_s(self) -> float:
        """Extra seconds per sample that cold storage adds over cached reads (never negative)."""
        return max(0.0, self.cold_s - self.cached_s)


def spread(items: Sequence[Path], k: int) -> list[Path]:
    """Up to ``k`` items spread evenly over ``items`` (keeps the first and the order)."""
    n = len(items)
    if n <= k:
        return list(items)
    return [items[(i * n) // k] for i in range(k)]


def measure_fetch(
    files: Sequence[Path],
    samples: int,
    *,
    max_files: int = 256,
    clock: Callable[[], float] = time.perf_counter,
) -> FetchCost:
    """Read ``max_files`` of ``files`` cold, then cached; scale to ``samples`` samples' worth.

    ``files`` are all raw files behind a dataset of ``samples`` samples: a folder of images has one
    per sample; a text corpus may be one file for all.  Costs are per sample: total bytes of the
    dataset divided by samples, at the measured read speed.
    """
    if not files:
        return FetchCost(0.0, 0.0, 0.0, "not measured: model.py defines no raw_files(dataset)")
    bad = next((f for f in files if not f.is_file()), None)
    if bad is not None:
        why = "is a directory, not a file" if bad.is_dir() else "not found"
        return FetchCost(0.0, 0.0, 0.0, f"not measured: raw file {why}: {bad}")
    sizes = {f: f.stat().st_size for f in files}
    total_bytes = sum(sizes.values())
    if total_bytes == 0:
        return FetchCost(0.0, 0.0, 0.0, "not measured: raw files are empty")
    # read speed is measured on files that hold bytes: a sample of only empty ones (some files empty, as
    # many as were picked) was reported as "raw files are empty" though the others were not
    chosen = spread([f for f in files if sizes[f]], max_files)
    chosen_bytes = sum(sizes[f] for f in chosen)

    method = _evict(chosen)
    t0 = clock()
    _read_all(chosen)
    cold = clock() - t0
    t0 = clock()
    _read_all(chosen)
    cached = clock() - t0

    scale = total_bytes / chosen_bytes / max(1, samples)  # from "the files read" to "one sample"
    return FetchCost(
        cold_s=cold * scale,
        cached_s=cached * scale,
        bytes_per_sample=total_bytes / max(1, samples),
        method=method,
    )


def _evict(files: Sequence[Path]) -> str:
    if not hasattr(os, "posix_fadvise"):
        _read_all(files)  # make "cold" the same as cached rather than a mix
        return "not evicted: posix_fadvise unavailable on this platform (cold = cached)"
    try:
        for f in files:
            fd = os.open(f, os.O_RDONLY)
            try:
                os.fdatasync(fd)  # dirty pages cannot be dropped: flush freshly written files first
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
    except OSError as exc:
        return f"not evicted: posix_fadvise failed ({exc.strerror}); cold = first read"
    return "posix_fadvise(DONTNEED) per file"


def _read_all(files: Sequence[Path]) -> None:
    for f in files:
        with open(f, "rb", buffering=0) as fh:
            while fh.read(_CHUNK):
                pass
