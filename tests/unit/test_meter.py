"""The measuring loop, driven by an injected clock: exact, deterministic figures."""

import itertools
import multiprocessing
import time

import psutil
import pytest

from adlrec.errors import JobContractError
from adlrec.profile.meter import EndlessSampler, describe_error, measure, worker_init
from adlrec.profile.steady import estimate_rate


class FakeClock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def advance(self, dt: float) -> None:
        self.t += dt


def source(clock: FakeClock, fetch_s: float):
    for i in itertools.count():
        clock.advance(fetch_s)
        yield i


def run(clock, fetch_s, step_s, **kw):
    args = dict(batch_size=10, budget_s=5.0, rse_target=0.05, min_batches=20, warmup_s=0.1, warmup_batches=3)
    return measure(source(clock, fetch_s), lambda b: clock.advance(step_s), clock=clock, **(args | kw))


def test_steady_rate_and_wait_share_come_out_exact():
    clock = FakeClock()
    m = run(clock, fetch_s=0.01, step_s=0.03)
    assert m.rate == pytest.approx(10 / 0.04)
    assert m.wait_fraction == pytest.approx(0.25)
    assert m.stable and m.batches == 20  # stops as soon as it is stable with enough batches
    assert m.rse == pytest.approx(0.0, abs=1e-9)


def test_budget_stops_an_unstable_measurement():
    clock = FakeClock()
    durations = itertools.cycle([0.01, 0.5, 0.02, 0.9, 0.05])
    m = measure(
        itertools.count(),
        lambda b: clock.advance(next(durations)),
        clock=clock,
        batch_size=1,
        budget_s=3.0,
        rse_target=0.0001,
        min_batches=5,
        warmup_s=0.0,
        warmup_batches=0,
    )
    assert not m.stable
    assert 3.0 <= m.seconds < 4.0


def test_errors_in_the_source_or_step_become_one_line_contract_errors():
    def bad_source():
        yield 1
        raise ValueError("corrupt file 17.png\nmore detail")

    with pytest.raises(JobContractError, match="the dataset raised ValueError: corrupt file 17.png$"):
        measure(
            bad_source(),
            lambda b: None,
            batch_size=1,
            budget_s=1,
            rse_target=0.05,
            min_batches=2,
            warmup_s=0,
            warmup_batches=0,
        )

    def bad_step(b):
        raise RuntimeError("shape mismatch")

    with pytest.raises(JobContractError, match="the training step raised RuntimeError: shape mismatch"):
        measure(
            iter([1, 2]),
            bad_step,
            batch_size=1,
            budget_s=1,
            rse_target=0.05,
            min_batches=2,
            warmup_s=0,
            warmup_batches=0,
        )


def test_endless_sampler_covers_every_index_each_pass_and_is_seeded():
    first = list(itertools.islice(iter(EndlessSampler(7, seed=3)), 21))
    for k in range(3):
        assert sorted(first[7 * k : 7 * k + 7]) == list(range(7))
    assert first == list(itertools.islice(iter(EndlessSampler(7, seed=3)), 21))
    assert first != list(itertools.islice(iter(EndlessSampler(7, seed=4)), 21))


def test_a_source_that_stops_is_a_contract_error_not_an_empty_window():
    # an endless DataLoader stops only when the job's code raised StopIteration
    with pytest.raises(JobContractError, match="the dataset ran out of batches after 2: .* raised StopIteration"):
        measure(
            iter([1, 2]),
            lambda b: None,
            batch_size=1,
            budget_s=1,
            rse_target=0.05,
            min_batches=2,
            warmup_s=0,
            warmup_batches=0,
        )


def test_a_window_that_ran_its_budget_is_stable_when_precise_though_short_of_min_batches():
    # 50 steady batches in the 1 s budget, min_batches 1000: the error is 0, so the point is not flagged
    clock = FakeClock()
    m = run(clock, fetch_s=0.0, step_s=0.02, budget_s=1.0, min_batches=1000)
    assert m.batches < 1000 and m.seconds >= 1.0
    assert m.stable


def test_a_source_too_slow_to_warm_up_is_measured_once_the_budget_has_passed():
    # the warm-up asks for a million batches: after budget_s of it the window starts anyway and runs budget_s
    clock = FakeClock()
    batches = (clock.advance(0.1) or i for i in range(500))  # ends long before a million: waiting would fail
    m = measure(
        batches,
        lambda b: None,
        clock=clock,
        batch_size=1,
        budget_s=1.0,
        rse_target=0.05,
        min_batches=5,
        warmup_s=0.0,
        warmup_batches=10**6,
    )
    assert m.rate == pytest.approx(10.0)
    assert 1.0 <= clock.t - 100.0 < 3.0


def _steady(clock: FakeClock, step_s: float):
    """A source with no wait and a step of exactly ``step_s`` (binary fractions keep the sums exact)."""
    return dict(batches=itertools.count(), step=lambda b: clock.advance(step_s), clock=clock, batch_size=1)


def test_the_window_stops_once_it_has_run_exactly_its_budget():
    # 0.25 s steps, a 1 s budget, min_batches out of reach: the window ends with its 4th step, at 1 s, not a 5th
    clock = FakeClock()
    m = measure(**_steady(clock, 0.25), budget_s=1.0, rse_target=0.05, min_batches=1000, warmup_s=0, warmup_batches=2)
    assert (m.batches, m.seconds) == (4, 1.0)


def test_a_window_of_fewer_than_10_batches_is_not_stable_however_steady():
    # 7 identical steps fill the budget: the error is 0, but batch means need a batch in each of 10 groups
    clock = FakeClock()
    m = measure(**_steady(clock, 0.125), budget_s=0.875, rse_target=0.05, min_batches=20, warmup_s=0, warmup_batches=1)
    assert m.batches == 7 and m.rse == 0.0
    assert not m.stable


def test_cpu_is_the_process_trees_cpu_seconds_over_the_window_and_every_core():
    """Each step burns 50 ms of this process's CPU while the injected clock says 100 ms passed: half of one core."""
    proc = psutil.Process()

    def burn(_):
        t = proc.cpu_times()
        end = t.user + t.system + 0.05
        while sum(proc.cpu_times()[:2]) < end:
            pass
        clock.advance(0.1)

    clock = FakeClock()
    m = measure(
        itertools.count(),
        burn,
        clock=clock,
        batch_size=1,
        budget_s=60.0,
        rse_target=0.05,
        min_batches=10,
        warmup_s=0,
        warmup_batches=1,
    )
    assert m.batches == 10
    assert m.usage.cpu_util * psutil.cpu_count(logical=True) == pytest.approx(0.5, abs=0.15)


def _idle(ready) -> None:
    ready.set()
    time.sleep(60)


def test_memory_is_the_mean_per_worker_and_the_main_process_in_mb():
    """Two real child processes stand in for workers; one started before is excluded, as the bench excludes."""
    fork = multiprocessing.get_context("fork")
    ready = [fork.Event() for _ in range(3)]
    before = fork.Process(target=_idle, args=(ready[0],))
    before.start()
    exclude = frozenset(p.pid for p in psutil.Process().children(recursive=True))
    children = [fork.Process(target=_idle, args=(r,)) for r in ready[1:]]
    for c in children:
        c.start()
    assert all(r.wait(30) for r in ready)  # started and settled: their memory no longer grows
    try:
        clock = FakeClock()
        m = measure(
            **_steady(clock, 0.125),
            budget_s=1.0,
            rse_target=0.05,
            min_batches=20,
            warmup_s=0,
            warmup_batches=1,
            exclude=exclude,
        )
        infos = [psutil.Process(c.pid).memory_full_info() for c in children]
    finally:
        for c in [before, *children]:
            c.kill()
            c.join()
    mb = 2**20
    assert m.usage.workers_seen == 2
    assert m.usage.worker_uss_mb == pytest.approx(sum(i.uss for i in infos) / 2 / mb, rel=0.25)
    # forked children share the parent's pages: their proportional share counts in PSS, not in USS
    assert m.usage.worker_pss_mb > m.usage.worker_uss_mb
    assert m.usage.main_rss_mb == pytest.approx(psutil.Process().memory_info().rss / mb, rel=0.25)


def test_a_worker_process_runs_torch_with_one_intra_op_thread():
    import torch

    threads = torch.get_num_threads()
    try:
        worker_init(0)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(threads)


def test_the_sampler_draws_a_new_order_each_pass():
    # a fixed order every pass would replay one sequence of batches: each pass must be a fresh permutation
    passes = list(itertools.islice(iter(EndlessSampler(50, seed=0)), 150))
    assert passes[:50] != passes[50:100] != passes[100:]


def test_a_worker_error_is_described_by_its_original_line_and_an_empty_message_says_so():
    caught = RuntimeError(
        "Caught ValueError in DataLoader worker process 0.\nOriginal Traceback:\n  ...\nValueError: bad"
    )
    assert describe_error(caught) == "ValueError: bad (in a DataLoader worker)"
    assert describe_error(KeyError()) == "KeyError: (no message)"
    killed = RuntimeError("DataLoader worker (pid 123) is killed by signal: Killed.")  # torch's own, one line
    assert describe_error(killed) == "RuntimeError: DataLoader worker (pid 123) is killed by signal: Killed."


def test_a_contract_error_from_the_source_or_the_step_passes_through_unwrapped():
    """The bench's own errors (a batch that is not an (input, target) pair) already name the job: not 'the
    training step raised JobContractError: ...'."""

    def refuse(_):
        raise JobContractError("model.py: batches must be (input, target) pairs; got tuple of length 3")

    def refusing_source():
        raise JobContractError("model.py: no batch came from the DataLoader workers in 1 s")
        yield

    args = dict(batch_size=1, budget_s=1, rse_target=0.05, min_batches=2, warmup_s=0, warmup_batches=0)
    with pytest.raises(JobContractError, match="^model.py: batches must be"):
        measure(itertools.count(), refuse, **args)
    with pytest.raises(JobContractError, match="^model.py: no batch came"):
        measure(refusing_source(), lambda b: None, **args)


@pytest.mark.parametrize("warmup_batches, warmup_s, skipped", [(3, 0.0, 3), (0, 0.4, 10), (3, 0.4, 10), (12, 0.4, 12)])
def test_the_warmup_is_its_batches_and_its_seconds_whichever_lasts_longer(warmup_batches, warmup_s, skipped):
    # 40 ms batches: 0.4 s of warm-up is 10 of them; then 20 steady ones make a stable window
    clock = FakeClock()
    drawn = []
    source = (drawn.append(i) or i for i in itertools.count())
    m = measure(
        source,
        lambda b: clock.advance(0.04),
        clock=clock,
        batch_size=1,
        budget_s=5.0,
        rse_target=0.05,
        min_batches=20,
        warmup_s=warmup_s,
        warmup_batches=warmup_batches,
    )
    assert m.batches == 20 and len(drawn) == skipped + 20


def test_the_error_is_the_batch_means_error_of_the_window_after_the_warmup():
    # alternating 125 and 250 ms steps after two slow warm-up ones: 16 steps fill the 3 s budget
    clock = FakeClock()
    steps = itertools.chain([1.0, 1.0], itertools.cycle([0.125, 0.25]))
    m = measure(
        itertools.count(),
        lambda b: clock.advance(next(steps)),
        clock=clock,
        batch_size=4,
        budget_s=3.0,
        rse_target=0.01,
        min_batches=1000,
        warmup_s=0,
        warmup_batches=2,
    )
    expected = estimate_rate([0.125, 0.25] * 8, [4] * 16, groups=10)
    assert (m.batches, m.seconds, m.rate) == (16, 3.0, expected.rate)
    assert m.rse == pytest.approx(expected.rse) and m.rse > 0.01 and not m.stable


def test_a_warmup_longer_than_the_budget_is_waited_out_in_full():
    # 0.125 s steps: 2 s of warm-up are 16 of them, though the 1 s budget would be spent after 8
    clock = FakeClock()
    drawn = []
    source = (drawn.append(i) or i for i in itertools.count())
    m = measure(
        source,
        lambda b: clock.advance(0.125),
        clock=clock,
        batch_size=1,
        budget_s=1.0,
        rse_target=0.05,
        min_batches=1000,
        warmup_s=2.0,
        warmup_batches=1,
    )
    assert (m.batches, m.seconds) == (8, 1.0)
    assert len(drawn) == 16 + 8


def test_a_window_that_stops_at_a_min_batches_below_10_is_stable():
    # min_batches 5: five steady steps meet the target, the window stops there, and the point is not flagged
    clock = FakeClock()
    m = measure(**_steady(clock, 0.125), budget_s=10.0, rse_target=0.05, min_batches=5, warmup_s=0, warmup_batches=1)
    assert (m.batches, m.rse) == (5, 0.0)
    assert m.stable


def test_a_worker_that_exits_during_the_window_is_left_out_of_the_memory():
    """Two real children stand in for workers; one is gone before the memory is read: the mean is the other's.
    The session's other children (a resource tracker, a zygote of an earlier test) are left out, as the sweep
    leaves out those it finds at its start."""
    foreign = frozenset(p.pid for p in psutil.Process().children(recursive=True))
    fork = multiprocessing.get_context("fork")
    ready = [fork.Event() for _ in range(2)]
    children = [fork.Process(target=_idle, args=(r,)) for r in ready]
    for c in children:
        c.start()
    assert all(r.wait(30) for r in ready)
    steps = itertools.count()

    def step(_):
        if next(steps) == 2:  # the window's first step (after 2 warm-up ones): the worker list is taken
            children[0].kill()
            children[0].join()
        clock.advance(0.125)

    try:
        clock = FakeClock()
        m = measure(
            itertools.count(),
            step,
            clock=clock,
            batch_size=1,
            budget_s=1.0,
            rse_target=0.05,
            min_batches=20,
            warmup_s=0,
            warmup_batches=2,
            exclude=foreign,
        )
        alive = psutil.Process(children[1].pid).memory_full_info()
    finally:
        for c in children:
            c.kill()
            c.join()
    assert m.usage.workers_seen == 1
    assert m.usage.worker_uss_mb == pytest.approx(alive.uss / 2**20, rel=0.25)


def test_with_no_warmup_the_window_starts_before_its_first_batch():
    # 0.25 s steps, a 1 s budget, no warm-up: the window is the first 4 steps, 1 s; its first step is timed from
    # the window's start, not counted though it ran before the clock that ends the window started
    clock = FakeClock()
    m = measure(**_steady(clock, 0.25), budget_s=1.0, rse_target=0.05, min_batches=1000, warmup_s=0, warmup_batches=0)
    assert (m.batches, m.seconds, clock.t - 100.0) == (4, 1.0, 1.0)


def test_sys_exit_in_the_source_or_the_step_is_a_contract_error_not_an_exit():
    """A job's sys.exit() (exit(0) too) is its error, named in one line: adlrec must not end silently with its code."""

    def exiting_source():
        yield 1
        raise SystemExit(0)

    def exiting_step(b):
        raise SystemExit("no GPU memory left")

    args = dict(batch_size=1, budget_s=1, rse_target=0.05, min_batches=2, warmup_s=0, warmup_batches=0)
    with pytest.raises(JobContractError, match="^the dataset raised SystemExit: 0$"):
        measure(exiting_source(), lambda b: None, **args)
    with pytest.raises(JobContractError, match="^the training step raised SystemExit: no GPU memory left$"):
        measure(itertools.count(), exiting_step, **args)
