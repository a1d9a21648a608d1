"""A seeded generator of job traces whose curves come from measured profiles (or a published table).

Ours (the seed publishes no workload).  For each job, drawn with ``random.Random(seed)``:

* a profile, uniformly among the folder's accelerator profiles (``cuda`` or emulated; a
  ``--device cpu`` curve measures training on the same cores, not a GPU job);
* its GPUs from ``gpu_mix`` (default 60% one GPU, 25% two, 15% four, as in Philly-style traces);
* its length at full speed, log-uniform between ``min_minutes`` and ``max_minutes``; its work is
  that length times the job's peak samples/s on the node;
* its arrival: the first at 0, then exponential gaps whose mean makes the offered GPU load
  (GPU-seconds of work at full speed per second) ``load`` times the node's GPUs;
* ``num_workers`` per rank, the same for every job (8: what tutorials set).

Curves are not stored in the trace: the simulator derives each from the named profile for the node
it simulates (see :mod:`adlrec.simulate.curves`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from adlrec.schemas import Profile
from adlrec.simulate.curves import job_curve
from adlrec.simulate.published import PublishedRank
from adlrec.simulate.records import Node
from adlrec.simulate.trace import Curves, TraceRow, rank_model

__all__ = ["TraceSpec", "generate_trace", "trace_profiles"]


@dataclass(frozen=True)
class TraceSpec:
    """What to generate."""

    jobs: int = 40  # number of jobs
    seed: int = 1  # the only source of randomness
    load: float = 1.0  # offered GPU load: full-speed GPU-seconds submitted per second / node GPUs
    gpu_mix: tuple[tuple[int, float], ...] = ((1, 0.6), (2, 0.25), (4, 0.15))  # (GPUs, probability)
    min_minutes: float = 10.0  # shortest job at full speed
    max_minutes: float = 120.0  # longest job at full speed
    num_workers: int = 8  # per rank, what every job's script asks for
    include_cpu: bool = False  # also draw --device cpu profiles

    def __post_init__(self) -> None:
        if self.jobs < 1 or not self.load > 0 or not 0 < self.min_minutes <= self.max_minutes:
            raise ValueError("need jobs >= 1, load > 0 and 0 < min_minutes <= max_minutes")
        if not self.gpu_mix or any(g < 1 or p < 0 for g, p in self.gpu_mix) or sum(p for _, p in self.gpu_mix) <= 0:
            raise ValueError("gpu_mix needs (gpus >= 1, probability >= 0) pairs with a positive total")


def trace_profiles(files: Sequence[tuple[str, Curves]], include_cpu: bool = False) -> list[tuple[str, Curves]]:
    """The profiles a trace may draw, by name (``profile_files``: the file stem), sorted."""
    return sorted(
        ((name, p) for name, p in files if include_cpu or not isinstance(p, Profile) or p.device.kind != "cpu"),
        key=lambda item: item[0],
    )


def generate_trace(files: Sequence[tuple[str, Curves]], node: Node, spec: TraceSpec) -> list[TraceRow]:
    """Draw ``spec.jobs`` jobs for ``node`` from named curves; the same inputs give the same trace.

    Measured profiles are drawn uniformly; a published table's models by their ``share`` (its task
    shares split evenly over each task's models)."""
    profiles = trace_profiles(files, spec.include_cpu)
    if not profiles:
        raise ValueError("no profiles to draw from" + ("" if spec.include_cpu else " (accelerator profiles only)"))
    mix = [(min(g, node.gpus), p) for g, p in spec.gpu_mix]
    total = sum(p for _, p in mix)
    mean_gpus = sum(g * p for g, p in mix) / total
    a, b = spec.min_minutes * 60, spec.max_minutes * 60
    mean_len = a if a == b else (b - a) / math.log(b / a)
    gap = mean_gpus * mean_len / (spec.load * node.gpus)
    shares = [p.share if isinstance(p, PublishedRank) else 1.0 for _, p in profiles]
    rng = random.Random(spec.seed)
    rows, t = [], 0.0
    for i in range(spec.jobs):
        if len(set(shares)) == 1:  # uniform: one randrange, so traces drawn before shares existed stay the same
            name, profile = profiles[rng.randrange(len(profiles))]
        else:
            name, profile = rng.choices(profiles, weights=shares)[0]
        gpus = rng.choices([g for g, _ in mix], weights=[p for _, p in mix])[0]
        length = math.exp(rng.uniform(math.log(a), math.log(b)))
        peak = max(job_curve(rank_model(profile), gpus, node.cores))
        if i:
            t += rng.expovariate(1.0 / gap)
        work = max(1, round(length * peak))  # a job of a few milliseconds still has a sample to train on
        rows.append(TraceRow(f"job{i:03d}", round(t, 1), work, name, gpus, spec.num_workers))
    return rows
