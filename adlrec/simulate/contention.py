"""CPU contention on a shared node, as pure functions.

When the processes that want CPU (every job's main processes and loader workers) number ``D`` on a
node of ``N`` cores and ``D > N``, the scheduler gives each about ``s = N / D`` of a core (Linux CFS
shares time fairly between runnable processes).  Then:

* a job's ``w`` workers load like ``w * s`` workers: its loader-side rate is its curve interpolated at
  the fractional worker count ``w * s``;
* its main processes (one per GPU) also get ``s`` of a core.  A main process that needs ``u`` of a core
  to keep its accelerator fed (``main_cpu``; PyTorch's Python loop, kernel launches and CUDA's spin on
  synchronisation keep it near a full core, so the default is 1) runs its step at ``min(1, s / u)`` of
  full speed, capping the job at ``T(max) * min(1, s / u)``.  With no workers the main process does the
  loading too, so the job runs at ``T(0) * s``.

Who wants CPU is the contention model: ``all`` (the default) counts every worker, as if each were
always runnable.  ``busy`` counts only the workers a job can keep busy: its loader needs ``k`` workers
at full speed to reach ``T(max)`` (the curve's saturation point), so at share ``s`` it keeps
``min(w, k / s)`` of them busy and the others sleep on a full prefetch queue; ``s`` is then the
solution of ``s = min(1, N / D(s))``.  When the jobs' needs do not fit, no loader keeps up, every
worker stays busy, and ``busy`` gives the same share as ``all``.  ``all`` overstates contention for jobs whose loader outpaces their GPU;
``busy`` understates it (idle workers still wake, and oversubscription costs cache and memory).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["cpu_share", "effective_throughput", "interpolate", "saturation_workers"]


def interpolate(curve: Sequence[float], x: float) -> float:
    """``T(x)`` for a fractional worker count, linear between the integer points."""
    if x <= 0:
        return curve[0]
    if x >= len(curve) - 1:
        return curve[-1]
    lo = math.floor(x)
    frac = x - lo
    return curve[lo] + frac * (curve[lo + 1] - curve[lo])


def saturation_workers(curve: Sequence[float], rel: float = 1e-6) -> int:
    """The fewest workers at which the curve reaches its peak (within ``rel``)."""
    peak = max(curve)
    return next(w for w, t in enumerate(curve) if t >= peak * (1 - rel))


def cpu_share(
    cores: int,
    workers: Sequence[int],
    mains: Sequence[int],
    saturation: Sequence[int] | None = None,
) -> float:
    """The share of a core each process gets: ``min(1, N / D)``.

    With ``saturation`` (the ``busy`` model) a job's demand is its mains plus ``min(w, k / s)`` workers,
    and ``s`` solves ``s * D(s) = N``.  ``g(s) = s * mains + sum min(s * w, k)`` is continuous, increasing
    and piecewise linear (kinks at ``k / w``), so the root is found exactly, segment by segment.
    """
    demand = sum(workers) + sum(mains)
    if demand <= cores:
        return 1.0
    if saturation is None:
        return cores / demand
    pairs = list(zip(workers, saturation, strict=True))
    m = sum(mains)

    def g(s: float) -> float:
        return s * m + sum(min(s * w, k) for w, k in pairs)

    if g(1.0) <= cores:
        return 1.0
    lo = 0.0
    for b in sorted({k / w for w, k in pairs if w > 0 and 0 < k / w < 1}) + [1.0]:
        g_lo, g_b = g(lo), g(b)
        if g_b >= cores:
            return lo + (cores - g_lo) * (b - lo) / (g_b - g_lo)
        lo = b
    return 1.0  # unreachable: g(1) > cores


def effective_throughput(curve: Sequence[float], workers: int, share: float, main_cpu: float = 1.0) -> float:
    """A job's samples/s with ``workers`` workers when each process gets ``share`` of a core."""
    if share >= 1.0:
        return curve[workers]
    if workers == 0:
        return curve[0] * share
    loader = interpolate(curve, workers * share)
    if main_cpu <= 0:
        return loader
    return min(loader, max(curve) * min(1.0, share / main_cpu))
