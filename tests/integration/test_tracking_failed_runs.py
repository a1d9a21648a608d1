"""A run whose logging fails is marked FAILED (never read back as a result), and the error says what failed."""

from __future__ import annotations

import logging
import sqlite3

import pytest
from mlflow.exceptions import MlflowException

from adlrec.errors import TrackingError
from adlrec.predict.evaluate import curves_from_profiles
from adlrec.predict.fit import fit_and_register
from adlrec.tracking import COMPLETE_TAG, ModelRegistry, Tracker, _failed_run_on_error, log_simulation
from tests.factories import make_profile, synthetic_profiles


@pytest.fixture
def tracker(tmp_path):
    return Tracker(f"sqlite:///{tmp_path / 'm.db'}", "runs", artifact_root=tmp_path / "artifacts")


def _run(tracker: Tracker) -> str:
    return tracker.client.create_run(tracker.experiment_id()).info.run_id


def test_a_stores_error_is_one_tracking_error_and_the_run_is_marked_failed(tracker):
    run_id = _run(tracker)
    with (
        pytest.raises(TrackingError) as caught,
        _failed_run_on_error(tracker.client, run_id, f"could not log {run_id}"),
    ):
        raise MlflowException("the store went away\nand a second line")
    assert (
        str(caught.value) == f"could not log {run_id}: MlflowException: the store went away; the run is marked FAILED"
    )
    assert tracker.client.get_run(run_id).info.status == "FAILED"


def test_any_other_error_comes_out_as_it_was_and_the_run_is_marked_failed(tracker):
    run_id = _run(tracker)
    with pytest.raises(KeyboardInterrupt), _failed_run_on_error(tracker.client, run_id, "could not log"):
        raise KeyboardInterrupt  # Ctrl-C while logging: the run is not left RUNNING
    assert tracker.client.get_run(run_id).info.status == "FAILED"


def test_a_run_the_store_cannot_mark_either_keeps_the_first_error_and_says_so(tracker, caplog):
    """Before, log_simulation's mark raised from inside the handler: the store's second error, a traceback,
    replaced the first, and its message said nothing of the run."""
    gone = "0" * 32  # a run the store does not have: marking it FAILED fails
    with caplog.at_level(logging.WARNING, logger="adlrec"):
        with pytest.raises(TrackingError) as caught, _failed_run_on_error(tracker.client, gone, "could not log"):
            raise OSError("No space left on device")
    message = str(caught.value)
    assert message.startswith("could not log: OSError: No space left on device; the run could not be marked FAILED")
    assert "\n" not in message and isinstance(caught.value.__cause__, OSError)
    assert any(f"could not mark run {gone} FAILED either" in r.getMessage() for r in caplog.records)


def test_a_model_that_cannot_be_stored_registers_no_version_and_its_run_is_marked_failed(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the artifact folder should be")
    registry = ModelRegistry(f"sqlite:///{tmp_path / 'm.db'}", artifact_root=blocker / "artifacts")
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    with pytest.raises(TrackingError) as caught:
        fit_and_register(curves, {"kind": "interp"}, registry, sources="test")
    message = str(caught.value)
    assert message.startswith("could not register the model from run ") and "\n" not in message
    assert message.endswith("; the run is marked FAILED")
    assert registry.versions() == []
    (run,) = registry.client.search_runs([registry.models.experiment_id()])
    assert run.info.status == "FAILED"


@pytest.mark.parametrize(
    ("tagged", "status"),
    [(False, "FINISHED"), (True, "FAILED"), (True, "KILLED")],
    ids=["finished without the complete tag", "complete tag then failed", "complete tag then killed"],
)
def test_only_a_run_both_tagged_complete_and_finished_is_read_back(tracker, tagged, status):
    """A run that ended FINISHED without the tag (another tool's, in the same experiment), or was marked FAILED
    after its tag was logged (its set_terminated(FINISHED) failed), is not a profile."""
    run_id = _run(tracker)
    if tagged:
        tracker.client.set_tag(run_id, COMPLETE_TAG, "true")
    tracker.client.set_terminated(run_id, status)
    assert tracker.runs() == [] and tracker.profiles() == []
    assert [r.info.run_id for r in tracker.runs(include_incomplete=True)] == [run_id]


def test_a_store_that_cannot_create_a_run_is_one_tracking_error_from_every_writer(tmp_path):
    """Before, a fit (`model fit`) and a simulation (`simulate --log-mlflow`) let the store's MlflowException out
    as a traceback; a profile said it in one line, but that line was SQLAlchemy's "(raised as a result of
    Query-invoked autoflush; ...)", not why the run could not be created."""
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    tracker = Tracker(uri, "runs", artifact_root=tmp_path / "artifacts")
    registry = ModelRegistry(uri, artifact_root=tmp_path / "artifacts")
    experiments = [tracker.experiment_id(), registry.models.experiment_id()]
    with sqlite3.connect(tmp_path / "m.db") as db:  # the store refuses every new run, as a full disk would
        db.execute(
            "CREATE TRIGGER full BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END"
        )
    curves = curves_from_profiles(synthetic_profiles(workloads=3))
    writers = {
        "profile": lambda: tracker.log_profile(make_profile()),
        "simulation": lambda: log_simulation(tracker, {"policies": "even"}, [], "policy\n"),
        "fit": lambda: fit_and_register(curves, {"kind": "interp"}, registry, sources="test"),
    }
    for name, write in writers.items():
        with pytest.raises(TrackingError) as caught:
            write()
        assert str(caught.value) == (
            f"could not create a run in {uri}: MlflowException: (sqlite3.IntegrityError) database or disk is full"
        ), name
    assert tracker.client.search_runs(experiments) == [] and registry.versions() == []
