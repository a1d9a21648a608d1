import pytest

from adlrec.predict.evaluate import cross_validate, curves_from_profiles
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
