"""How long ``optimal`` takes at node and cluster scale: prints medians, asserts nothing.

    python bench/allocate_scale.py [--repeats 7]

Instances (curves like the simulator's: in-process rate at 0 workers, then min(C, p * w), drawn with a
fixed seed over the ranges the shipped profiles span; 1-2 GPUs per job, one main core per GPU):
  node      64 jobs on one node of 128 cores (goal < 50 ms), memory loose, then binding
  cluster   1,000 jobs on 16 nodes of 128 cores (62-63 jobs each), one request per node (goal < 1 s)
Placement of jobs on nodes is not the allocator's job; each node is solved on its own.
"""

from __future__ import annotations

import random
import statistics
import sys
import time

from _args import at_least, interruptible, parser
from rich.console import Console
from rich.table import Table

from adlrec.allocate import POLICIES
from adlrec.allocate.optimal import max_memory_use
from adlrec.schemas import AllocationRequest, JobDemand
from adlrec.simulate.curves import PipelineParams, job_curve


def jobs_for(rng: random.Random, n: int, cores: int, prefix: str) -> tuple[JobDemand, ...]:
    out = []
    for i in range(n):
        params = PipelineParams(
            ceiling=rng.uniform(500, 4000),
            serial_rate=rng.uniform(500, 3000),
            worker_rate=rng.uniform(150, 2500),
            mem_per_worker_mb=100 * rng.randint(2, 20),
        )
        gpus = rng.choice([1, 1, 2])
        out.append(
            JobDemand(
                job_id=f"{prefix}{i}",
                curve=job_curve(params, gpus, cores),
                gpus=gpus,
                mem_per_worker_mb=params.mem_per_worker_mb,
                current_workers=rng.randint(0, 4),
                main_cores=1,
            )
        )
    return tuple(out)


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1e3 * statistics.median(times)


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    at_least(ap, args, repeats=1)
    rng = random.Random(0)
    node_jobs = jobs_for(rng, 64, 128, "j")
    loose = AllocationRequest(cores=128, memory_mb=512 * 1024, jobs=node_jobs, threshold=0.05)
    tight_mb = max_memory_use(loose) // 2
    tight = AllocationRequest(cores=128, memory_mb=tight_mb, jobs=node_jobs, threshold=0.05)
    cluster = []
    for k in range(16):
        n = 1000 // 16 + (1 if k < 1000 % 16 else 0)
        cluster.append(
            AllocationRequest(cores=128, memory_mb=512 * 1024, jobs=jobs_for(rng, n, 128, f"n{k}j"), threshold=0.05)
        )
    assert sum(len(r.jobs) for r in cluster) == 1000

    table = Table(title=f"allocation time, median of {args.repeats} runs", title_justify="left")
    for col in ("instance", "policy", "median", "goal"):
        table.add_column(col, justify="left" if col in ("instance", "policy") else "right")
    cases = [
        ("64 jobs x 128 cores, memory loose", loose, "50 ms"),
        (f"64 jobs x 128 cores, memory binding ({tight_mb} MB)", tight, "50 ms"),
    ]
    for label, req, goal in cases:
        for name in ("optimal", "greedy", "even"):
            ms = median_ms(lambda req=req, name=name: POLICIES[name](req), args.repeats)
            table.add_row(label, name, f"{ms:.1f} ms", goal if name == "optimal" else "")
    for name in ("optimal", "greedy", "even"):
        ms = median_ms(lambda name=name: [POLICIES[name](r) for r in cluster], args.repeats)
        table.add_row(
            "1,000 jobs on 16 nodes x 128 cores", name, f"{ms:.1f} ms", "1,000 ms" if name == "optimal" else ""
        )
    Console(width=150).print(table)
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
