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
    given = load_settings(service_port=0, service_live_runs=False)  # `serve --port 0`: any free port
    assert given.service_port == 0 and given.service_live_runs is False


def test_the_service_accepts_every_policy_there_is_and_no_other():
    from typing import get_args

    from adlrec.allocate import POLICIES
    from adlrec.config import Settings

    assert set(get_args(Settings.model_fields["service_policy"].annotation)) == set(POLICIES)


def test_adlrecs_own_tracking_uri_variable_is_honoured_and_wins_over_mlflows(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.example:5000")
    monkeypatch.setenv("ADLREC_TRACKING_URI", "http://adlrec.example:5000")
    assert load_settings().resolved_tracking_uri == "http://adlrec.example:5000"


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("rse_target", "2", "less than 1"),
        ("rse_target", "1", "less than 1"),
        ("rse_target", "0", "greater than 0"),
        ("point_budget_s", "0", "greater than 0"),
        ("warmup_s", "-0.1", "greater than or equal to 0"),
        ("min_batches", "1", "greater than or equal to 2"),
        ("fetch_sample_files", "0", "greater than or equal to 1"),
        ("worker_timeout_s", "0", "greater than 0"),
        ("service_port", "65536", "less than or equal to 65535"),
        ("service_objective", "speed", "'busy_gpus', 'throughput' or 'weighted'"),
        ("service_threshold", "1.5", "less than or equal to 1"),
        ("service_interval_s", "0", "greater than 0"),
        ("service_debounce_s", "-1", "greater than or equal to 0"),
        ("service_ttl_s", "0", "greater than 0"),
        ("service_max_body_bytes", "1023", "greater than or equal to 1024"),
        ("service_node_cores", "-1", "greater than or equal to 0"),
        ("service_node_memory_mb", "-1", "greater than or equal to 0"),
        ("service_max_workers", "0", "greater than or equal to 1"),
        ("service_max_workers", "257", "less than or equal to 256"),
        ("service_measure_alpha", "0", "greater than 0"),
        ("service_measure_alpha", "1.5", "less than or equal to 1"),
    ],
)
def test_a_value_out_of_range_is_refused_naming_the_setting_and_its_range(monkeypatch, field, value, expected):
    from pydantic import ValidationError

    monkeypatch.setenv(f"ADLREC_{field.upper()}", value)
    with pytest.raises(ValidationError) as err:
        load_settings()
    (error,) = err.value.errors()
    assert error["loc"] == (field,) and expected in error["msg"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("warmup_s", 0.0),
        ("min_batches", 2),
        ("fetch_sample_files", 1),
        ("service_port", 0),
        ("service_threshold", 0.0),
        ("service_threshold", 1.0),
        ("service_debounce_s", 0.0),
        ("service_max_body_bytes", 1024),
        ("service_max_workers", 1),
        ("service_max_workers", 256),
        ("service_measure_alpha", 1.0),
    ],
)
def test_the_ends_of_each_range_are_accepted(field, value):
    assert getattr(load_settings(**{field: value}), field) == value


def test_the_documented_defaults_are_the_defaults():
    from adlrec.config import Settings

    s = Settings()
    assert s.worker_timeout_s == 120  # README
    assert (s.warmup_s, s.min_batches, s.fetch_sample_files) == (0.5, 20, 256)  # docs/profiling.md
    assert (s.service_policy, s.service_objective, s.service_threshold) == ("optimal", "busy_gpus", 0.05)
    assert (s.service_interval_s, s.service_debounce_s, s.service_ttl_s) == (30, 1, 120)  # docs/service.md
    assert (s.service_max_workers, s.service_measure_alpha, s.service_max_body_bytes) == (32, 0.5, 64 * 1024)
    assert s.service_model_alias == "champion"
    assert s.service_recompute_process and s.service_fast_heartbeat and s.service_live_runs  # on by default


def test_the_stores_are_absolute_paths_in_the_data_dir_unless_named(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = load_settings()
    assert s.artifact_root == tmp_path / ".adlrec" / "artifacts"
    assert s.resolved_store_url == f"sqlite:///{tmp_path / '.adlrec' / 'service.db'}"
    assert s.datasets_dir == Path(".adlrec") / "datasets"  # README: <data-dir>/datasets
    named = load_settings(service_store_url="sqlite:////srv/jobs.db", service_webapp_dir=tmp_path / "ui")
    assert named.resolved_store_url == "sqlite:////srv/jobs.db" and named.resolved_webapp_dir == tmp_path / "ui"


@pytest.mark.parametrize(
    ("uri", "path"),
    [
        ("sqlite:////abs/mlflow.db", Path("/abs/mlflow.db")),
        ("sqlite:///rel/mlflow.db", Path("rel/mlflow.db")),
        ("sqlite:///mlflow.db?timeout=30", Path("mlflow.db")),
        ("sqlite://", None),
        ("http://mlflow.example:5000", None),
    ],
)
def test_sqlite_file_is_the_database_file_a_sqlite_uri_names(uri, path):
    from adlrec.config import sqlite_file

    assert sqlite_file(uri) == path


def test_an_override_that_names_no_setting_is_refused():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="tracking_url"):
        load_settings(tracking_url="http://typo:5000")


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_data_dir_is_refused_not_read_as_the_current_folder(tmp_path, monkeypatch, capsys, value):
    """`ADLREC_DATA_DIR=$(cat missing-file)` put mlflow.db, artifacts/ and datasets/ wherever the command ran."""
    import json

    from adlrec.cli import main
    from tests.factories import make_profile

    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(make_profile().to_dict()))
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    monkeypatch.setenv("ADLREC_DATA_DIR", value)
    assert main(["profiles", "import", str(profile)]) == 2  # it made a store here, in the current folder
    assert capsys.readouterr().err == (
        "adlrec: error: setting data_dir: is empty; expected a folder, or unset it for the default, .adlrec "
        "(from ADLREC_DATA_DIR or its flag)\n"
    )
    monkeypatch.delenv("ADLREC_DATA_DIR")
    with pytest.raises(SystemExit) as exc:
        main(["profiles", "list", "--data-dir", value])
    assert exc.value.code == 2 and f"argument --data-dir: expected a folder, got {value!r}" in capsys.readouterr().err
    assert list(here.iterdir()) == []


def test_a_refused_setting_is_one_line_naming_its_variable():
    from pydantic import ValidationError

    from adlrec.config import settings_problem

    with pytest.raises(ValidationError) as err:
        load_settings(point_budget_s=-1)
    says = "setting point_budget_s: Input should be greater than 0 (from ADLREC_POINT_BUDGET_S"
    assert settings_problem(err.value) == says + " or its flag)"
    assert settings_problem(err.value, flags=False) == says + ")"
