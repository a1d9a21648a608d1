"""The throughput model in a real SQLite MLflow Model Registry: fit, register, alias, load, predict."""

from __future__ import annotations

import json
import math
import re
import shutil
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from adlrec.cli import main
from adlrec.errors import TrackingError
from adlrec.predict.evaluate import cross_validate, curves_from_profiles
from adlrec.predict.features import ProbeError
from adlrec.predict.fit import fit_and_register
from adlrec.predict.models import LearnedModel, make_model
from adlrec.profile.library import export_profiles
from adlrec.tracking import MODEL_NAME, SPEC_TAG, ModelRegistry, ProfileRun, Tracker
from tests.factories import make_profile, register_model_of_other_features, synthetic_profiles

SPEC = {"kind": "learned", "n_estimators": 60, "max_depth": 2, "learning_rate": 0.1, "subsample": 0.8, "seed": 0}


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    """Run in tmp_path: a fit without --data-dir put its artifacts in the repo's .adlrec/artifacts, and one
    without --profiles would train on the repo's profiles/."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def registry(tmp_path):
    return ModelRegistry(f"sqlite:///{tmp_path / 'm.db'}", artifact_root=tmp_path / "artifacts")


@pytest.fixture
def curves():
    return curves_from_profiles(synthetic_profiles(workloads=6))


def test_fit_registers_a_version_and_the_first_becomes_champion(registry, curves):
    outcome = fit_and_register(curves, SPEC, registry, sources="test")
    assert outcome.version == "1" and outcome.promoted and outcome.previous_champion is None
    champ = registry.champion()
    assert champ.version == "1" and champ.spec == SPEC
    (mv,) = registry.versions()
    assert float(mv.tags["cv_median_ape"]) == pytest.approx(outcome.evaluation.median_ape, rel=1e-4)
    run = registry.client.get_run(outcome.run_id)
    assert run.info.status == "FINISHED"
    ev = outcome.evaluation  # each score logged under its own name
    assert {k: v for k, v in run.data.metrics.items() if k.startswith("cv_")} == pytest.approx(
        {
            "cv_median_ape": ev.median_ape,
            "cv_p90_ape": ev.p90_ape,
            "cv_median_max_error": ev.median_max_error,
            "cv_best_hit_rate": ev.best_hit_rate,
            "cv_curves": 12,
            "cv_groups": 6,
        }
    )
    # 6 workloads on 2 devices: 12 curves
    assert (run.data.params["curves"], run.data.params["workloads"], run.data.params["sources"]) == ("12", "6", "test")
    assert {k.removeprefix("spec."): v for k, v in run.data.params.items() if k.startswith("spec.")} == {
        k: str(v) for k, v in SPEC.items()
    }
    assert (run.data.tags["adlrec.kind"], json.loads(run.data.tags[SPEC_TAG])) == ("model-fit", SPEC)
    assert "evaluation.csv" in {a.path for a in registry.client.list_artifacts(outcome.run_id)}


def test_a_registered_model_pins_what_it_needs_to_load_elsewhere(registry, curves, tmp_path):
    """`mlflow models serve` and a fresh environment install these: the pickled model needs adlrec itself."""
    import adlrec

    fit_and_register(curves, SPEC, registry, sources="test")
    (requirements,) = (tmp_path / "artifacts").rglob("requirements.txt")
    pins = dict(line.split("==") for line in requirements.read_text().split())
    assert pins["adlrec"] == adlrec.__version__
    assert {"scikit-learn", "numpy", "pandas", "cloudpickle"} <= set(pins)
    (example,) = (tmp_path / "artifacts").rglob("input_example.json")  # a request `mlflow models serve` answers
    assert "workers" in json.loads(example.read_text())["columns"]


def test_the_registry_is_the_tracking_store_whatever_mlflow_registry_uri_says(tmp_path, monkeypatch, curves):
    """A shell's MLFLOW_REGISTRY_URI (another server, Databricks' Unity Catalog) is not where `model list
    --tracking-uri` looks: the version, its run and its alias stay in the one store."""
    monkeypatch.setenv("MLFLOW_REGISTRY_URI", f"sqlite:///{tmp_path / 'elsewhere.db'}")
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    fit_and_register(curves, {"kind": "interp"}, ModelRegistry(uri, artifact_root=tmp_path / "a"), sources="test")
    monkeypatch.delenv("MLFLOW_REGISTRY_URI")
    registry = ModelRegistry(uri)
    assert [str(mv.version) for mv in registry.versions()] == ["1"] and registry.champion().version == "1"
    assert not (tmp_path / "elsewhere.db").exists()


def test_loading_by_alias_predicts_what_the_fitted_model_predicts(registry, curves):
    import mlflow

    before = (mlflow.get_tracking_uri(), mlflow.get_registry_uri())
    fit_and_register(curves, SPEC, registry, sources="test")
    pyfunc, version = registry.load()
    # MLflow's own store is what it was: a job's MLflow calls (its model.py, after predict's load) go where they did
    assert (mlflow.get_tracking_uri(), mlflow.get_registry_uri()) == before
    f = curves[0].features
    rows = pd.DataFrame([f.to_dict() | {"workers": w} for w in range(5)])
    got = np.asarray(pyfunc.predict(rows)["throughput"])
    want = make_model(SPEC).fit([c.features for c in curves], [c.throughput for c in curves]).predict(f, range(5))
    assert got == pytest.approx(want)
    assert version == "1"
    assert pyfunc.metadata.get_input_schema().input_names()[-1] == "workers"


def test_a_worse_model_is_registered_but_does_not_take_the_alias(registry, curves):
    first = fit_and_register(curves, SPEC, registry, sources="test")
    worse = fit_and_register(curves, {"kind": "interp"}, registry, sources="test")
    assert worse.version == "2" and not worse.promoted
    assert worse.champion_evaluation.median_ape == pytest.approx(first.evaluation.median_ape)
    logged = registry.client.get_run(worse.run_id).data.metrics  # the run says what it was judged against
    assert logged["champion_cv_median_ape"] == pytest.approx(first.evaluation.median_ape)
    assert worse.evaluation.median_ape > worse.champion_evaluation.median_ape
    assert registry.champion().version == "1"
    better = fit_and_register(curves, SPEC | {"n_estimators": 200}, registry, sources="test")
    assert better.promoted == (better.evaluation.median_ape < first.evaluation.median_ape)


def test_a_fit_that_only_ties_the_champion_does_not_take_the_alias(registry, curves):
    """Promotion needs a strictly lower median APE: the same spec fitted again on the same curves scores the same."""
    fit_and_register(curves, {"kind": "analytic"}, registry, sources="test")
    again = fit_and_register(curves, {"kind": "analytic"}, registry, sources="test")
    assert again.evaluation.median_ape == again.champion_evaluation.median_ape
    assert not again.promoted and again.previous_champion == "1" and registry.champion().version == "1"


def test_bad_probe_input_gets_a_clear_error(registry, curves):
    fit_and_register(curves, SPEC, registry, sources="test")
    pyfunc, version = registry.load()
    good = curves[0].features.to_dict() | {"workers": 2}
    with pytest.raises(ProbeError, match="row 0: probe input ceiling=-5.0"):
        pyfunc.predict(pd.DataFrame([good | {"ceiling": -5.0}]))
    with pytest.raises(ProbeError, match=r"^probe input row 1: workers=-1: expected a whole number >= 0$"):
        pyfunc.predict(pd.DataFrame([good, good | {"workers": -1}]))
    with pytest.raises(Exception, match="ceiling"):  # the signature names the missing column
        pyfunc.predict(pd.DataFrame([{k: v for k, v in good.items() if k != "ceiling"}]))


def test_no_registered_model_loads_as_none(registry):
    assert registry.load() is None and registry.champion() is None and registry.versions() == []


def test_versions_are_listed_in_number_order_past_nine(registry, tmp_path):
    registry.client.create_registered_model(MODEL_NAME)
    for _ in range(11):
        registry.client.create_model_version(MODEL_NAME, source=str(tmp_path))
    assert [str(mv.version) for mv in registry.versions()] == [str(v) for v in range(1, 12)]


def test_model_fit_cli_trains_on_profiles_folder_and_store(tmp_path, capsys):
    folder = tmp_path / "profiles"
    export_profiles([ProfileRun(f"{i:032d}", p) for i, p in enumerate(synthetic_profiles(workloads=4))], folder)
    uri = f"sqlite:///{tmp_path / 'cli.db'}"
    args = ["model", "fit", "--profiles", str(folder), "--tracking-uri", uri, "--hparam", "n_estimators=40"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"registered {MODEL_NAME} v1 and moved @champion to it" in out
    assert main(["model", "fit", "--kind", "interp", "--profiles", str(folder), "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "does not beat champion v1" in out and "@champion stays on v1" in out
    scores = ModelRegistry(uri).client.get_run(ModelRegistry(uri).versions()[1].run_id).data.metrics
    assert f"(median APE {scores['cv_median_ape']:.1%} vs {scores['champion_cv_median_ape']:.1%})" in out
    assert main(["model", "list", "--tracking-uri", uri]) == 0
    v1, v2 = capsys.readouterr().out.splitlines()
    # every hyperparameter, the defaults too: the champion is cross-validated again with this spec, so one
    # left to the defaults of a later adlrec would be judged as another model
    spec = json.dumps(LearnedModel(n_estimators=40).spec(), sort_keys=True)
    assert re.fullmatch(rf"v1  {re.escape(spec)}  cv median APE \d+\.\d%  champion", v1), v1
    assert re.fullmatch(r'v2  \{"kind": "interp"\}  cv median APE \d+\.\d%', v2), v2


def test_a_fit_that_beats_the_champion_says_which_version_it_replaced(tmp_path, capsys):
    folder = tmp_path / "profiles"
    export_profiles([ProfileRun(f"{i:032d}", p) for i, p in enumerate(synthetic_profiles(workloads=4))], folder)
    args = ["model", "fit", "--profiles", str(folder), "--tracking-uri", f"sqlite:///{tmp_path / 'b.db'}"]
    assert main([*args, "--kind", "interp"]) == 0
    capsys.readouterr()
    assert main([*args, "--hparam", "n_estimators=40"]) == 0  # learned beats interp here (see the test above)
    assert f"registered {MODEL_NAME} v2 and moved @champion to it (was v1)\n" in capsys.readouterr().out


def test_model_fit_cli_errors(tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'e.db'}"
    assert main(["model", "fit", "--profiles", str(tmp_path / "none"), "--tracking-uri", uri]) == 2
    err = capsys.readouterr().err
    assert (
        err
        == f"adlrec: error: --profiles {tmp_path / 'none'}: no such folder; expected a folder of exported profiles\n"
    )
    assert main(["model", "fit", "--profiles", str(tmp_path), "--tracking-uri", uri]) == 2
    assert "need curves of at least 2 workloads" in capsys.readouterr().err
    assert main(["model", "fit", "--hparam", "depth=3", "--tracking-uri", uri]) == 2
    assert "expected KEY=VALUE with KEY one of n_estimators" in capsys.readouterr().err


def test_predict_falls_back_to_analytic_then_uses_the_champion(tmp_path, tiny_job_path, capsys):
    uri = f"sqlite:///{tmp_path / 'p.db'}"
    base = [
        "predict",
        str(tiny_job_path),
        "--device",
        "emulate:2",
        "--budget",
        "0.4",
        "--max-workers",
        "3",
        "--tracking-uri",
        uri,
        "--data-dir",
        str(tmp_path / "d"),
        "--json",
    ]
    registry = ModelRegistry(uri, artifact_root=tmp_path / "artifacts")  # a store with no model yet
    assert main(base) == 0
    captured = capsys.readouterr()
    assert captured.err.strip() == (
        f"adlrec: no registered model {MODEL_NAME}@champion in {uri}; predicting with the analytic model"
    )
    data = json.loads(captured.out)
    assert data["model"].startswith("analytic") and len(data["predicted"]) == 4
    assert data["probe_budget_share"] == pytest.approx(0.25)  # "at most a quarter of a full sweep's budget"
    curve = data["predicted"]
    assert (data["predicted_max"], data["predicted_best_workers"]) == (max(curve), curve.index(max(curve)))
    assert data["workers_for_95pct"] == next(w for w, t in enumerate(curve) if t >= 0.95 * max(curve))

    fit_and_register(curves_from_profiles(synthetic_profiles(workloads=4)), SPEC, registry, sources="test")
    capsys.readouterr()  # MLflow's own "registered" lines
    assert main(base + ["--compare", "--no-log"]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    data = json.loads(captured.out)
    assert data["model"] == f"{MODEL_NAME}@champion (v1)"
    assert len(data["measured"]) == 4 and all(t > 0 for t in data["measured"])
    assert 0 <= data["workers_for_95pct"] <= data["predicted_best_workers"] <= 3


@pytest.mark.parametrize(
    "hparam, message",
    [
        ("learning_rate=-1", "learning_rate=-1.0: expected a finite number > 0"),
        ("learning_rate=nan", "learning_rate=nan: expected a finite number > 0"),
        ("n_estimators=0", "n_estimators=0: expected a whole number >= 1"),
        ("max_depth=0", "max_depth=0: expected a whole number >= 1"),
        ("subsample=2", "subsample=2.0: expected a number in (0, 1]"),
        ("seed=-5", "seed=-5: expected a whole number in [0, 2**32 - 1]"),
    ],
)
def test_an_out_of_range_hparam_is_one_line_before_anything_is_trained(tmp_path, capsys, hparam, message):
    folder = tmp_path / "profiles"
    export_profiles([ProfileRun(f"{i:032d}", p) for i, p in enumerate(synthetic_profiles(workloads=3))], folder)
    uri = f"sqlite:///{tmp_path / 'h.db'}"
    assert main(["model", "fit", "--profiles", str(folder), "--tracking-uri", uri, "--hparam", hparam]) == 2
    assert capsys.readouterr().err == f"adlrec: error: --hparam {message}\n"
    assert ModelRegistry(uri).versions() == []


def test_fit_skips_what_it_cannot_train_on_says_why_and_never_registers_nan(tmp_path, capsys):
    """A zero throughput logged before import refused it made every score NaN; a sweep to 0 workers has no features."""
    uri = f"sqlite:///{tmp_path / 's.db'}"
    tracker = Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts")
    for p in synthetic_profiles(workloads=3, devices=("emulate:5",)):
        tracker.log_profile(p)
    zero = make_profile(workload="zero")
    tracker.log_profile(replace(zero, points=(zero.points[0], replace(zero.points[1], throughput=0.0), zero.points[2])))
    short = make_profile(throughputs=(10.0,), workload="short")
    tracker.log_profile(short)
    tracker.log_profile(replace(short, workload="short2"))
    folder = tmp_path / "profiles"
    folder.mkdir()
    (folder / "notes.json").write_text('{"name": "my notes"}')

    assert main(["model", "fit", "--kind", "analytic", "--profiles", str(folder), "--tracking-uri", uri]) == 0
    captured = capsys.readouterr()
    skipped = (
        "adlrec: skipped 4 profiles: 2 swept to fewer than 2 workers (the model's features need 0, 1 and 2); "
        f"{folder / 'notes.json'}: not a profile: the key 'device' is missing; "
        "not a valid profile (profile.points[1].throughput (workers=1): expected a number > 0 (samples/s), got 0.0)"
    )
    assert skipped in captured.err.splitlines()  # beside MLflow's own "Successfully registered" lines
    assert "nan" not in captured.out
    (mv,) = ModelRegistry(uri).versions()
    metrics = ModelRegistry(uri).client.get_run(mv.run_id).data.metrics
    assert metrics and all(math.isfinite(v) for v in metrics.values())


def test_fit_says_why_it_found_no_curves(tmp_path, capsys):
    folder = tmp_path / "profiles"
    short = [make_profile(throughputs=(10.0,), workload=w) for w in ("a", "b")]
    export_profiles([ProfileRun(f"{i:032d}", p) for i, p in enumerate(short)], folder)
    uri = f"sqlite:///{tmp_path / 'n.db'}"
    assert main(["model", "fit", "--profiles", str(folder), "--tracking-uri", uri]) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: need curves of at least 2 workloads to cross-validate; found 0 curves of 0 workloads in {folder}/ and "
        f"{uri}; skipped 2 profiles: 2 swept to fewer than 2 workers (the model's features need 0, 1 and 2)\n"
    )
    assert not (tmp_path / "n.db").exists()  # was an empty store left at the (maybe mistyped) path


def test_a_fit_with_nothing_to_train_on_creates_no_store(tmp_path, monkeypatch, capsys):
    """`model fit --tracking-uri sqlite:///typo.db` created an empty store at the typo, then said it found no
    curves there; so did a fit in a folder with neither profiles/ nor .adlrec/."""
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'typo' / 'm.db'}"
    assert main(["model", "fit", "--tracking-uri", uri]) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: need curves of at least 2 workloads to cross-validate; found 0 curves of 0 workloads in {uri}\n"
    )
    assert main(["model", "fit"]) == 2
    assert "found 0 curves of 0 workloads in sqlite:///" in capsys.readouterr().err
    assert sorted(tmp_path.iterdir()) == []


def test_a_champion_whose_artifacts_are_gone_is_one_line_and_the_next_fit_replaces_it(tmp_path, tiny_job_path, capsys):
    uri = f"sqlite:///{tmp_path / 'b.db'}"
    registry = ModelRegistry(uri, artifact_root=tmp_path / "artifacts")
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    fit_and_register(curves, SPEC, registry, sources="test")
    shutil.rmtree(tmp_path / "artifacts")
    with pytest.raises(TrackingError, match=r"adlrec-throughput v1 \(@champion\) in .* cannot be loaded"):
        registry.load()
    capsys.readouterr()

    job = [str(tiny_job_path), "--device", "emulate:2", "--budget", "0.4", "--max-workers", "1"]
    assert main(["predict", *job, "--tracking-uri", uri, "--data-dir", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"adlrec: error: {MODEL_NAME} v1 (@champion) in {uri} cannot be loaded: ")
    assert err.endswith(
        "; its artifacts may have been deleted or moved: `adlrec model fit` registers a new version and moves "
        "@champion to it\n"
    )

    again = fit_and_register(curves, SPEC, registry, sources="test")  # ties v1's score, and replaces it
    assert again.promoted and again.champion_broken == "whose model can no longer be loaded"
    assert again.champion_evaluation.median_ape == again.evaluation.median_ape  # judged all the same, and shown
    assert registry.load()[1] == "2"


def test_a_champion_whose_spec_this_adlrec_cannot_train_is_replaced_and_named(tmp_path):
    uri = f"sqlite:///{tmp_path / 's.db'}"
    registry = ModelRegistry(uri, artifact_root=tmp_path / "artifacts")
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    fit_and_register(curves, SPEC, registry, sources="test")
    # as an adlrec of another version registered it: a kind this one does not have
    registry.client.set_model_version_tag(MODEL_NAME, "1", SPEC_TAG, json.dumps({"kind": "ancient", "depth": 3}))
    again = fit_and_register(curves, SPEC, registry, sources="test")
    assert again.promoted and again.previous_champion == "1" and again.champion_evaluation is None
    assert again.champion_broken.startswith('whose spec {"depth": 3, "kind": "ancient"} this adlrec cannot train: ')
    assert "unknown model kind 'ancient'" in again.champion_broken
    assert registry.champion().version == "2"


def test_a_champion_this_adlrec_cannot_unpickle_is_one_line_and_the_next_fit_replaces_it(
    tmp_path, tiny_job_path, capsys
):
    """A version pickled by another adlrec (a model class it had and this one lacks) raised AttributeError out
    of MLflow's unpickling: a traceback from predict, and from every fit, so the champion could not be replaced."""
    uri = f"sqlite:///{tmp_path / 'u.db'}"
    registry = ModelRegistry(uri, artifact_root=tmp_path / "artifacts")
    fit_and_register(curves_from_profiles(synthetic_profiles(workloads=3)), SPEC, registry, sources="test")
    (pickled,) = (tmp_path / "artifacts").rglob("python_model.pkl")
    pickled.write_bytes(b"cadlrec.predict.models\nModelOfAnotherAdlrec\n.")  # pickle: a class this adlrec lacks
    capsys.readouterr()

    job = [str(tiny_job_path), "--device", "emulate:2", "--budget", "0.4", "--max-workers", "1"]
    assert main(["predict", *job, "--tracking-uri", uri, "--data-dir", str(tmp_path / "d")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"adlrec: error: {MODEL_NAME} v1 (@champion) in {uri} cannot be loaded: AttributeError: ")
    assert "written by another version of adlrec" in err

    folder = tmp_path / "profiles"
    export_profiles([ProfileRun(f"{i:032d}", p) for i, p in enumerate(synthetic_profiles(workloads=3))], folder)
    fit = ["model", "fit", "--profiles", str(folder), "--tracking-uri", uri, "--hparam", "n_estimators=40"]
    assert main(fit) == 0
    out = capsys.readouterr().out
    assert "moved @champion to it (was v1, whose model can no longer be loaded)" in out
    assert registry.load()[1] == "2"


def test_a_champion_that_loads_but_cannot_predict_is_one_line_before_the_probe_and_the_next_fit_replaces_it(
    tmp_path, tiny_job_path, capsys
):
    """A version an adlrec with other features pickled (its estimator expecting other columns) loaded, and
    `adlrec predict` ended in sklearn's ValueError traceback after the probe; a fit kept it as champion."""
    uri = f"sqlite:///{tmp_path / 'o.db'}"
    registry = ModelRegistry(uri, artifact_root=tmp_path / "artifacts")
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    assert register_model_of_other_features(registry, curves) == "1"
    with pytest.raises(TrackingError, match=r"v1 \(@champion\) .* loads but cannot predict a test probe: ValueError"):
        registry.load()
    capsys.readouterr()

    job = [str(tiny_job_path), "--device", "emulate:2", "--budget", "0.4", "--max-workers", "1"]
    assert main(["predict", *job, "--tracking-uri", uri, "--data-dir", str(tmp_path / "d")]) == 1
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err and out == ""
    assert err.startswith(
        f"adlrec: error: {MODEL_NAME} v1 (@champion) in {uri} loads but cannot predict a test probe: "
    )
    assert "X has 12 features" in err and "written by another version of adlrec" in err

    again = fit_and_register(curves, SPEC, registry, sources="test")
    assert again.promoted and again.champion_broken == "whose model can no longer be loaded"
    assert registry.load()[1] == "2"


@pytest.mark.parametrize("tag", [None, "not json", "[]"])
def test_a_champion_adlrec_did_not_register_is_listed_and_replaced_by_the_next_fit(tmp_path, capsys, tag):
    """A champion with no readable adlrec.spec tag (registered under adlrec's name by hand or another tool) made
    `model list` and every `model fit` exit 1, so nothing in adlrec could list or replace it."""
    uri = f"sqlite:///{tmp_path / 'f.db'}"
    registry = ModelRegistry(uri, artifact_root=tmp_path / "artifacts")
    fit_and_register(curves_from_profiles(synthetic_profiles(workloads=3)), SPEC, registry, sources="test")
    if tag is None:
        registry.client.delete_model_version_tag(MODEL_NAME, "1", SPEC_TAG)
    else:
        registry.client.set_model_version_tag(MODEL_NAME, "1", SPEC_TAG, tag)
    registry.client.set_model_version_tag(MODEL_NAME, "1", "cv_median_ape", "n/a")
    capsys.readouterr()

    assert main(["model", "list", "--tracking-uri", uri]) == 0
    spec = tag or "(no adlrec.spec: not registered by adlrec)"
    assert capsys.readouterr().out == f"v1  {spec}  cv median APE ?  champion\n"

    folder = tmp_path / "profiles"
    export_profiles([ProfileRun(f"{i:032d}", p) for i, p in enumerate(synthetic_profiles(workloads=3))], folder)
    assert main(["model", "fit", "--kind", "analytic", "--profiles", str(folder), "--tracking-uri", uri]) == 0
    out = capsys.readouterr().out
    assert "moved @champion to it (was v1, which has no adlrec.spec tag: it was not registered by adlrec)" in out
    assert registry.champion().version == "2" and [str(mv.version) for mv in registry.versions()] == ["1", "2"]


@pytest.mark.parametrize("what", ["a text file", "a folder"])
def test_a_tracking_uri_that_is_no_database_is_one_line_exit_2_and_is_left_alone(tmp_path, tiny_job_path, capsys, what):
    """sqlite:/// of a file that is not SQLite was a SQLAlchemy traceback (exit 1); of a folder, 100 s of
    MLflow's retry warnings and then that traceback."""
    path = tmp_path / "notes.db"
    if what == "a folder":
        path.mkdir()
    else:
        path.write_text("my notes\n")
    uri = f"sqlite:///{path}"
    job = [str(tiny_job_path), "--device", "emulate:2", "--budget", "0.4", "--max-workers", "1"]
    for argv in (["model", "list"], ["model", "fit"], ["predict", *job, "--data-dir", str(tmp_path / "d")]):
        assert main([*argv, "--tracking-uri", uri]) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"adlrec: error: tracking store {uri!r}: "), err
        assert "expected sqlite:///path/mlflow.db" in err
    if what == "a folder":
        assert list(path.iterdir()) == []
    else:
        assert path.read_text() == "my notes\n"


def test_fits_started_together_on_a_new_store_all_register(tmp_path):
    """Each fit opened the new SQLite store and migrated it, and created experiment adlrec-models: started
    together, all but one failed (an alembic traceback, 'duplicate column name', 'experiment already exists')."""
    import subprocess
    import sys

    folder = tmp_path / "profiles"
    export_profiles([ProfileRun(f"{i:032d}", p) for i, p in enumerate(synthetic_profiles(workloads=3))], folder)
    uri = f"sqlite:///{tmp_path / 'new' / 'mlflow.db'}"
    argv = [sys.executable, "-m", "adlrec.cli", "model", "fit", "--kind", "analytic", "--profiles", str(folder)]
    fits = [
        subprocess.Popen(
            [*argv, "--tracking-uri", uri, "--data-dir", str(tmp_path / "d")],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    done = [(p.wait(timeout=240), p.stderr.read()) for p in fits]
    assert [rc for rc, _ in done] == [0, 0, 0, 0], [err[-600:] for _, err in done]
    assert sorted(int(mv.version) for mv in ModelRegistry(uri).versions()) == [1, 2, 3, 4]


def test_an_experiment_another_command_creates_between_lookup_and_create_is_used(tmp_path):
    """The race of the test above, made certain: this command finds no experiment, another creates it, this
    one's create fails ("already exists"); it takes the other's."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'r.db'}"

    class LateClient(MlflowClient):  # the real store; another command creates the experiment after the lookup
        def get_experiment_by_name(self, name):
            found = super().get_experiment_by_name(name)
            if found is None and not hasattr(self, "other"):
                self.other = Tracker(uri, name).experiment_id()
            return found

    tracker = Tracker(uri, "adlrec-models")
    tracker.client = LateClient(tracking_uri=uri, registry_uri=uri)
    assert tracker.experiment_id() == tracker.client.other


def test_a_fit_judges_the_champion_another_fit_set_while_it_registered(tmp_path):
    """A fit compared itself with the champion it saw when it started: a better fit that finished in between
    lost @champion to it (here: interp took the alias from learned, though it scores worse)."""
    uri = f"sqlite:///{tmp_path / 'r.db'}"
    curves = curves_from_profiles(synthetic_profiles(workloads=4))

    class RacedRegistry(ModelRegistry):  # the real store; another fit finishes while this one registers
        def register(self, *args, **kwargs):
            registered = super().register(*args, **kwargs)
            other = fit_and_register(curves, SPEC, ModelRegistry(uri, artifact_root=tmp_path / "a"), sources="other")
            assert other.promoted and other.version == "2"
            return registered

    slow = fit_and_register(curves, {"kind": "interp"}, RacedRegistry(uri, artifact_root=tmp_path / "a"), sources="t")
    assert slow.version == "1" and slow.previous_champion == "2"
    assert slow.evaluation.median_ape > slow.champion_evaluation.median_ape and not slow.promoted
    assert ModelRegistry(uri).champion().version == "2"


def test_model_fit_leaves_stderr_to_adlrec(tmp_path, capsys):
    """MLflow's "Successfully registered model", "... already exists. Creating a new version" and "Created
    version" lines came on stderr beside the stdout line that already says which version was registered."""
    folder = tmp_path / "profiles"
    export_profiles([ProfileRun(f"{i:032d}", p) for i, p in enumerate(synthetic_profiles(workloads=3))], folder)
    fit = [
        "model",
        "fit",
        "--kind",
        "analytic",
        "--profiles",
        str(folder),
        "--tracking-uri",
        f"sqlite:///{tmp_path / 'q.db'}",
    ]
    for version in (1, 2):
        assert main(fit) == 0
        captured = capsys.readouterr()
        assert captured.err == "" and f"registered {MODEL_NAME} v{version}" in captured.out


HPARAM_KEYS = "expected KEY=VALUE with KEY one of n_estimators, max_depth, learning_rate, subsample, seed"


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--hparam", "max_depth=0"], "--hparam max_depth=0: expected a whole number >= 1"),
        (["--kind", "interp", "--hparam", "max_depth=2"], "--hparam applies to --kind learned only"),
        (["--profiles", "missing"], "--profiles missing: no such folder; expected a folder of exported profiles"),
        (["--profiles", "a.json"], "--profiles a.json: a file, not a folder; expected a folder of exported profiles"),
        (["--hparam", "kind=interp"], f"--hparam 'kind=interp': {HPARAM_KEYS}"),
        (["--hparam", "max_depth"], f"--hparam 'max_depth': {HPARAM_KEYS}"),
        (["--hparam", "max_depth=two"], "--hparam 'max_depth=two': 'two' is not a valid int"),
    ],
)
def test_a_mistyped_fit_flag_creates_no_store(tmp_path, monkeypatch, capsys, flags, message):
    """The store (mlflow.db, its folder) was created before the flags were checked."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.json").write_text("{}")
    assert main(["model", "fit", *flags, "--data-dir", str(tmp_path / "new")]) == 2
    assert capsys.readouterr().err == f"adlrec: error: {message}\n"
    assert not (tmp_path / "new").exists()


def test_predict_no_log_without_compare_is_a_usage_error(tmp_path, tiny_job_path, capsys):
    """--no-log ("with --compare: do not log the sweep") was accepted alone and did nothing."""
    argv = ["predict", str(tiny_job_path), "--no-log", "--data-dir", str(tmp_path / "d")]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        "adlrec: error: --no-log applies to --compare only (without it, predict logs nothing)\n"
    )
    assert not (tmp_path / "d").exists()


def test_fit_with_curves_of_one_workload_counts_them_in_words(tmp_path, capsys):
    """It said 'found 1 curves of 1 in ...'."""
    folder = tmp_path / "profiles"
    export_profiles([ProfileRun("0" * 32, synthetic_profiles(workloads=1)[0])], folder)
    uri = f"sqlite:///{tmp_path / 'o.db'}"
    assert main(["model", "fit", "--profiles", str(folder), "--tracking-uri", uri]) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: need curves of at least 2 workloads to cross-validate; found 1 curve of 1 workload in "
        f"{folder}/ and {uri}\n"
    )


def test_fit_trains_on_the_profiles_folder_here_by_default_and_two_workloads_are_enough(tmp_path, capsys):
    export_profiles(
        [ProfileRun(f"{i:032d}", p) for i, p in enumerate(synthetic_profiles(workloads=2))], tmp_path / "profiles"
    )
    uri = f"sqlite:///{tmp_path / 'd.db'}"
    assert main(["model", "fit", "--kind", "analytic", "--tracking-uri", uri, "--data-dir", str(tmp_path / "d")]) == 0
    assert f"registered {MODEL_NAME} v1 and moved @champion to it" in capsys.readouterr().out


def test_predict_compare_prints_the_probes_share_of_the_sweeps_time_and_what_the_sweep_measured(tiny_job_path, capsys):
    argv = ["predict", str(tiny_job_path), "--device", "emulate:2", "--budget", "0.4", "--max-workers", "1"]
    assert main([*argv, "--compare", "--no-log"]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert re.fullmatch(
        r"probe: \d+\.\d s; full sweep: \d+\.\d s \(\d+% of it\); median APE \d+\.\d%; measured best [\d,.]+ at "
        r"\d workers?, predicted best w=\d reaches \d+% of it",
        last,
    ), last


def test_predict_prints_the_model_it_used_and_the_predicted_best_and_fewest_reaching_95pct(tiny_job_path, capsys):
    """The default store before anything was logged (the current folder's .adlrec): the analytic model."""
    argv = ["predict", str(tiny_job_path), "--device", "emulate:2", "--budget", "0.4", "--max-workers", "2"]
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[-3] == "model: analytic model (no registered model)"
    assert re.fullmatch(r"predicted max [\d,.]+ samples/s at \d workers?; \d workers? reach(es)? 95% of it", lines[-2])
    assert re.fullmatch(r"probe: \d+\.\d s", lines[-1])


def test_a_champion_that_predicts_no_finite_throughput_is_refused_with_one_line(tmp_path):
    """A damaged model that loads and predicts NaN would give every job of the service a curve of NaN."""
    registry = ModelRegistry(f"sqlite:///{tmp_path / 'n.db'}", artifact_root=tmp_path / "artifacts")
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    model = make_model({"kind": "learned", "n_estimators": 5}).fit(
        [c.features for c in curves], [c.throughput for c in curves]
    )
    model.estimator.init_.constant_[:] = np.nan  # its learned start: every prediction NaN
    example = curves[0].features.to_dict() | {"workers": 1}
    _, version = registry.register(model, cross_validate({"kind": "analytic"}, curves), params={}, example=example)
    registry.set_champion(version)
    with pytest.raises(TrackingError, match=r"v1 \(@champion\) .* loads but cannot predict a test probe: ValueError: "):
        registry.load()
    assert not registry.loadable()


def test_predict_with_a_champion_that_fails_on_this_jobs_probe_is_one_line_naming_it(tmp_path, tiny_job_path, capsys):
    """A champion that predicts the test probe (cuda) but raises on this job's (emulate) ended `adlrec predict`
    in the model's traceback, after the probe."""
    from tests.factories import register_narrow_champion

    uri = f"sqlite:///{tmp_path / 'w.db'}"
    registry = ModelRegistry(uri, artifact_root=tmp_path / "artifacts")
    register_narrow_champion(registry, curves_from_profiles(synthetic_profiles(workloads=3)), (100.0, 200.0))
    capsys.readouterr()
    job = [str(tiny_job_path), "--device", "emulate:2", "--budget", "0.4", "--max-workers", "1"]
    assert main(["predict", *job, "--tracking-uri", uri, "--data-dir", str(tmp_path / "d")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "Traceback" not in err
    assert err == (
        f"adlrec: error: {MODEL_NAME} v1 (@champion) in {uri} cannot predict this job's probe: ValueError: unknown "
        "device_kind 'emulate': trained on cuda only; `adlrec model fit` registers a new version and moves "
        "@champion to it\n"
    )


def test_predict_reads_a_champions_throughput_below_zero_or_not_finite_as_none_as_the_service_does(
    tmp_path, tiny_job_path, capsys
):
    """A champion adlrec did not fit may predict below 0 or not finite at counts the test probe does not ask: all
    of them below 0 ended `adlrec predict` in a StopIteration traceback, an infinity printed as its maximum."""
    from tests.factories import register_scripted_champion

    uri = f"sqlite:///{tmp_path / 's.db'}"
    registry = ModelRegistry(uri, artifact_root=tmp_path / "artifacts")
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    job = [str(tiny_job_path), "--device", "emulate:2", "--budget", "0.4", "--max-workers", "5", "--json"]
    argv = ["predict", *job, "--tracking-uri", uri, "--data-dir", str(tmp_path / "d")]
    for scripted, read, enough in [  # finite at 0, 1, 2 and past the end: it passes the test probe
        ((-5.0, -1.0, -2.0, -3.0, -4.0, -6.0), [0.0] * 6, 0),
        ((100.0, 150.0, 200.0, float("inf"), float("nan"), 300.0), [100.0, 150.0, 200.0, 0.0, 0.0, 300.0], 5),
        # its best at the last count; 1 worker reaches 90% of it, 2 the 95% that counts
        ((100.0, 190.0, 200.0, 205.0, 208.0, 210.0), [100.0, 190.0, 200.0, 205.0, 208.0, 210.0], 2),
    ]:
        register_scripted_champion(registry, curves, scripted)
        capsys.readouterr()
        assert main(argv) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["predicted"] == read
        assert (data["predicted_max"], data["predicted_best_workers"]) == (max(read), read.index(max(read)))
        assert data["workers_for_95pct"] == enough
