"""``optimal``: the exact integer optimum, by dynamic programming over cores.

Maximises ``sum_j v_j(w_j)`` subject to ``sum_j w_j <= B`` (the worker cores: node cores minus every
job's main processes), ``sum_j w_j * m_j <= M`` (memory) and ``min_j <= w_j <= max_j``, where ``v_j`` is
the objective value minus the hysteresis switching cost wherever ``w_j != current_j``.  Nothing is
assumed about the curves' shape, so it is correct for non-concave curves, where ``greedy`` is not.

Cores: ``best[c]`` is the highest value the jobs seen so far reach with exactly ``c`` worker cores;
adding job ``j`` is a (max, +) convolution with ``v_j``, vectorised with numpy.  O(jobs x cores x
max_workers) time.

Memory is exact too, and only paid for when it can bind: memory is accounted in whole MB (the
request's fields are integers), so with ``g`` the greatest common divisor of the jobs' per-worker
memory, every usage is a multiple of ``g`` and a second DP dimension over ``floor(M / g) + 1`` memory
cells loses nothing.  That dimension is added only when the largest memory any core-feasible plan
could use (the ``B`` workers placed on the most memory-hungry jobs) exceeds ``M``; then the cost is
O(jobs x cores x max_workers x M / g) time and one (cores x M / g) table per job of memory, from which
the choices are recovered by recomputing each stage's sum.  Per-worker memory in round units (e.g.
multiples of 100 MB) keeps ``M / g`` small; a ``g`` of 1 MB on a node with hundreds of GB does not.
When the tables would pass :data:`MEMORY_CELLS` cells, memory is counted in the coarser step that
fits, each job's per-worker memory rounded up to it: the plan still fits the budget, and it is the
optimum of that slightly stricter problem (the plan's reason says so).

Worker counts that are worth no more than some smaller count are skipped (they use more of both
resources for no more value), which keeps the optimum exact and, once curves saturate, leaves few
counts per job.  Among plans of equal value it returns the one with the fewest workers (and, when
memory is a DP dimension, then the least memory).
"""

from __future__ import annotations

import math

import numpy as np

from adlrec.allocate.common import build_plan, check_feasible, penalised_values
from adlrec.schemas import AllocationPlan, AllocationRequest

__all__ = ["MEMORY_CELLS", "max_memory_use", "memory_unit", "optimal"]

_NEG = -np.inf
# The memory DP keeps one (cores x memory cells) table per job; past this many cells in all (64 MB of
# float64) memory is counted in coarser steps, per-worker memory rounded up: the plan still fits.
MEMORY_CELLS = 2**23


def max_memory_use(request: AllocationRequest) -> int:
    """The most memory a plan within the core budget and per-job bounds could use.

    Exact for jobs of one rank; for a job of several it counts single workers as if it could take
    them, so it may overstate (never understate) the most: the memory DP is then run when it was not
    needed, never skipped when it was.
    """
    jobs = request.jobs
    used = sum(j.min_workers * j.mem_per_worker_mb for j in jobs)
    free = request.worker_cores - sum(j.min_workers for j in jobs)
    for j in sorted(jobs, key=lambda j: -j.mem_per_worker_mb):
        take = min(free, j.hi - j.min_workers)
        used += take * j.mem_per_worker_mb
        free -= take
    return used


def optimal(request: AllocationRequest) -> AllocationPlan:
    check_feasible(request)
    jobs = request.jobs
    if not jobs:
        return build_plan(request, "optimal", [])
    values = [np.asarray(penalised_values(j, request), dtype=float) for j in jobs]
    if max_memory_use(request) > request.memory_mb:
        unit = memory_unit(request)
        workers = _dp_cores_memory(request, values, unit)
        exact = all(j.mem_per_worker_mb % unit == 0 for j in jobs)
        note = (
            "exact optimum (DP over cores and memory)"
            if exact
            else f"optimum with memory counted in {unit} MB steps, per-worker memory rounded up (DP over cores and memory)"
        )
    else:
        workers = _dp_cores(request, values)
        note = "exact optimum (DP over cores)"
    return build_plan(request, "optimal", workers, [note] * len(jobs))


def _useful(job, v: np.ndarray, budget: int) -> np.ndarray:
    """Worker counts worth considering: ``min_workers`` and each count worth strictly more than all fewer
    (for a job of several ranks, ``min_workers`` plus multiples of its ranks).

    A count whose value does not beat some smaller count's is dominated (more cores and memory, no more
    value), so dropping it keeps the optimum exact; it leaves few counts once a curve saturates.
    """
    # a job of several ranks: multiples of them only (a worker past one is a core no rank uses)
    ws = np.arange(job.min_workers, min(job.hi, budget) + 1, job.ranks)
    if ws.size == 0:
        return ws
    vals = v[ws]
    before = np.maximum.accumulate(np.concatenate(([-np.inf], vals[:-1])))
    keep = vals > before
    keep[0] = True
    return ws[keep]


def _tol(best: float) -> float:
    return 1e-9 * max(1.0, abs(best))


def _dp_cores(request: AllocationRequest, values: list[np.ndarray]) -> list[int]:
    budget = request.worker_cores
    c = np.arange(budget + 1)
    best = np.full(budget + 1, _NEG)
    best[0] = 0.0
    choices = []
    for j, v in zip(request.jobs, values, strict=True):
        ws = _useful(j, v, budget)
        prev = c[:, None] - ws[None, :]  # cores used before this job, for each (c, w)
        cand = np.where(prev >= 0, best[np.clip(prev, 0, None)], _NEG) + v[ws][None, :]
        arg = np.argmax(cand, axis=1)  # first maximum: the fewest workers on ties
        best = cand[c, arg]
        choices.append(ws[arg])
    top = best.max()
    cell = int(np.argmax(best >= top - _tol(top)))  # fewest cores among the optimal plans
    workers = [0] * len(request.jobs)
    for i in range(len(request.jobs) - 1, -1, -1):
        workers[i] = int(choices[i][cell])
        cell -= workers[i]
    return workers


def memory_unit(request: AllocationRequest) -> int:
    """The MB per memory cell of the DP: the gcd of the jobs' per-worker memory (exact), or coarser when
    the tables would exceed :data:`MEMORY_CELLS`."""
    jobs = request.jobs
    unit = math.gcd(*(j.mem_per_worker_mb for j in jobs)) or 1  # every usage is a multiple of this
    per_table = MEMORY_CELLS // ((len(jobs) + 1) * (request.worker_cores + 1))  # cells of memory per table
    return max(unit, math.ceil(_spare_memory(request) / max(1, per_table - 1)))


def _spare_memory(request: AllocationRequest) -> int:
    """Memory left once every job has its minimum workers (check_feasible: >= 0)."""
    return request.memory_mb - sum(j.min_workers * j.mem_per_worker_mb for j in request.jobs)


def _dp_cores_memory(request: AllocationRequest, values: list[np.ndarray], unit: int) -> list[int]:
    """The DP over cores and the memory beyond the jobs' minimum workers, in cells of ``unit`` MB.

    A job's workers past its minimum cost ``ceil(extra MB / unit)`` cells (exact when ``unit`` divides its
    per-worker memory); the minimums are paid in MB up front, so rounding never refuses them.
    """
    jobs = request.jobs
    budget = request.worker_cores
    cells = _spare_memory(request) // unit

    def cost(job, w: int) -> int:  # rounded up: a plan that fits these cells fits in MB
        return -(-(w - job.min_workers) * job.mem_per_worker_mb // unit)

    best = np.full((budget + 1, cells + 1), _NEG)
    best[0, 0] = 0.0
    reach_c = reach_k = 0  # the jobs so far use at most this many cores and memory cells
    stages = [best]  # the table before each job, to recover the choices afterwards
    options = []
    for j, v in zip(jobs, values, strict=True):
        new = np.full_like(best, _NEG)
        ws = [w for w in _useful(j, v, budget).tolist() if cost(j, w) <= cells]  # min_workers costs 0: never empty
        for w in ws:
            dm = cost(j, w)
            rows, cols = min(reach_c, budget - w) + 1, min(reach_k, cells - dm) + 1
            dst = new[w : w + rows, dm : dm + cols]
            np.maximum(dst, best[:rows, :cols] + v[w], out=dst)
        reach_c = min(budget, reach_c + ws[-1])
        reach_k = min(cells, reach_k + cost(j, ws[-1]))
        best = new
        stages.append(best)
        options.append(ws)
    top = best.max()
    ok = np.argwhere(best >= top - _tol(top))  # row-major: fewest cores, then least memory
    c, k = (int(x) for x in ok[0])
    workers = [0] * len(jobs)
    for i in range(len(jobs) - 1, -1, -1):
        # the fewest workers that reproduce this cell's value (the same float sum, so equality is exact)
        target, prev, v, j = stages[i + 1][c, k], stages[i], values[i], jobs[i]
        workers[i] = next(
            w for w in options[i] if w <= c and cost(j, w) <= k and prev[c - w, k - cost(j, w)] + v[w] == target
        )
        c -= workers[i]
        k -= cost(j, workers[i])
    return workers
