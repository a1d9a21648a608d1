"""A store folder or --out that cannot be created is the user's setting: one line, exit 2, nothing written."""

from __future__ import annotations

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


def test_a_data_dir_under_a_file_is_one_line_and_exit_2(tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    assert main(["model", "fit", "--data-dir", str(blocker / "store")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"cannot create the MLflow store's folder {blocker / 'store'}: Not a directory" in err
    assert "--data-dir, ADLREC_DATA_DIR or --tracking-uri" in err
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
    Tracker(uri, "adlrec-profiles").log_profile(make_profile())
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
