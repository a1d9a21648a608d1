"""Hypothesis strategies for small, always-feasible allocation requests (non-concave curves included, and jobs
of several ranks: their minimum and requested totals multiples of the ranks, their curves and maximum any)."""

from __future__ import annotations

from hypothesis import strategies as st

from adlrec.schemas import OBJECTIVES, AllocationRequest, JobDemand


@st.composite
def jobs(draw, index: int, max_len: int = 6) -> JobDemand:
    # integer-valued curves: arbitrary shapes (dips, plateaus, late jumps) and exact ties
    curve = tuple(float(x) for x in draw(st.lists(st.integers(0, 40), min_size=1, max_size=max_len)))
    top = len(curve) - 1
    ranks = draw(st.sampled_from([1, 1, 1, 2, 3]))
    lo = ranks * draw(st.integers(0, min(2, top) // ranks))
    hi = draw(st.one_of(st.none(), st.integers(lo, top)))
    return JobDemand(
        job_id=f"j{index}",
        curve=curve,
        gpus=draw(st.integers(0, 3)),
        weight=float(draw(st.integers(0, 3))),
        min_workers=lo,
        max_workers=hi,
        mem_per_worker_mb=draw(st.sampled_from([0, 1, 2, 3, 4, 6])),
        current_workers=draw(st.one_of(st.none(), st.integers(0, top))),
        requested_workers=ranks * draw(st.integers(0, 10 // ranks)),
        main_cores=draw(st.integers(0, 2)),
        ranks=ranks,
    )


@st.composite
def requests(draw, max_jobs: int = 4, max_len: int = 6) -> AllocationRequest:
    n = draw(st.integers(0, max_jobs))
    js = tuple(draw(jobs(i, max_len)) for i in range(n))
    cores = sum(j.main_cores + j.min_workers for j in js) + draw(st.integers(0, 10))
    memory = sum(j.min_workers * j.mem_per_worker_mb for j in js) + draw(st.integers(0, 24))
    return AllocationRequest(
        cores=cores,
        memory_mb=memory,
        jobs=js,
        objective=draw(st.sampled_from(OBJECTIVES)),
        threshold=draw(st.sampled_from([0.0, 0.05, 0.3])),
    )
