"""The measuring loop, driven by an injected clock: exact, deterministic figures."""

import itertools

import pytest

from adlrec.errors import JobContractError
from adlrec.profile.meter import EndlessSampler, measure


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
