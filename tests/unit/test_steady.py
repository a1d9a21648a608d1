import math
import random

import pytest

from adlrec.profile.steady import drift, estimate_rate, warmup_end


def test_constant_batches_give_exact_rate_and_zero_error():
    est = estimate_rate([0.01] * 50, [32] * 50)
    assert est.rate == pytest.approx(3200.0)
    assert est.rse == pytest.approx(0.0, abs=1e-12)
    assert est.batches == 50
    assert est.seconds == pytest.approx(0.5)
    assert est.stable(0.05, 20)
    assert not est.stable(0.05, 51)


def test_rate_is_total_samples_over_total_time_not_mean_of_rates():
    # one slow batch: mean of per-batch rates would say ~ (100+100+10)/3 = 70; the truth is 30/0.21
    est = estimate_rate([0.01, 0.01, 0.1, 0.09], [1, 1, 1, 1], groups=2)
    assert est.rate == pytest.approx(4 / 0.21)


def test_bursty_arrivals_are_absorbed_by_batch_means():
    # workers deliver bursts: 3 quick batches, then a slow one, repeated; groups of 4 see a steady rate
    durations = [0.001, 0.001, 0.001, 0.097] * 40
    est = estimate_rate(durations, [8] * len(durations), groups=10)
    assert est.rate == pytest.approx(8 * 160 / 4.0)
    assert est.rse < 0.01


def test_noisier_timings_give_larger_error():
    import random

    rng = random.Random(1)
    calm = [0.01 * (1 + 0.01 * rng.uniform(-1, 1)) for _ in range(200)]
    wild = [0.01 * (1 + 0.8 * rng.uniform(-1, 1)) for _ in range(200)]
    assert estimate_rate(wild, [1] * 200).rse > 5 * estimate_rate(calm, [1] * 200).rse


def test_too_little_data_is_not_stable():
    assert math.isinf(estimate_rate([], []).rse)
    assert math.isinf(estimate_rate([0.1], [4]).rse)
    assert estimate_rate([0.1], [4]).rate == pytest.approx(40.0)


@pytest.mark.parametrize(
    "durations,sizes,groups",
    [([0.1, 0.1], [1], 10), ([0.1, -0.1], [1, 1], 10), ([0.1, 0.1], [1, 1], 1)],
)
def test_bad_input_raises(durations, sizes, groups):
    with pytest.raises(ValueError):
        estimate_rate(durations, sizes, groups)


def test_warmup_needs_both_batches_and_seconds():
    assert warmup_end([0.1] * 10, min_batches=3, min_seconds=0.0) == 3
    assert warmup_end([0.1] * 10, min_batches=1, min_seconds=0.45) == 5
    assert warmup_end([0.1] * 2, min_batches=3, min_seconds=0.0) is None
    assert warmup_end([0.1] * 3, min_batches=3, min_seconds=0.0) == 3
    assert warmup_end([1.0, 0.1], min_batches=0, min_seconds=0.5) == 1
    assert warmup_end([], min_batches=0, min_seconds=0.0) == 0
    with pytest.raises(ValueError):
        warmup_end([0.1], min_batches=-1, min_seconds=0)


def test_drift_is_a_change_beyond_both_errors_and_the_floor():
    assert drift(100.0, 0.01, 80.0, 0.01, 0.05) == pytest.approx(-0.2)  # the H200 plateau's size of move
    assert drift(100.0, 0.01, 104.0, 0.01, 0.05) is None  # inside the 5% floor
    assert drift(100.0, 0.05, 81.0, 0.05, 0.05) is None  # |ln 0.81| = 0.21, inside 3 combined errors (0.212)
    assert drift(100.0, 0.05, 75.0, 0.05, 0.05) == pytest.approx(-0.25)
    assert drift(100.0, 0.3, 10.0, 0.3, 0.05) == pytest.approx(-0.9)  # tenfold, though each was 30% off
    assert drift(100.0, 0.01, 200.0, 0.01, 0.05) == pytest.approx(1.0)  # faster counts too
    assert drift(100.0, math.inf, 10.0, 0.01, 0.05) is None  # an error not estimated: nothing to say
    assert drift(0.0, 0.01, 80.0, 0.01, 0.05) is None  # nothing to compare with
    assert drift(100.0, 0.01, 0.0, 0.01, 0.05) is None  # nor with a rate of 0 (no log of it)


def test_error_is_the_standard_error_of_the_group_rates_mean_relative_to_it():
    # two groups of two batches, at 10/s and 5/s: sample sd 2.5 * sqrt(2), over sqrt(2) groups, over the mean 7.5
    est = estimate_rate([0.1, 0.1, 0.2, 0.2], [1, 1, 1, 1], groups=2)
    assert est.rse == pytest.approx(2.5 / 7.5)


def test_error_of_independent_batch_times_matches_theory_on_average():
    """Batch times i.i.d. with coefficient of variation cv: the rate's relative variance is cv^2 / n.

    The squared error estimate is unbiased for it (the mean of rse itself is not, by the chi factor), so
    its mean over 1000 windows is 1.02-1.04 over seeds (its own spread is about 1.5%, and the rate, a ratio,
    adds a bias of second order in cv); dividing the group variance by k instead of k - 1 gives 0.9 of that."""
    rng = random.Random(7)
    n, a = 200, 0.5
    cv2 = a**2 / 3  # uniform on 1 +- a
    squares = [
        estimate_rate([0.01 * (1 + a * rng.uniform(-1, 1)) for _ in range(n)], [1] * n).rse ** 2 for _ in range(1000)
    ]
    assert 0.95 <= sum(squares) / len(squares) * n / cv2 <= 1.1


def test_fewer_batches_than_groups_make_one_group_per_batch():
    # 10/s, 5/s, 10/s, 5/s: sample sd sqrt(25 / 3), over sqrt(4), over the mean 7.5 (two groups of two would say 0)
    est = estimate_rate([0.1, 0.2, 0.1, 0.2], [1, 1, 1, 1], groups=10)
    assert est.rse == pytest.approx(math.sqrt(25 / 3) / 2 / 7.5)


def test_batches_that_do_not_divide_into_the_groups_are_spread_over_them_not_left_to_the_last():
    # 15 batches in 10 groups of 1 or 2; the last 6 at half the rate fill the last 4 groups: 6 at 1/s and 4 at
    # 0.5/s (9 groups of one batch and a last of the other 6 would be 9 at 1/s and one at 0.5/s)
    est = estimate_rate([1.0] * 9 + [2.0] * 6, [1] * 15, groups=10)
    rates = [1.0] * 6 + [0.5] * 4
    mean = sum(rates) / 10
    sd = math.sqrt(sum((r - mean) ** 2 for r in rates) / 9)
    assert est.rse == pytest.approx(sd / math.sqrt(10) / mean)


def test_a_group_with_no_elapsed_time_leaves_the_error_unknown():
    # a clock too coarse to see two batches: their group has no rate, so no error can be estimated yet
    est = estimate_rate([0.0, 0.0, 0.1, 0.1], [1, 1, 1, 1], groups=2)
    assert est.rate == pytest.approx(20.0)
    assert math.isinf(est.rse) and not est.stable(0.5, 1)


def test_warmup_ends_once_exactly_min_seconds_have_passed():
    assert warmup_end([0.25, 0.25, 0.25], min_batches=0, min_seconds=0.5) == 2


def test_two_tight_measurements_inside_the_floor_are_not_drift():
    # 3 combined errors are 0.4%: the 4% move is beyond them but within the 5% precision a rate is taken to
    assert drift(100.0, 0.001, 104.0, 0.001, 0.05) is None


def test_an_error_exactly_at_the_target_with_exactly_min_batches_is_steady():
    # the target and the batch count are both met at their bounds: "at most 5%" and "at least 20 batches"
    est = estimate_rate([0.1, 0.1, 0.2, 0.2], [1, 1, 1, 1], groups=2)
    assert est.stable(est.rse, est.batches)
    assert not est.stable(est.rse, est.batches + 1)
    assert not est.stable(math.nextafter(est.rse, 0.0), est.batches)


def test_a_negative_warmup_time_is_refused_like_a_negative_batch_count():
    with pytest.raises(ValueError, match="min_batches and min_seconds must be >= 0"):
        warmup_end([0.1], min_batches=0, min_seconds=-0.1)


def test_batches_a_clock_too_coarse_to_time_have_no_rate_and_no_error():
    # every batch measured at 0 s: no rate can be given (not a ZeroDivisionError), nor an error
    est = estimate_rate([0.0, 0.0, 0.0], [8, 8, 8])
    assert (est.rate, est.batches, est.seconds) == (0.0, 3, 0.0)
    assert math.isinf(est.rse) and not est.stable(0.5, 1)


def test_a_move_within_the_second_measurements_error_is_not_drift():
    # the end ceiling measured to 20%: |ln 0.7| = 0.36 is inside 3 combined errors (0.60), though 3 of the
    # first one's alone (0.04) would call it drift
    assert drift(100.0, 0.01, 70.0, 0.2, 0.05) is None
    assert drift(100.0, 0.2, 70.0, 0.01, 0.05) is None


def test_a_move_of_exactly_the_limit_is_not_beyond_it():
    # a doubling whose log ratio is the floor itself: drift is a move *beyond* the limit
    assert drift(1.0, 0.0, 2.0, 0.0, math.log(2.0)) is None
    assert drift(1.0, 0.0, 2.0, 0.0, math.log(2.0) * 0.999) == pytest.approx(1.0)
