"""A store folder or --out that cannot be created is the user's setting: one line, exit 2, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from adlrec.cli import main
from adlrec.config import load_settings
from adlrec.errors import UsageError
from adlrec.folders import ensure_folder
from adlrec.service.store import JobStore
from tests.factories import make_profile


def test_ensure_folder_creates_parents_and_names_what_cannot_be_a_folder(tmp_path):
    deep = tmp_path / "a" / "b"
    assert ensure_folder(deep, "the folder") == deep and deep.is_dir()
    assert ensure_folder(deep, "the folder") == deep  # already there: fine
    (tmp_path / "file").write_text("x")
    with pytest.raises(UsageError) as err:
        ensure_folder(tmp_path / "file" / "sub", "the store's folder", "--data-dir")
    assert str(err.value) == (
        f"cannot create the store's folder {tmp_path / 'file' / 'sub'}: Not a directory; "
        "expected a folder adlrec may write to (set by --data-dir)"
    )
    with pytest.raises(UsageError) as err:  # mkdir said 'File exists', as if the folder were there
        ensure_folder(tmp_path / "file", "--out")
    assert (
        str(err.value)
        == f"cannot create --out {tmp_path / 'file'}: it is a file; expected a folder adlrec may write to"
    )


def test_a_data_dir_under_a_file_is_one_line_and_exit_2(tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    assert main(["model", "fit", "--data-dir", str(blocker / "store")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"cannot create the MLflow store's folder {blocker / 'store'}: Not a directory" in err
    assert "(set by --data-dir)" in err
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("command", [["profiles", "list"], ["profiles", "export", "--out", "out"], ["model", "list"]])
def test_reading_commands_read_a_data_dir_under_a_file_as_no_store_and_create_nothing(
    tmp_path, monkeypatch, capsys, command
):
    monkeypatch.chdir(tmp_path)
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    data = blocker / "store"
    assert main([*command, "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no MLflow store at sqlite:///{data / 'mlflow.db'} (set by --data-dir)" in err
    assert blocker.read_text() == "not a folder" and not (tmp_path / "out").exists()


def test_the_service_store_under_a_file_is_a_usage_error(tmp_path):
    (tmp_path / "afile").write_text("x")
    settings = load_settings(data_dir=tmp_path / "afile" / "data")
    with pytest.raises(UsageError, match="cannot create the job store's folder .*: Not a directory"):
        JobStore(settings.resolved_store_url)


def test_export_to_an_out_that_cannot_be_a_folder_writes_nothing(tmp_path, capsys):
    from adlrec.tracking import Tracker

    uri = f"sqlite:///{tmp_path / 'm.db'}"
    Tracker(uri, "adlrec-profiles", tmp_path / "artifacts").log_profile(make_profile())  # not ./mlruns
    (tmp_path / "afile").write_text("x")
    out = tmp_path / "afile" / "profiles"
    assert main(["profiles", "export", "--tracking-uri", uri, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"adlrec: error: cannot create --out {out}: Not a directory; expected a folder adlrec may write to\n"


def test_profile_without_logging_names_the_datasets_folder_not_model_py(tiny_job_path, tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    data = tmp_path / "afile" / "data"
    argv = ["profile", str(tiny_job_path), "--no-log", "--data-dir", str(data), "--device", "emulate:1"]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: cannot create the datasets folder {data / 'datasets'}: Not a directory; "
        "expected a folder adlrec may write to (set by --data-dir or ADLREC_DATA_DIR)\n"
    )


STORE_ORIGINS = ["--tracking-uri", "MLFLOW_TRACKING_URI", "ADLREC_TRACKING_URI", "--data-dir", "ADLREC_DATA_DIR", ""]


def _store_chosen_by(origin: str, data: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Point the store at ``data``/mlflow.db through ``origin`` ("": the default, .adlrec in the current folder);
    the flags to add to a command."""
    uri = f"sqlite:///{data / 'mlflow.db'}"
    if origin in ("MLFLOW_TRACKING_URI", "ADLREC_TRACKING_URI"):
        monkeypatch.setenv(origin, uri)
    if origin == "ADLREC_TRACKING_URI":  # which wins over MLflow's own variable, as Settings reads them
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{data.parent / 'not-this.db'}")
    elif origin == "ADLREC_DATA_DIR":
        monkeypatch.setenv(origin, str(data))
    return {"--tracking-uri": ["--tracking-uri", uri], "--data-dir": ["--data-dir", str(data)]}.get(origin, [])


@pytest.mark.parametrize("command", [["profiles", "list"], ["model", "list"], ["profiles", "import", "p.json"]])
@pytest.mark.parametrize("origin", STORE_ORIGINS)
def test_a_store_that_is_a_folder_names_what_chose_it(tmp_path, monkeypatch, capsys, command, origin):
    """It said '(set by --tracking-uri or MLFLOW_TRACKING_URI)' whatever chose the path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "p.json").write_text(json.dumps(make_profile().to_dict()))
    data = tmp_path / ".adlrec" if origin == "" else tmp_path / "data"
    (data / "mlflow.db").mkdir(parents=True)
    flags = _store_chosen_by(origin, data, monkeypatch)
    before = sorted(tmp_path.rglob("*"))
    assert main([*command, *flags]) == 2
    set_by = origin or "default: --data-dir or ADLREC_DATA_DIR chooses another"
    assert capsys.readouterr().err == (
        f"adlrec: error: tracking store 'sqlite:///{data / 'mlflow.db'}': a folder, not a database file; expected "
        f"sqlite:///path/mlflow.db (set by {set_by})\n"
    )
    assert sorted(tmp_path.rglob("*")) == before


@pytest.mark.parametrize("origin", ["--data-dir", "ADLREC_DATA_DIR"])
def test_a_store_that_is_not_a_database_names_what_chose_it(tmp_path, monkeypatch, capsys, origin):
    data = tmp_path / "data"
    data.mkdir()
    (data / "mlflow.db").write_text("notes, not a database\n" * 10)
    flags = _store_chosen_by(origin, data, monkeypatch)
    assert main(["profiles", "list", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"adlrec: error: tracking store 'sqlite:///{data / 'mlflow.db'}': cannot be opened as an")
    assert err.endswith(f"(set by {origin})\n") and err.count("\n") == 1
    assert (data / "mlflow.db").read_text() == "notes, not a database\n" * 10
