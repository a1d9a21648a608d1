"""Every command's --help says what it does, and offers only flags that mean something there."""

from __future__ import annotations

import pytest

from adlrec.cli import main


def test_model_list_takes_no_experiment(capsys):
    """`model list --experiment X` was accepted and did nothing: the registry is not in an experiment."""
    with pytest.raises(SystemExit) as exc:
        main(["model", "list", "--experiment", "x"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --experiment x" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["model", "list", "--help"])
    assert "--experiment" not in capsys.readouterr().out
