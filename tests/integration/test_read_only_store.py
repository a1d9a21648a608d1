"""Commands that only read the MLflow store never create one, and no command lets MLflow migrate another
program's SQLite database; a missing model.py is refused before any folder is made."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from adlrec.cli import main
from adlrec.errors import UsageError
from adlrec.tracking import MODEL_NAME, Tracker, check_sqlite_store
from tests.factories import make_profile

PROBE = ["--device", "emulate:2", "--budget", "0.4", "--max-workers", "1"]


def _tree(root: Path) -> list[Path]:
    return sorted(p.relative_to(root) for p in root.rglob("*"))


def _reading_commands(tmp_path: Path, tiny_job_path: Path) -> dict[str, list[str]]:
    return {
        "profiles list": ["profiles", "list"],
        "profiles export": ["profiles", "export", "--out", str(tmp_path / "exported")],
        "model list": ["model", "list"],
        "predict": ["predict", str(tiny_job_path), *PROBE],
        "predict --compare --no-log": ["predict", str(tiny_job_path), *PROBE, "--compare", "--no-log"],
    }


@pytest.mark.parametrize("command", list(_reading_commands(Path(), Path())))
@pytest.mark.parametrize("origin", ["--tracking-uri", "MLFLOW_TRACKING_URI", "--data-dir", "ADLREC_DATA_DIR"])
def test_a_reading_command_refuses_a_store_that_does_not_exist_and_creates_nothing(
    tmp_path, tiny_job_path, monkeypatch, capsys, command, origin
):
    """A mistyped path was created (with its folders) as a new empty store that had "no profiles"."""
    monkeypatch.chdir(tmp_path)
    argv = _reading_commands(tmp_path, tiny_job_path)[command]
    if origin in ("--tracking-uri", "MLFLOW_TRACKING_URI"):
        uri = f"sqlite:///{tmp_path / 'nonexist' / 'dir' / 'm.db'}"
        if origin == "--tracking-uri":
            argv = [*argv, "--tracking-uri", uri]
        else:
            monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    else:
        typo = tmp_path / "adlrc"
        uri = f"sqlite:///{typo / 'mlflow.db'}"
        if origin == "--data-dir":
            argv = [*argv, "--data-dir", str(typo)]
        else:
            monkeypatch.setenv("ADLREC_DATA_DIR", str(typo))
    before = _tree(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == (
        f"adlrec: error: no MLflow store at {uri} (set by {origin}): a command that only reads creates none; "
        "check the path, or log to it first (adlrec profile, profiles import, model fit)\n"
    )
    assert _tree(tmp_path) == before


def test_reading_the_default_store_before_anything_is_logged_is_friendly_and_creates_it_not(
    tmp_path, tiny_job_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / '.adlrec' / 'mlflow.db'}"
    assert main(["profiles", "list"]) == 0
    assert capsys.readouterr().out == f"no profiles yet in {uri}; `adlrec profile model.py` logs one\n"
    assert main(["model", "list"]) == 0
    assert capsys.readouterr().out == f"no versions of {MODEL_NAME} yet in {uri}; `adlrec model fit` registers one\n"
    assert main(["profiles", "export", "--out", "out"]) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: no complete profiles to export: no profiles yet in {uri}; `adlrec profile model.py` logs one\n"
    )
    assert _tree(tmp_path) == []

    assert main(["predict", str(tiny_job_path), *PROBE, "--json"]) == 0  # the job's data go to .adlrec/datasets
    captured = capsys.readouterr()
    assert json.loads(captured.out)["model"].startswith("analytic")
    assert f"no registered model {MODEL_NAME}@champion in {uri}" in captured.err
    assert not (tmp_path / ".adlrec" / "mlflow.db").exists() and not (tmp_path / ".adlrec" / "artifacts").exists()


def test_reading_an_experiment_the_store_lacks_creates_none(tmp_path, capsys):
    """`profiles list --experiment` with a mistyped name is no profiles, and leaves no empty experiment behind."""
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts").log_profile(make_profile())
    assert main(["profiles", "list", "--tracking-uri", uri, "--experiment", "adlrec-profile"]) == 0
    assert capsys.readouterr().out == f"no complete profiles in experiment 'adlrec-profile' at {uri}\n"
    assert Tracker(uri, "adlrec-profile").client.get_experiment_by_name("adlrec-profile") is None


def _foreign_database(path: Path, journal: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA journal_mode={journal}")
        for table in ("notes", "tags", "accounts"):  # AUTOINCREMENT: SQLite adds its own sqlite_sequence
            db.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY AUTOINCREMENT, text TEXT)")
            db.execute(f"INSERT INTO {table} (text) VALUES ('kept')")
    db.close()


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_another_programs_sqlite_database_is_refused_and_left_byte_for_byte(tmp_path, tiny_job_path, capsys, journal):
    """MLflow's migration added its tables to it (and `model list` said "no versions")."""
    path = tmp_path / "app.db"
    _foreign_database(path, journal)
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(make_profile().to_dict()))
    content, before = path.read_bytes(), _tree(tmp_path)
    uri = f"sqlite:///{path}"
    commands = [
        ["profiles", "list"],
        ["model", "list"],
        ["model", "fit"],
        ["profiles", "import", str(profile)],
        ["predict", str(tiny_job_path), *PROBE, "--data-dir", str(tmp_path)],
    ]
    for argv in commands:
        assert main([*argv, "--tracking-uri", uri]) == 2, argv
        assert capsys.readouterr().err == (
            f"adlrec: error: tracking store {uri!r}: {path} is not an MLflow store but another program's SQLite "
            "database (tables accounts, notes, tags); expected a new file or an MLflow store (set by "
            "--tracking-uri)\n"
        ), argv
    assert path.read_bytes() == content
    assert _tree(tmp_path) == before


def test_an_empty_file_and_an_mlflow_store_still_open(tmp_path, capsys):
    empty = tmp_path / "empty.db"
    empty.touch()
    no_tables = tmp_path / "no-tables.db"  # a SQLite file with its header page and no table yet
    with contextlib.closing(sqlite3.connect(no_tables)) as db:
        db.execute("PRAGMA user_version = 1")
        db.commit()
    for path in (empty, no_tables):
        assert main(["model", "list", "--tracking-uri", f"sqlite:///{path}"]) == 0
        assert "no versions" in capsys.readouterr().out
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts").log_profile(make_profile())
    assert main(["profiles", "list", "--tracking-uri", uri]) == 0
    assert " w " in capsys.readouterr().out


def test_another_programs_database_open_in_wal_mode_is_refused(tmp_path):
    """While the program runs, its tables may all be in app.db-wal still: they are read through it."""
    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("PRAGMA user_version = 1")  # app.db's first page, with no table in it
        db.commit()
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        db.commit()  # in app.db-wal until a checkpoint
        with pytest.raises(UsageError, match=r"another program's SQLite database \(tables notes\)"):
            check_sqlite_store(f"sqlite:///{path}")


@pytest.mark.parametrize(("count", "shown"), [(5, "t0, t1, t2, t3, t4"), (7, "t0, t1, t2, t3, t4 and 2 more")])
def test_another_programs_database_names_five_of_its_tables(tmp_path, count, shown):
    path = tmp_path / "app.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        for i in range(count):
            db.execute(f"CREATE TABLE t{i} (id INTEGER)")
    with pytest.raises(UsageError) as caught:
        check_sqlite_store(f"sqlite:///{path}", "--tracking-uri")
    assert f"(tables {shown}); expected a new file" in str(caught.value)


@pytest.mark.parametrize("command", [["predict"], ["predict", "--compare"], ["profile"], ["profile", "--no-log"]])
def test_a_missing_model_py_creates_no_folder(tmp_path, capsys, command):
    """predict (and profile) made <data-dir>/datasets before finding that model.py does not exist."""
    data = tmp_path / "data"
    missing = tmp_path / "modle.py"
    argv = [command[0], str(missing), *command[1:], "--data-dir", str(data)]
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: {missing}: no such file; expected a model.py that defines the adlrec job contract\n"
    )
    assert _tree(tmp_path) == []


@pytest.mark.parametrize("command", [["predict", "--compare"], ["profile"], ["profile", "--no-log"]])
def test_a_model_py_that_does_not_import_creates_no_folder(tmp_path, capsys, command):
    """A model.py with a syntax error left an empty <data-dir>/datasets (and data dir) behind."""
    job = tmp_path / "model.py"
    job.write_text('PARAMS = {"batch_size": 1}\ndef build_dataset(cfg:\n')
    argv = [command[0], str(job), *command[1:], "--data-dir", str(tmp_path / "data"), *PROBE]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith("adlrec: error: model.py: does not import: SyntaxError")
    assert _tree(tmp_path) == [Path("model.py")]


def test_a_sqlite_uri_with_options_names_its_file(tmp_path, capsys):
    """`?timeout=5` (an option SQLAlchemy takes) was read as part of the file name: a reading command said an
    existing store did not exist, and another program's database behind such a URI was migrated by MLflow."""
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    Tracker(uri, "adlrec-profiles", artifact_root=tmp_path / "artifacts").log_profile(make_profile())
    assert main(["profiles", "list", "--tracking-uri", f"{uri}?timeout=5"]) == 0
    assert " w " in capsys.readouterr().out
    path = tmp_path / "app.db"
    _foreign_database(path, "delete")
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(make_profile().to_dict()))
    content = path.read_bytes()
    for argv in (["model", "list"], ["profiles", "import", str(profile)]):
        assert main([*argv, "--tracking-uri", f"sqlite:///{path}?timeout=5"]) == 2, argv
        assert f"{path} is not an MLflow store" in capsys.readouterr().err, argv
    assert path.read_bytes() == content


@pytest.mark.parametrize("origin", ["--data-dir", "ADLREC_DATA_DIR"])
def test_another_programs_database_names_where_its_path_came_from(tmp_path, monkeypatch, capsys, origin):
    """It said '(set by --tracking-uri or MLFLOW_TRACKING_URI)' of a store that --data-dir chose."""
    (tmp_path / "data").mkdir()
    path = tmp_path / "data" / "mlflow.db"
    _foreign_database(path, "delete")
    profile = tmp_path / "p.json"
    profile.write_text(json.dumps(make_profile().to_dict()))
    content, before = path.read_bytes(), _tree(tmp_path)
    where = ["--data-dir", str(tmp_path / "data")] if origin == "--data-dir" else []
    if origin == "ADLREC_DATA_DIR":
        monkeypatch.setenv("ADLREC_DATA_DIR", str(tmp_path / "data"))
    for argv in (["profiles", "list"], ["model", "list"], ["profiles", "import", str(profile)]):
        assert main([*argv, *where]) == 2, argv
        assert capsys.readouterr().err.endswith(
            f"is not an MLflow store but another program's SQLite database (tables accounts, notes, tags); "
            f"expected a new file or an MLflow store (set by {origin})\n"
        ), argv
    assert path.read_bytes() == content
    assert _tree(tmp_path) == before


FAILING_BUILD = """
import torch
PARAMS = {"batch_size": 2}
def build_dataset(cfg):
    (cfg.data_dir / "rows.bin").write_bytes(b"half a file")  # a partial file, and a partial folder
    (cfg.data_dir / "images").mkdir()
    (cfg.data_dir / "images" / "0.png").write_bytes(b"png")
    raise %s
def build_model(cfg): return torch.nn.Linear(1, 1)
def loss_fn(o, t): return o.sum()
"""


@pytest.mark.parametrize(
    "command", [["predict"], ["predict", "--compare", "--no-log"], ["profile", "--no-log"], ["profile"]]
)
def test_a_build_dataset_that_raises_leaves_nothing_new(tmp_path, monkeypatch, capsys, command):
    """It left .adlrec/datasets behind, with the partial data in it, which a later run took for complete."""
    monkeypatch.chdir(tmp_path)
    job = tmp_path / "model.py"
    job.write_text(FAILING_BUILD % 'OSError(28, "No space left on device")')
    argv = [command[0], str(job), *command[1:], *PROBE]
    if command == ["profile"]:  # it opens its store before it measures: one outside the data dir
        argv += ["--tracking-uri", f"sqlite:///{tmp_path / 'store' / 'm.db'}"]
    assert main(argv) == 2
    assert capsys.readouterr().err.endswith(
        "adlrec: error: model.py: build_dataset() raised OSError: [Errno 28] No space left on device\n"
    )
    assert not (tmp_path / ".adlrec").exists()


def test_a_build_dataset_interrupted_with_ctrl_c_leaves_nothing_new(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    job = tmp_path / "model.py"
    job.write_text(FAILING_BUILD % "KeyboardInterrupt")
    assert main(["profile", str(job), "--no-log", *PROBE]) == 130
    assert "interrupted" in capsys.readouterr().err
    assert _tree(tmp_path) == [Path("model.py")]


def test_a_failed_build_keeps_what_the_datasets_folder_held_before(tmp_path, capsys):
    datasets = tmp_path / "data" / "datasets"
    (datasets / "images").mkdir(parents=True)  # another job's data, and a folder this job writes into too
    (datasets / "images" / "old.png").write_bytes(b"kept")
    (datasets / "other.bin").write_bytes(b"kept")
    job = tmp_path / "model.py"
    job.write_text(FAILING_BUILD.replace('(cfg.data_dir / "images").mkdir()', "") % "KeyboardInterrupt")
    before = {p: p.read_bytes() for p in datasets.rglob("*") if p.is_file()}
    assert main(["profile", str(job), "--no-log", "--data-dir", str(tmp_path / "data"), *PROBE]) == 130
    assert "interrupted" in capsys.readouterr().err
    # rows.bin, new in the folder, is gone; images/0.png, written into a folder that was there, stays with it
    assert sorted(datasets.rglob("*")) == sorted([*before, datasets / "images", datasets / "images" / "0.png"])
    assert all(p.read_bytes() == content for p, content in before.items())


def test_adlrec_serve_refuses_another_programs_database_and_leaves_it_byte_for_byte(tmp_path, capsys):
    """The service opens its MLflow store with no reading command before it: the store's own check refuses it."""
    path = tmp_path / "app.db"
    _foreign_database(path, "delete")
    content = path.read_bytes()
    uri = f"sqlite:///{path}"
    assert main(["serve", "--port", "0", "--tracking-uri", uri, "--data-dir", str(tmp_path / "d")]) == 2
    assert capsys.readouterr().err == (
        f"adlrec: error: tracking store {uri!r}: {path} is not an MLflow store but another program's SQLite "
        "database (tables accounts, notes, tags); expected a new file or an MLflow store (set by --tracking-uri)\n"
    )
    assert path.read_bytes() == content and not (tmp_path / "d" / "service.db").exists()
