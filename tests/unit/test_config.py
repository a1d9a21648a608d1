from pathlib import Path

import pytest

from adlrec.config import load_settings


def test_defaults_use_an_embedded_sqlite_store_in_the_data_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.resolved_tracking_uri == f"sqlite:///{tmp_path / '.adlrec' / 'mlflow.db'}"
    assert s.experiment == "adlrec-profiles"


def test_env_prefix_and_mlflow_tracking_uri_are_honoured(monkeypatch):
    monkeypatch.setenv("ADLREC_DATA_DIR", "/tmp/somewhere")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    s = load_settings()
    assert s.data_dir == Path("/tmp/somewhere")
    assert s.resolved_tracking_uri == "http://mlflow.example:5000"


def test_explicit_overrides_win_and_none_means_not_given(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://env:5000")
    s = load_settings(tracking_uri="sqlite:////x.db", experiment=None)
    assert s.resolved_tracking_uri == "sqlite:////x.db"
    assert s.experiment == "adlrec-profiles"


def test_invalid_values_are_rejected(monkeypatch):
    from pydantic import ValidationError

    monkeypatch.setenv("ADLREC_RSE_TARGET", "2")
    with pytest.raises(ValidationError):
        load_settings()


def test_the_service_accepts_every_policy_there_is_and_no_other():
    from typing import get_args

    from adlrec.allocate import POLICIES
    from adlrec.config import Settings

    assert set(get_args(Settings.model_fields["service_policy"].annotation)) == set(POLICIES)
