import numpy as np
import pytest

from adlrec.predict.evaluate import Curve, cross_validate, curves_from_profiles
from adlrec.predict.models import make_model
from tests.factories import make_profile, synthetic_profiles


def test_curves_are_deduplicated_newest_first_and_short_sweeps_skipped():
    newer = make_profile(throughputs=(1.0, 2.0, 3.0))
    older = make_profile(throughputs=(9.0, 9.0, 9.0))
    short = make_profile(throughputs=(1.0, 2.0), workload="short")
    curves = curves_from_profiles([newer, older, short])
    assert len(curves) == 1 and curves[0].throughput == (1.0, 2.0, 3.0)


def test_cross_validation_holds_out_whole_workloads():
    profiles = synthetic_profiles(workloads=5, devices=("emulate:5", "emulate:20"))
    curves = curves_from_profiles(profiles)
    ev = cross_validate({"kind": "learned", "n_estimators": 50}, curves)
    assert ev.groups == 5 and ev.curves == 10
    assert ev.points == sum(len(c.throughput) for c in curves)
    assert 0 <= ev.median_ape <= ev.p90_ape
    assert 0 <= ev.best_hit_rate <= 1


def test_a_perfect_model_scores_zero():
    # curves made by the analytic model itself: the analytic model is exact on them
    from dataclasses import replace

    from adlrec.predict.features import features_from_profile
    from adlrec.predict.models import analytic_curve

    exact = []
    for p in synthetic_profiles(workloads=3, devices=("emulate:10",)):
        truth = analytic_curve(features_from_profile(p), range(len(p.points)))
        exact.append(
            replace(p, points=tuple(replace(q, throughput=float(t)) for q, t in zip(p.points, truth, strict=True)))
        )
    ev = cross_validate({"kind": "analytic"}, curves_from_profiles(exact))
    assert ev.median_ape == pytest.approx(0.0, abs=1e-12)
    assert ev.best_hit_rate == 1.0


def test_one_workload_cannot_be_cross_validated():
    curves = curves_from_profiles(synthetic_profiles(workloads=1))
    with pytest.raises(ValueError, match="at least 2 workloads"):
        cross_validate({"kind": "analytic"}, curves)


def test_curves_keep_the_newest_measurement_of_each_profile_as_the_export_does():
    from dataclasses import replace

    older = replace(synthetic_profiles(workloads=1, devices=("emulate:5",))[0], created_at="2026-12-04T16:00:00+00:00")
    newer = replace(
        older,
        points=tuple(replace(q, throughput=q.throughput * 2) for q in older.points),
        created_at="2026-12-04T17:00:00+00:00",
    )
    for order in ([older, newer], [newer, older]):
        (curve,) = curves_from_profiles(order)
        assert curve.throughput == tuple(q.throughput for q in newer.points)


def test_skipped_profiles_say_why_and_a_zero_throughput_never_reaches_the_scores():
    from dataclasses import replace

    good = make_profile()
    zero = make_profile(workload="zero")
    zero = replace(zero, points=(zero.points[0], replace(zero.points[1], throughput=0.0), zero.points[2]))
    short = make_profile(throughputs=(5.0,), workload="short")
    skipped: list[str] = []
    (curve,) = curves_from_profiles([good, zero, short], skipped)
    assert curve.label == "w emulate:5"
    assert skipped == [
        "not a valid profile (profile.points[1].throughput (workers=1): expected a number > 0 (samples/s), got 0.0)",
        "swept to fewer than 2 workers (the model's features need 0, 1 and 2)",
    ]
    with pytest.raises(ValueError, match=r"curve w emulate:5: throughput \(1.0, 0.0\): expected finite numbers > 0"):
        replace(curve, throughput=(1.0, 0.0))
    with pytest.raises(ValueError, match=r"throughput \(1.0, inf\): expected finite numbers > 0"):
        replace(curve, throughput=(1.0, float("inf")))


def _feats():
    from adlrec.predict.features import ProbeFeatures

    # analytic T(w) for w = 0..5: 283, 250, 500, 750, 1000 (its best), 964
    return ProbeFeatures(5000.0, 300.0, 250.0, 500.0, 0.0, 32, 4, "emulate")


def _curve(group: str, throughput) -> Curve:

    return Curve(group, group, group, _feats(), tuple(float(t) for t in throughput))


def test_scores_are_the_median_and_p90_of_point_errors_relative_to_the_measurement():
    from adlrec.predict.models import analytic_curve

    pred = analytic_curve(_feats(), range(6))
    errors = {"a": [0.0] * 6, "b": [0.2] * 6, "c": [0.1, 0.2, 0.3, 0.4, 0.5, 0.6]}
    # measured = predicted / (1 + e): the error relative to the measurement is e
    curves = [_curve(g, pred / (1 + np.asarray(e))) for g, e in errors.items()]
    ev = cross_validate({"kind": "analytic"}, curves)
    assert ev.median_ape == pytest.approx(0.2)  # 6 x 0, 0.1, 7 x 0.2, 0.3 .. 0.6: the mean would be 0.183
    assert ev.p90_ape == pytest.approx(0.43)  # between the 16th (0.4) and 17th (0.5) of 18
    # max errors, relative to the measured max: a 0, b 0.2, c |1000 - 1000/1.5| / (1000/1.5) = 0.5
    assert ev.median_max_error == pytest.approx(0.2)


def test_a_best_worker_count_is_a_hit_when_its_measured_rate_reaches_95_percent_of_the_measured_best():
    # the analytic model picks 4 workers for both; measured, 4 give 96% of the best (5) in one, 60% in the other
    near = _curve("near", (100, 200, 300, 400, 1920, 2000))
    far = _curve("far", (100, 200, 300, 400, 1200, 2000))
    assert cross_validate({"kind": "analytic"}, [near, far]).best_hit_rate == 0.5
    again = _curve("again", (100, 200, 300, 400, 1950, 2000))
    assert cross_validate({"kind": "analytic"}, [near, far, again]).best_hit_rate == pytest.approx(2 / 3)  # the share


def test_a_best_worker_count_measured_at_exactly_95_percent_of_the_best_is_a_hit_and_at_94_a_miss():
    # as smallest_reaching: reaching the share exactly counts
    exact = _curve("exact", (100, 200, 300, 400, 1900, 2000))
    short = _curve("short", (100, 200, 300, 400, 1880, 2000))
    assert cross_validate({"kind": "analytic"}, [exact, short]).best_hit_rate == 0.5


def test_each_workload_is_scored_by_a_model_fitted_without_it():
    curves = curves_from_profiles(synthetic_profiles(workloads=3, devices=("emulate:5", "emulate:20")))
    spec = {"kind": "learned", "n_estimators": 30}
    ev = cross_validate(spec, curves)
    for g in {c.group for c in curves}:
        rest = [c for c in curves if c.group != g]
        model = make_model(spec).fit([c.features for c in rest], [c.throughput for c in rest])
        for c in (c for c in curves if c.group == g):
            scored = [r["predicted"] for r in ev.rows if r["key"] == c.key]
            assert scored == pytest.approx(list(model.predict(c.features, range(len(c.throughput)))), rel=1e-12)


def test_a_workload_is_its_name_and_parameters_not_its_device():
    from adlrec.predict.evaluate import workload_group
    from adlrec.schemas import DeviceSpec

    small = make_profile(params={"n": 3})
    assert workload_group(small) == workload_group(make_profile(params={"n": 3}, device=DeviceSpec("emulate", 20.0)))
    assert workload_group(small) != workload_group(make_profile(params={"n": 4}))


def test_a_sweep_with_a_gap_in_its_worker_counts_is_skipped_not_read_as_consecutive():
    from dataclasses import replace

    p = make_profile(throughputs=(1.0, 2.0, 3.0, 4.0))
    gap = replace(p, points=(*p.points[:3], replace(p.points[3], workers=4)))
    skipped: list[str] = []
    assert curves_from_profiles([gap], skipped) == []
    assert skipped == ["with worker counts other than 0, 1, 2, ..."]


def test_curves_of_one_example_with_other_parameters_are_other_workloads_however_the_parameters_are_ordered():
    """A workload is an example with one set of parameters: held out together whatever order its parameters
    were written in (a store and a profiles/ file may differ), and apart from the same example with others."""
    from adlrec.schemas import DeviceSpec

    ordered = make_profile(params={"batch_size": 8, "n": 3})
    reordered = make_profile(params={"n": 3, "batch_size": 8}, device=DeviceSpec("emulate", 20.0))
    other = make_profile(params={"batch_size": 8, "n": 4})
    curves = curves_from_profiles([ordered, reordered, other])
    assert len(curves) == 3
    assert curves[0].group == curves[1].group != curves[2].group
    assert cross_validate({"kind": "analytic"}, curves).groups == 2
