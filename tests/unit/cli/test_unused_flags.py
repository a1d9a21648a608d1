"""A flag that does nothing in the combination given is refused in one line naming what it needs: before,
`adlrec predict model.py --experiment X` probed, predicted and ignored X without a word."""

from __future__ import annotations

from pathlib import Path

import pytest

from adlrec.cli import main

PREDICT_EXPERIMENT = (
    "adlrec: error: --experiment applies to --compare only, which logs its sweep there; without --compare, or "
    "with --no-log, predict logs nothing (the registered model it reads is in no experiment)\n"
)


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (["predict", "--experiment", "mine"], PREDICT_EXPERIMENT),
        (["predict", "--compare", "--no-log", "--experiment", "mine"], PREDICT_EXPERIMENT),
        (
            ["profile", "--no-log", "--experiment", "mine"],
            "adlrec: error: --experiment names the experiment the profile is logged to; with --no-log nothing is "
            "logged\n",
        ),
        (
            ["profile", "--no-log", "--tracking-uri", "sqlite:///elsewhere.db"],
            "adlrec: error: --tracking-uri names the store the profile is logged to; with --no-log nothing is logged\n",
        ),
    ],
)
def test_an_experiment_nothing_is_logged_to_is_refused_before_anything_runs(
    tmp_path, tiny_job_path, monkeypatch, capsys, command, message
):
    monkeypatch.chdir(tmp_path)
    argv = [command[0], str(tiny_job_path), *command[1:], "--device", "emulate:2", "--budget", "0.4"]
    assert main([*argv, "--max-workers", "1", "--data-dir", str(tmp_path / "d")]) == 2
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", message)
    assert list(Path(tmp_path).iterdir()) == []  # no probe ran: no datasets folder, no store
