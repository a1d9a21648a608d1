"""Allocation policies compared on paper-like traces: prints tables, asserts nothing.

    python bench/policies.py [--seeds 1 2 3 4 5] [--jobs 40] [--profiles profiles]

The workload (ours: the seed publishes none), fixed before any result was seen:
  node      8 GPUs, 32 cores, 256 GB for loader workers
  trace     `adlrec trace generate` defaults: 40 jobs, Poisson arrivals at offered GPU load 1.0,
            10-120 min at full speed (log-uniform), 60/25/15% on 1/2/4 GPUs, num_workers=8 per rank,
            curves drawn uniformly from the accelerator profiles in profiles/ and extended to the
            node by the pipeline model (curves derived from measured profile parameters)
  replay    re-decide at arrivals, completions and every 60 s; resize 0.5 s; threshold 0.05;
            objective busy GPUs; contention model "all", main-cpu 1 (docs/simulate.md)
`proportional` splits the cores by GPUs (Synergy's baseline); `optimal` against it is printed too.
Each table also shows `bound`: the same trace with cores enough for every job to run at its peak,
which no allocation of the real node can beat (the headroom over even).
Then the same traces under other assumptions (fewer cores per GPU, the "busy" contention model, a
main process that never slows, a multi-GPU job's ranks stepping together as synchronous data-parallel
training does: `--ranks lockstep`), so it shows which assumption gives which figure.

Between the two, a second workload that is not ours (skipped if profiles/published/synergy.json is absent):
  curves    Synergy's published CPU-sensitivity tables, measured on GPU servers (profiles/published/
            synergy.json: 10 models, image/language/speech drawn 34/33/33% as in Synergy's simulator)
  node      Synergy's server: 8 GPUs, 24 cores; the trace otherwise as above
and a third, ours again but narrower (skipped if profiles/ holds no cuda profile):
  curves    only the profiles measured with a real training step on a GPU (device cuda)
  node      8 GPUs with 32 cores, then 16; the trace otherwise as above
"""

from __future__ import annotations

import statistics
import sys
from dataclasses import replace
from pathlib import Path

from _args import at_least, interruptible, parser
from rich.console import Console
from rich.table import Table

from adlrec.allocate import POLICIES
from adlrec.simulate import (
    Node,
    PolicyRun,
    SimConfig,
    TraceSpec,
    build_jobs,
    compare_policies,
    comparison_rows,
    comparison_table,
    generate_trace,
    profile_catalog,
    profile_files,
    simulate,
)
from adlrec.simulate.contention import saturation_workers
from adlrec.simulate.curves import pipeline_params
from adlrec.simulate.generate import trace_profiles
from adlrec.simulate.published import load_published

ORDER = ["even", "proportional", "fixed", "greedy", "maxmin", "optimal"]
BETTER = {"throughput_vs_base_pct": max, "makespan_vs_base_pct": max, "mean_jct_s": min}


def workers_to_ceiling(files) -> str:
    """How heavy the profiles' loaders are: workers per GPU each needs to reach its compute ceiling."""
    need = sorted(p.ceiling / p.worker_rate for p in (pipeline_params(prof) for _, prof in files))
    return (
        f"loader workers per GPU to reach the compute ceiling (C / p): median {statistics.median(need):.1f}, "
        f"range {need[0]:.1f}..{need[-1]:.1f} over {len(need)} profiles"
    )


def run(seeds, jobs, files, catalog, node, config, draw_node=None, lockstep=False, **spec):
    """Comparison rows per seed (the trace is drawn for ``draw_node``, the 32-core node, and replayed on ``node``).

    Each seed also gets a ``bound`` row: the same trace on the same GPUs with cores enough for every
    job to run at its peak at once, so no allocation can do better (busy GPUs per held GPU is 1).
    """
    out = {}
    for seed in seeds:
        rows = generate_trace(files, draw_node or Node(), TraceSpec(jobs=jobs, seed=seed, **spec))
        trace = build_jobs(rows, catalog, node, lockstep=lockstep)
        runs = compare_policies(trace, {n: POLICIES[n] for n in ORDER}, node, config)
        roomy = replace(node, cores=sum(saturation_workers(j.curve) + j.main_cores for j in trace))
        # the jobs as on the real node: curves rebuilt for the roomy node would go on past its cores, so a
        # heavy loader's peak (what its busy GPU-time is measured against) would not be the one the other
        # rows are measured against, and its saturation would not be the cores counted above
        bound = simulate(trace, POLICIES["optimal"], roomy, config, name="bound")
        out[seed] = comparison_rows([*runs, PolicyRun(bound, 0.0)])
    return out


def headroom(per_seed) -> str:
    """How much of the gap between ``even`` and ``bound`` that ``optimal`` closes, per seed."""

    def share(get, key):
        room = get["bound"][key]
        return f"{get['optimal'][key] / room:.0%}" if room > 0 else "-"

    parts = []
    for seed, rows in per_seed.items():
        get = {r["policy"]: r for r in rows}
        parts.append(
            f"seed {seed}: throughput {share(get, 'throughput_vs_base_pct')}, "
            f"makespan {share(get, 'makespan_vs_base_pct')}"
        )
    return "share of the even-to-bound gap that optimal closes: " + "; ".join(parts)


def versus(per_seed, policy: str = "optimal", base: str = "proportional") -> str:
    """``policy`` against another baseline than even, per seed and on average."""
    thr, mk = [], []
    for rows in per_seed.values():
        get = {r["policy"]: r for r in rows}
        thr.append(100 * (get[policy]["aggregate_throughput"] / get[base]["aggregate_throughput"] - 1))
        mk.append(100 * (1 - get[policy]["makespan_s"] / get[base]["makespan_s"]))
    return (
        f"{policy} vs {base}: throughput {statistics.mean(thr):+.1f}% ({min(thr):+.1f}..{max(thr):+.1f}), "
        f"makespan {statistics.mean(mk):+.1f}% ({min(mk):+.1f}..{max(mk):+.1f})"
    )


def summary(title, per_seed):
    table = Table(title=title, title_justify="left")
    for col in (
        "policy",
        "thr. vs even (mean, min..max)",
        "makespan vs even (mean, min..max)",
        "mean JCT",
        "busy GPUs",
        "resizes",
        "decisions/s (median)",
    ):
        table.add_column(col, justify="left" if col == "policy" else "right")
    for name in [*ORDER, "bound"]:
        rows = [next(r for r in seed_rows if r["policy"] == name) for seed_rows in per_seed.values()]
        thr = [r["throughput_vs_base_pct"] for r in rows]
        mk = [r["makespan_vs_base_pct"] for r in rows]
        table.add_row(
            name,
            f"{statistics.mean(thr):+.1f}% ({min(thr):+.1f}..{max(thr):+.1f})",
            f"{statistics.mean(mk):+.1f}% ({min(mk):+.1f}..{max(mk):+.1f})",
            f"{statistics.mean(r['mean_jct_s'] for r in rows) / 3600:.2f} h",
            f"{statistics.mean(r['busy_gpu_fraction'] for r in rows):.1%}",
            f"{statistics.mean(r['resizes'] for r in rows):.0f}",
            f"{statistics.median(r['decisions_per_s'] for r in rows):,.0f}" if name != "bound" else "-",
        )
    return table


def optimal_is_best(per_seed):
    """Where ``optimal`` is not at least as good as every other policy (0.1% slack for float noise)."""
    misses = []
    for seed, rows in per_seed.items():
        rows = [r for r in rows if r["policy"] != "bound"]
        opt = next(r for r in rows if r["policy"] == "optimal")
        for key, better in BETTER.items():
            best = better(r[key] for r in rows)
            slack = 0.1 if key != "mean_jct_s" else 1e-3 * best
            if (better is max and opt[key] < best - slack) or (better is min and opt[key] > best + slack):
                who = next(r["policy"] for r in rows if r[key] == best)
                misses.append(f"seed {seed}: {key} {opt[key]:.4g} vs {who} {best:.4g}")
    return misses


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--profiles", type=Path, default=Path("profiles"))
    args = ap.parse_args()
    at_least(ap, args, jobs=1)
    if not args.profiles.is_dir():  # it said 'no accelerator profiles in X/', on stdout, as if X were empty
        ap.error(f"--profiles {args.profiles}: no such folder")
    console = Console(width=150)
    files, catalog = profile_files(args.profiles), profile_catalog(args.profiles)
    names = [n for n, _ in trace_profiles(files)]
    if not names:
        console.print(f"no accelerator profiles in {args.profiles}/: nothing to simulate")
        return 1
    console.print(f"profiles drawn: {', '.join(names)} (curves derived from measured profile parameters)")
    console.print(workers_to_ceiling(trace_profiles(files)))
    base = SimConfig()
    node = Node()
    main_runs = run(args.seeds, args.jobs, files, catalog, node, base)
    for seed, rows in main_runs.items():
        console.print(comparison_table(rows, f"seed {seed}: 8 GPUs, 32 cores, {args.jobs} jobs"))
    title = f"summary over seeds {args.seeds}: 8 GPUs, 32 cores (the workload above)"
    console.print(summary(title, main_runs))
    console.print(headroom(main_runs))
    console.print(versus(main_runs))
    misses = optimal_is_best(main_runs)
    console.print(
        "optimal at least as good as every policy on every trace (throughput, makespan, mean JCT): "
        + ("yes" if not misses else "no: " + "; ".join(misses))
    )

    published = args.profiles / "published" / "synergy.json"
    if published.is_file():
        models = load_published(published)
        need = sorted(m.workers_to_peak() for _, m in models)
        console.print(
            f"published workload: {len(models)} models from {published}; loader workers per GPU to reach the "
            f"peak: median {statistics.median(need):.1f}, range {need[0]}..{need[-1]}"
        )
        server = Node(cores=24)
        per_seed = run(args.seeds, args.jobs, models, catalog, server, base, draw_node=server)
        console.print(summary(f"summary over seeds {args.seeds}: Synergy's curves, 8 GPUs, 24 cores", per_seed))
        console.print(headroom(per_seed))
        console.print(versus(per_seed))
        misses = optimal_is_best(per_seed)
        console.print("optimal best on every trace: " + ("yes" if not misses else "no: " + "; ".join(misses)))

    gpu_files = [(name, prof) for name, prof in files if prof.device.kind == "cuda"]
    if gpu_files:
        console.print(
            f"GPU-measured workload: the trace drawn from the {len(gpu_files)} profiles measured with a real "
            f"training step on a GPU ({', '.join(n for n, _ in gpu_files)}); {workers_to_ceiling(gpu_files)}"
        )
        for cores in (32, 16):
            per_seed = run(args.seeds, args.jobs, gpu_files, catalog, replace(node, cores=cores), base)
            console.print(
                summary(f"summary over seeds {args.seeds}: GPU-measured curves, 8 GPUs, {cores} cores", per_seed)
            )
            console.print(headroom(per_seed))
            console.print(versus(per_seed))
            misses = optimal_is_best(per_seed)
            console.print("optimal best on every trace: " + ("yes" if not misses else "no: " + "; ".join(misses)))

    variants = [
        ("same traces, 24 cores (3 per GPU)", replace(node, cores=24), base, {}),
        ("same traces, 16 cores (2 per GPU)", replace(node, cores=16), base, {}),
        ("same traces, 32 cores, contention model busy", node, replace(base, contention="busy"), {}),
        ("same traces, 32 cores, main process never slows (main-cpu 0)", node, replace(base, main_cpu=0.0), {}),
        ("same traces, 32 cores, no hysteresis (threshold 0)", node, replace(base, threshold=0.0), {}),
        ("same seeds, every job on 1 GPU, 32 cores", node, base, {"gpu_mix": ((1, 1.0),)}),
        ("same traces, 32 cores, ranks in lockstep (synchronous data-parallel)", node, base, {"lockstep": True}),
    ]
    for title, n, cfg, spec in variants:
        per_seed = run(args.seeds, args.jobs, files, catalog, n, cfg, **spec)
        console.print(summary(title, per_seed))
        console.print(headroom(per_seed))
        console.print(versus(per_seed))
        misses = optimal_is_best(per_seed)
        console.print("optimal best on every trace: " + ("yes" if not misses else "no: " + "; ".join(misses)))
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
