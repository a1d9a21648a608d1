from dataclasses import replace

import numpy as np
import pytest

from adlrec.predict.evaluate import cross_validate, curves_from_profiles
from adlrec.predict.features import ProbeFeatures
from adlrec.predict.models import (
    AnalyticModel,
    InterpModel,
    LearnedModel,
    analytic_curve,
    make_model,
    smallest_reaching,
)
from tests.factories import synthetic_profiles


def feats(**kw):
    base = dict(
        ceiling=1000.0,
        prep_rate_0=300.0,
        prep_rate_1=250.0,
        prep_rate_2=500.0,
        fetch_extra_s=0.0,
        batch_size=32,
        cores=4,
        device_kind="emulate",
    )
    return ProbeFeatures(**(base | kw))


def test_analytic_in_process_loading_is_serial_with_the_step():
    t0 = analytic_curve(feats(), [0])[0]
    assert t0 == pytest.approx(1 / (1 / 1000 + 1 / 300))


def test_analytic_grows_with_workers_to_the_ceiling_then_contention_bites():
    f = feats(ceiling=5000.0)
    t = analytic_curve(f, range(9))
    assert list(t[1:5]) == sorted(t[1:5])  # 1..4 workers: more is faster on 4 free cores
    assert t[4] == pytest.approx(250 * 4)  # perfect scaling (P2 = 2 P1)
    assert t[8] < t[4]  # past the free cores, contention
    assert t[8] == pytest.approx(1000 / (1 + 0.15 * 4 / 4))  # 15% of the loader rate per free core's worth
    capped = analytic_curve(feats(ceiling=600.0), range(9))
    assert max(capped) == pytest.approx(600.0)


def test_analytic_on_cpu_caps_where_step_and_loading_fill_the_node():
    f = feats(device_kind="cpu", ceiling=100.0)
    cap = 1 / (1 / 100 + 1 / (4 * 300))
    assert max(analytic_curve(f, range(8))) == pytest.approx(cap)


def test_analytic_on_cpu_leaves_one_core_to_the_step():
    # 4 cores, a step that needs one of them: the loader scales to 3 workers, a 4th contends
    f = feats(device_kind="cpu", ceiling=1e9)  # the cap, about 4 x 300 = 1200/s, is above the loader
    t = analytic_curve(f, range(6))
    assert t[3] == pytest.approx(3 * 250)
    assert t[4] == pytest.approx(750 / (1 + 0.15 / 3))
    assert int(np.argmax(t)) == 3


def test_analytic_on_a_gpu_gives_the_loader_every_core():
    """Only on ``cpu`` does the step compete with the workers: ``cuda`` scales like the emulated device."""
    ws = range(7)
    assert list(analytic_curve(feats(device_kind="cuda"), ws)) == list(analytic_curve(feats(), ws))
    assert analytic_curve(feats(device_kind="cuda", ceiling=5000.0), [4])[0] == pytest.approx(4 * 250)


def test_analytic_on_a_one_core_cpu_node_gives_the_loader_that_core_and_contends_past_it():
    """The step needs the only core too: the loader still has one core's worth (not 0 free cores, a division
    by zero), and a second worker contends for it."""
    t = analytic_curve(feats(device_kind="cpu", cores=1, ceiling=1e9), range(3))
    assert t[1] == pytest.approx(250.0)
    assert t[2] == pytest.approx(250 / (1 + 0.15))


@pytest.mark.parametrize(
    "p2,third",
    [(375.0, 250 * (1 + 0.75 * 2)), (50.0, 250 * (1 + 0.2 * 2)), (600.0, 250 * 3)],
)
def test_analytic_scales_past_two_workers_with_the_efficiency_seen_from_one_to_two_floored_at_a_fifth(p2, third):
    # efficiency = P2 / (2 P1): 375 / 500 = 0.75; a second worker that slowed the loader still counts for 0.2;
    # two workers measured more than twice as fast as one (noise) add no more than a worker each
    assert analytic_curve(feats(ceiling=1e9, prep_rate_2=p2), [3])[0] == pytest.approx(third)


def test_analytic_cold_reads_add_in_full_in_process_and_spread_over_workers():
    f = feats(ceiling=1e9, fetch_extra_s=0.002)
    t = analytic_curve(f, [0, 1, 2])
    assert t[0] == pytest.approx(1 / (1 / 1e9 + 1 / 300 + 0.002))
    assert t[1] == pytest.approx(1 / (1 / 250 + 0.002))
    assert t[2] == pytest.approx(1 / (1 / 500 + 0.002 / 2))


def test_interp_is_flat_past_the_probed_points():
    t = InterpModel().predict(feats(), [0, 1, 2, 3, 6])
    assert t[0] == pytest.approx(1 / (1 / 1000 + 1 / 300))  # in-process: loading then the step
    assert t[1] == 250 and t[2] == 500 and t[3] == 500 and t[4] == 500


def test_interp_never_predicts_a_loader_faster_than_the_step():
    # one worker loads at 250/s and two at 500/s, but the step alone runs at 300/s: the job at most that
    t = InterpModel().predict(feats(ceiling=300.0), [1, 2, 5])
    assert list(t) == [250.0, 300.0, 300.0]
    assert list(InterpModel().predict(feats(ceiling=200.0), [1, 2])) == [200.0, 200.0]


def test_learned_model_beats_analytic_on_curves_like_its_training_data():
    profiles = synthetic_profiles(workloads=8)
    curves = curves_from_profiles(profiles)
    train, test = curves[:12], curves[12:]
    model = LearnedModel(n_estimators=200).fit([c.features for c in train], [c.throughput for c in train])

    def mape(m):
        errs = [
            abs(m.predict(c.features, range(len(c.throughput))) - np.asarray(c.throughput)) / c.throughput for c in test
        ]
        return float(np.mean(np.concatenate(errs)))

    assert mape(model) < mape(AnalyticModel())


def test_learned_model_depends_on_the_curves_not_the_order_they_are_read_in():
    """The store lists curves newest first, profiles/ by file name: the same curves in another order fitted
    another model (boosting subsamples rows by position), which cross validation scored differently."""
    curves = curves_from_profiles(synthetic_profiles(workloads=5))
    spec = LearnedModel(n_estimators=40).spec()
    ws = range(7)
    fitted = [
        make_model(spec).fit([c.features for c in cs], [c.throughput for c in cs]) for cs in (curves, curves[::-1])
    ]
    for c in curves:
        assert fitted[0].predict(c.features, ws) == pytest.approx(fitted[1].predict(c.features, ws), rel=1e-12)
    assert cross_validate(spec, curves).metrics() == cross_validate(spec, curves[::-1]).metrics()


def test_learned_model_never_predicts_above_the_ceiling_though_it_trained_on_points_above_it():
    """Measured points scatter around the ceiling (profiles/ has one 7% above it); the learned correction
    carried that noise into predictions above the ceiling (2.7% above on profiles/), which no job reaches."""
    curves = [
        replace(c, throughput=tuple(1.25 * t for t in c.throughput)) for c in curves_from_profiles(synthetic_profiles())
    ]
    assert max(max(c.throughput) / c.features.ceiling for c in curves) > 1.1
    model = LearnedModel(n_estimators=40).fit([c.features for c in curves], [c.throughput for c in curves])
    for c in curves:
        curve = model.predict(c.features, range(65))
        assert np.all(np.isfinite(curve)) and np.all(curve > 0)
        assert curve.max() <= c.features.ceiling


@pytest.mark.parametrize(
    "kw",
    [
        {"prep_rate_0": 5e-324},  # 1 / P0 overflows: the analytic T(0) is 0
        {"prep_rate_1": 1e-320, "prep_rate_2": 1e9},  # every analytic T(w > 0) is 0
        {"ceiling": 1e9, "prep_rate_0": 1e-310, "prep_rate_1": 1e-310, "prep_rate_2": 1e-310},  # P / C underflows
    ],
)
def test_learned_model_predicts_any_probe_features_accepts(kw):
    """Rates this small are absurd, yet valid probe input: their ratios underflowed to 0 and math.log raised
    ValueError (math domain error), an HTTP 500 from the service's POST /jobs."""
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    model = LearnedModel(n_estimators=20).fit([c.features for c in curves], [c.throughput for c in curves])
    f = feats(**kw)
    curve = model.predict(f, range(65))
    assert np.all(np.isfinite(curve)) and np.all(curve >= 0) and curve.max() <= f.ceiling


def test_learned_model_fits_around_a_point_measured_at_zero():
    """fit takes raw curves (not only validated Curves): a 0 is skipped, not a log(0) math domain error."""
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    rates = [c.throughput for c in curves]
    rates[0] = (0.0, *rates[0][1:])
    model = LearnedModel(n_estimators=20).fit([c.features for c in curves], rates)
    assert np.all(np.isfinite(model.predict(curves[0].features, range(8))))


def test_analytic_refuses_a_negative_worker_count():
    with pytest.raises(ValueError, match="workers must be >= 0, got -1"):
        analytic_curve(feats(), [0, -1])


def test_learned_model_needs_two_measured_points():
    with pytest.raises(ValueError, match="at least two measured points"):
        LearnedModel(n_estimators=5).fit([feats()], [(100.0,)])


def test_make_model_and_its_errors():
    assert make_model({"kind": "learned", "max_depth": 2}).spec()["max_depth"] == 2
    assert make_model({"kind": "learned", "subsample": 1.0}).spec()["subsample"] == 1.0  # every row, no sampling
    with pytest.raises(ValueError, match="unknown model kind 'tree'"):
        make_model({"kind": "tree"})
    with pytest.raises(ValueError, match="bad hyperparameters for learned"):
        make_model({"kind": "learned", "depth": 2})
    with pytest.raises(RuntimeError, match="before fit"):
        LearnedModel().predict(feats(), [1])


@pytest.mark.parametrize(
    "kw,message",
    [
        ({"n_estimators": 0}, "n_estimators=0: expected a whole number >= 1"),
        ({"max_depth": 0}, "max_depth=0: expected a whole number >= 1"),
        ({"learning_rate": float("inf")}, "learning_rate=inf: expected a finite number > 0"),
        ({"learning_rate": 0.0}, "learning_rate=0.0: expected a finite number > 0"),
        ({"subsample": 0.0}, r"subsample=0.0: expected a number in \(0, 1\]"),
        ({"seed": 2**32}, r"seed=4294967296: expected a whole number in \[0, 2\*\*32 - 1\]"),
    ],
)
def test_learned_hyperparameters_out_of_range_are_one_line(kw, message):
    with pytest.raises(ValueError, match=f"^{message}$"):
        LearnedModel(**kw)


def test_learned_hyperparameters_at_the_edges_of_their_ranges_fit():
    curves = curves_from_profiles(synthetic_profiles(workloads=2))
    model = LearnedModel(n_estimators=1, max_depth=1, learning_rate=1e-3, subsample=1.0, seed=2**32 - 1)
    model.fit([c.features for c in curves], [c.throughput for c in curves])
    assert np.all(np.isfinite(model.predict(curves[0].features, range(5))))


def test_smallest_reaching():
    assert smallest_reaching([10, 50, 96, 100, 90]) == 2
    assert smallest_reaching([100, 10]) == 0
    assert smallest_reaching([92, 100]) == 1  # 92% is not the 95% the allocator promises
    assert smallest_reaching([3, 4], share=0.75) == 0  # reaching the share exactly counts
    assert smallest_reaching([50, 100, 52]) == 1  # 95% of the peak, not of the last count (contention past it)


@pytest.mark.parametrize(
    "hparam,value", [("n_estimators", 5), ("max_depth", 1), ("learning_rate", 0.5), ("subsample", 0.5), ("seed", 7)]
)
def test_each_hyperparameter_of_the_spec_reaches_the_fitted_model(hparam, value):
    """The spec is what `--hparam` sets, what the version's adlrec.spec tag records and what the champion is
    cross-validated with again: a value that stopped on its way to scikit-learn fitted another model than it says."""
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    X, rates = [c.features for c in curves], [c.throughput for c in curves]
    base = {k: v for k, v in LearnedModel(n_estimators=20).spec().items() if k != "kind"}
    fitted = [LearnedModel(**spec).fit(X, rates) for spec in (base, base | {hparam: value})]
    curve = [np.concatenate([m.predict(c.features, range(8)) for c in curves]) for m in fitted]
    assert not np.allclose(curve[0], curve[1], rtol=1e-9, atol=0)


def test_as_throughputs_reads_a_count_below_zero_or_not_finite_as_no_throughput():
    from adlrec.predict.models import as_throughputs

    got = as_throughputs([5.0, -1.0, float("nan"), float("inf"), float("-inf"), 0.0, 2.5])
    assert got.tolist() == [5.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.5]
