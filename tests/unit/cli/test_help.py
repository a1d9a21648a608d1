"""Every command's --help says what it does, and offers only flags that mean something there."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from adlrec.cli import build_parser, main


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


@pytest.mark.parametrize("path", [" ".join(p) for p, _ in _commands(build_parser())])
def test_every_command_has_a_description_line(path):
    """`adlrec trace --help` (and `profiles`, `model`, `profiles list`, `model list`) showed usage only."""
    parser = dict((" ".join(p), sub) for p, sub in _commands(build_parser()))[path]
    assert parser.description, f"adlrec {path} --help has no description"


def test_model_list_takes_no_experiment(capsys):
    """`model list --experiment X` was accepted and did nothing: the registry is not in an experiment."""
    with pytest.raises(SystemExit) as exc:
        main(["model", "list", "--experiment", "x"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --experiment x" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["model", "list", "--help"])
    assert "--experiment" not in capsys.readouterr().out


def test_python_dash_m_adlrec_is_the_adlrec_command():
    """`python -m adlrec`, for an environment whose scripts are not on PATH, said 'No module named
    adlrec.__main__'."""
    import subprocess
    import sys

    from adlrec import __version__

    run = subprocess.run([sys.executable, "-m", "adlrec", "--version"], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert __version__ in run.stdout


def test_serve_takes_no_experiment(capsys):
    """`adlrec serve --experiment X` was accepted and did nothing: the service reads the registry's model and
    logs each job's live run to experiment adlrec-live, whatever --experiment said."""
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["serve", "--experiment", "x"])  # parsed only: nothing is served
    assert exc.value.code == 2
    assert "unrecognized arguments: --experiment x" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    assert "--experiment" not in capsys.readouterr().out


def test_the_readmes_profile_option_table_is_the_parsers():
    """The README's table of `adlrec profile` options names every flag the parser has and no other, with the
    defaults the settings have."""
    import re

    from adlrec.config import Settings
    from adlrec.schemas import MAX_WORKERS

    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    table = readme.split("| option | meaning | default |", 1)[1].split("\n\n", 1)[0]
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `(--[a-z-]+)[^`]*` \| (.*) \|$", table, re.M)}
    profile = dict((" ".join(p), sub) for p, sub in _commands(build_parser()))["profile"]
    flags = {s for a in profile._actions for s in a.option_strings if s.startswith("--") and s != "--help"}
    assert set(rows) == flags
    default = {name: field.default for name, field in Settings.model_fields.items()}  # not the environment's
    assert rows["--budget"].endswith(f"| {default['point_budget_s']:g}")
    assert rows["--experiment"].endswith(f"| `{default['experiment']}`")
    assert rows["--data-dir"].endswith(f"| `{default['data_dir']}`")
    assert f"0..{MAX_WORKERS}" in rows["--max-workers"]


@pytest.mark.parametrize(
    ("argv", "defaults"),
    [
        (["profile", "m.py"], {"device": "auto", "max_workers": None, "budget": None}),  # None: the settings decide
        (["predict", "m.py"], {"device": "auto", "max_workers": None, "budget": None}),
        (["profiles", "export"], {"out": Path("profiles")}),
        (["model", "fit"], {"kind": "learned", "profiles": None}),
        (["serve"], {"host": None, "port": None, "policy": None, "interval": None, "ttl": None}),
    ],
)
def test_defaults_are_what_help_says(argv, defaults):
    """The defaults --help and the README state (simulate's and trace generate's are pinned by what they print:
    tests/integration/test_simulate_cli.py)."""
    args = vars(build_parser().parse_args(argv))
    assert {k: args[k] for k in defaults} == defaults
