"""Steady-state throughput from per-batch timings: pure functions, no clock.

The loop that measures records, for every batch, how long it took from the previous batch's end
to its own end and how many samples it carried.  Two questions are answered here:

* where the warm-up ends (worker start, the prefetch burst, first-touch page faults), and
* what the steady rate is, with its relative standard error, by the method of batch means:
  consecutive batches are grouped, each group gives one rate, and the spread of the group rates
  estimates the error.  Grouping absorbs the correlation between neighbouring batches (workers
  deliver in bursts of ``num_workers`` batches), which a per-batch standard error would ignore.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Estimate", "drift", "estimate_rate", "warmup_end"]


@dataclass(frozen=True)
class Estimate:
    rate: float  # items per second over the whole window
    rse: float  # relative standard error of ``rate`` (inf when it cannot be estimated yet)
    batches: int  # batches in the window
    seconds: float  # length of the window

    def stable(self, rse_target: float, min_batches: int) -> bool:
        return self.batches >= min_batches and self.rse <= rse_target


def warmup_end(durations: Sequence[float], min_batches: int, min_seconds: float) -> int | None:
    """Index of the first batch after warm-up, or ``None`` while still warming up.

    Warm-up is at least ``min_batches`` batches *and* at least ``min_seconds`` of wall time.
    """
    if min_batches < 0 or min_seconds < 0:
        raise ValueError("min_batches and min_seconds must be >= 0")
    elapsed = 0.0
    for i, d in enumerate(durations):
        if i >= min_batches and elapsed >= min_seconds:
            return i
        elapsed += d
    n = len(durations)
    if n >= min_batches and elapsed >= min_seconds:
        return n
    return None


def estimate_rate(durations: Sequence[float], sizes: Sequence[int], groups: int = 10) -> Estimate:
    """Rate and relative standard error by batch means over ``groups`` consecutive groups."""
    if len(durations) != len(sizes):
        raise ValueError(f"durations ({len(durations)}) and sizes ({len(sizes)}) differ in length")
    if groups < 2:
        raise ValueError("groups must be >= 2")
    if any(d < 0 for d in durations):
        raise ValueError("durations must be >= 0")
    n = len(durations)
    total_t = float(sum(durations))
    total_n = float(sum(sizes))
    if n == 0 or total_t <= 0:
        return Estimate(rate=0.0, rse=math.inf, batches=n, seconds=total_t)
    rate = total_n / total_t
    k = min(groups, n)
    if k < 2:
        return Estimate(rate=rate, rse=math.inf, batches=n, seconds=total_t)
    # Split into k contiguous groups of (nearly) equal batch counts.
    bounds = [round(i * n / k) for i in range(k + 1)]
    group_rates = []
    for lo, hi in itertools.pairwise(bounds):
        t = sum(durations[lo:hi])
        if t <= 0:
            return Estimate(rate=rate, rse=math.inf, batches=n, seconds=total_t)
        group_rates.append(sum(sizes[lo:hi]) / t)
    mean = sum(group_rates) / k
    var = sum((r - mean) ** 2 for r in group_rates) / (k - 1)
    rse = math.sqrt(var / k) / mean if mean > 0 else math.inf
    return Estimate(rate=rate, rse=rse, batches=n, seconds=total_t)


def drift(first: float, first_rse: float, last: float, last_rse: float, floor: float) -> float | None:
    """The relative change from ``first`` to ``last`` (two measurements of one rate, each with its
    relative standard error) if it is larger than their errors explain, else ``None``.

    Larger means a log ratio beyond three combined standard errors (a relative error is the standard
    error of the log rate, so a halving and a doubling weigh the same, and a rate that fell tenfold
    counts even when both were measured to 30%) and beyond ``floor`` (the precision a measurement is
    taken to, so that two very tight measurements a percent apart do not count).
    """
    if not (first > 0 and last > 0):
        return None
    limit = max(floor, 3.0 * math.hypot(first_rse, last_rse))
    return last / first - 1.0 if abs(math.log(last / first)) > limit else None
