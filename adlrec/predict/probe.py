"""The short probe: what a new job reveals in a fraction of a full sweep's time.

It measures the compute ceiling and the loader alone with 0, 1 and 2 workers (never training with
workers), plus the fetch cost, with the same measuring code a sweep uses.  Its time budget is a
quarter of what a full sweep to ``max_workers`` is budgeted, split over its four measurements.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from adlrec.config import Settings
from adlrec.job import Job
from adlrec.predict.features import ProbeFeatures
from adlrec.profile.sweep import JobBench
from adlrec.schemas import DeviceSpec, Hardware

__all__ = ["ProbeResult", "probe_budget", "probe_job", "sweep_budget"]

PROBE_SHARE = 0.25  # the probe gets at most this share of a full sweep's measurement budget
PROBED_WORKERS = (0, 1, 2)
# Loader-alone rates settle fast; a sweep's 0.5 s warm-up per point would be most of the probe.
# The first 2w+3 batches (worker start, the prefetch burst) are still always excluded.
PROBE_WARMUP_S = 0.1
PROBE_MIN_BATCHES = 12


@dataclass(frozen=True)
class ProbeResult:
    features: ProbeFeatures
    seconds: float  # wall time of the probe, warm-ups and worker starts included
    part_budget_s: float  # measurement budget of each of its four parts


def sweep_budget(point_budget_s: float, max_workers: int) -> float:
    """Measurement seconds a full sweep is budgeted: the ceiling, 1.5 budgets per worker count, and the
    ceiling again (sweep.py)."""
    return point_budget_s * (2 + 1.5 * (max_workers + 1))


def probe_budget(point_budget_s: float, max_workers: int) -> float:
    """Budget of each probe measurement (ceiling + three loader-alone passes)."""
    return PROBE_SHARE * sweep_budget(point_budget_s, max_workers) / (1 + len(PROBED_WORKERS))


def probe_job(job: Job, device: DeviceSpec, settings: Settings, hardware: Hardware, max_workers: int) -> ProbeResult:
    start = time.perf_counter()
    part = probe_budget(settings.point_budget_s, max_workers)
    quick = settings.model_copy(update={"warmup_s": PROBE_WARMUP_S, "min_batches": PROBE_MIN_BATCHES})
    bench = JobBench(job, device, quick)
    fetch = bench.fetch()
    ceiling = bench.ceiling(part)
    rates = [bench.loader_alone(w, part).rate for w in PROBED_WORKERS]
    features = ProbeFeatures(
        ceiling=ceiling.rate,
        prep_rate_0=rates[0],
        prep_rate_1=rates[1],
        prep_rate_2=rates[2],
        fetch_extra_s=fetch.extra_s,
        batch_size=job.batch_size,
        cores=hardware.logical_cores,
        device_kind=device.kind,
    )
    return ProbeResult(features=features, seconds=time.perf_counter() - start, part_budget_s=part)
