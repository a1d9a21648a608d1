"""``even`` and ``proportional`` are what they say: the worker cores split evenly (per job, per GPU), deterministically, within bounds."""

from hypothesis import given, settings
from hypothesis import strategies as st

from adlrec.allocate import even, proportional
from adlrec.schemas import AllocationRequest, JobDemand


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 8), st.integers(0, 40))
def test_unbounded_split_is_budget_over_jobs_remainder_first(n, budget):
    jobs = tuple(JobDemand(f"j{i}", tuple(float(w) for w in range(41))) for i in range(n))
    plan = even(AllocationRequest(cores=budget + n, memory_mb=0, jobs=jobs))
    assert [plan.workers[j.job_id] for j in jobs] == [budget // n + (1 if i < budget % n else 0) for i in range(n)]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), min_size=1, max_size=6), st.integers(0, 20))
def test_bounded_split_is_water_filling(bounds, extra):
    jobs = tuple(
        JobDemand(f"j{i}", tuple(float(w) for w in range(lo + span + 1)), min_workers=lo, max_workers=lo + span)
        for i, (lo, span) in enumerate(bounds)
    )
    budget = sum(lo for lo, _ in bounds) + extra
    plan = even(AllocationRequest(cores=budget + len(jobs), memory_mb=0, jobs=jobs))
    w = [plan.workers[j.job_id] for j in jobs]
    assert sum(w) == min(budget, sum(j.hi for j in jobs))  # it spends every core a job can take
    for i, a in enumerate(jobs):
        for k, b in enumerate(jobs):
            if w[k] > b.min_workers and w[k] > w[i] + 1:
                assert w[i] == a.hi  # only a job at its cap may sit more than one below another


def test_even_ignores_curves():
    a = JobDemand("a", (0.0, 100.0, 100.0, 100.0))
    b = JobDemand("b", (0.0, 1.0, 2.0, 3.0))
    assert even(AllocationRequest(cores=6, memory_mb=0, jobs=(a, b))).workers == {"a": 2, "b": 2}


def test_a_job_whose_worker_does_not_fit_memory_is_skipped():
    a = JobDemand("a", (0.0, 1.0, 2.0, 3.0), mem_per_worker_mb=500)
    b = JobDemand("b", (0.0, 1.0, 2.0, 3.0), mem_per_worker_mb=100)
    plan = even(AllocationRequest(cores=8, memory_mb=600, jobs=(a, b)))
    assert plan.workers == {"a": 1, "b": 1}  # a second worker for a would need 1000 + 100 MB


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=6), st.integers(0, 12))
def test_proportional_gives_the_same_workers_per_gpu(gpus, per_gpu):
    jobs = tuple(JobDemand(f"j{i}", tuple(float(w) for w in range(60)), gpus=g) for i, g in enumerate(gpus))
    plan = proportional(AllocationRequest(cores=per_gpu * sum(gpus) + len(jobs), memory_mb=0, jobs=jobs))
    assert [plan.workers[j.job_id] for j in jobs] == [per_gpu * g for g in gpus]


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 4), st.integers(0, 3), st.integers(0, 8)), min_size=1, max_size=6),
    st.integers(0, 30),
)
def test_proportional_is_water_filling_by_workers_per_gpu(specs, extra):
    jobs = tuple(
        JobDemand(f"j{i}", tuple(float(w) for w in range(lo + span + 1)), gpus=g, min_workers=lo, max_workers=lo + span)
        for i, (g, lo, span) in enumerate(specs)
    )
    budget = sum(j.min_workers for j in jobs) + extra
    plan = proportional(AllocationRequest(cores=budget + len(jobs), memory_mb=0, jobs=jobs))
    w = [plan.workers[j.job_id] for j in jobs]
    assert sum(w) == min(budget, sum(j.hi for j in jobs))
    per = [max(1, j.gpus) for j in jobs]
    for i, a in enumerate(jobs):
        for k, b in enumerate(jobs):
            # k's last core went to it while its share was the lowest, so i is not below it unless capped
            if w[k] > b.min_workers and w[i] * per[k] < (w[k] - 1) * per[i]:
                assert w[i] == a.hi


def test_a_job_whose_worker_does_not_fit_memory_does_not_stop_the_others():
    # a 1 (500 MB), b 1 (100 MB); a's second would need 500 of the 100 left, b's second fits
    a = JobDemand("a", (0.0, 1.0, 2.0, 3.0), mem_per_worker_mb=500)
    b = JobDemand("b", (0.0, 1.0, 2.0, 3.0), mem_per_worker_mb=100)
    assert even(AllocationRequest(cores=8, memory_mb=700, jobs=(a, b))).workers == {"a": 1, "b": 2}


def test_even_ignores_gpus():
    # a job on 4 GPUs and a job on 1 split the cores evenly (proportional would give 4 to 1)
    a = JobDemand("a", tuple(float(w) for w in range(9)), gpus=4)
    b = JobDemand("b", tuple(float(w) for w in range(9)), gpus=1)
    assert even(AllocationRequest(cores=2 + 6, memory_mb=0, jobs=(a, b))).workers == {"a": 3, "b": 3}


def test_a_tie_goes_to_the_earlier_job_whichever_got_its_share_first():
    # b starts at its minimum of 1; a's first worker brings it level with b, and the tie for the next core goes
    # to a, the earlier job, not to the one that has waited longer in the queue
    a = JobDemand("a", tuple(float(w) for w in range(9)))
    b = JobDemand("b", tuple(float(w) for w in range(9)), min_workers=1)
    for policy in (even, proportional):
        assert policy(AllocationRequest(cores=2 + 3, memory_mb=0, jobs=(a, b))).workers == {"a": 2, "b": 1}
