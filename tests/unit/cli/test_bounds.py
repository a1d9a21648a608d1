"""Counts past what a command can answer in reasonable time are refused by argparse, naming the range:
before, `--max-workers 100000` or `--jobs 100000000` ran for minutes with no output."""

from __future__ import annotations

import pytest

from adlrec.cli import build_parser, main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["profile", "model.py", "--max-workers", "257"],
            "--max-workers: expected a whole number within 0..256, got 257",
        ),
        (["predict", "model.py", "--max-workers", "100000"], "expected a whole number within 0..256, got 100000"),
        (["simulate", "t.csv", "--cores", "1000000"], "--cores: expected a whole number within 1..4096, got 1000000"),
        (["simulate", "t.csv", "--gpus", "0"], "--gpus: expected a whole number within 1..256, got 0"),
        (["trace", "generate", "--jobs", "100000"], "--jobs: expected a whole number within 1..10000, got 100000"),
        (
            ["trace", "generate", "--num-workers", "300"],
            "--num-workers: expected a whole number within 0..256, got 300",
        ),
        (["serve", "--port", "65536"], "--port: expected a whole number within 0..65535, got 65536"),
        (
            ["profile", "model.py", "--max-workers", "two"],
            "--max-workers: expected a whole number within 0..256, got 'two'",
        ),
        (["profile", "model.py", "--budget", "0"], "--budget: expected a number of seconds > 0, got 0.0"),
        (["predict", "model.py", "--budget", "inf"], "--budget: expected a number of seconds > 0, got inf"),
        (["simulate", "t.csv", "--memory-gb", "nan"], "--memory-gb: expected a number > 0, got nan"),
        (["trace", "generate", "--load", "0"], "--load: expected a number > 0, got 0.0"),
    ],
)
def test_a_value_out_of_range_or_not_a_number_is_one_line_naming_the_range(capsys, argv, message):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    "argv", [["profile", "--help"], ["trace", "generate", "--help"], ["simulate", "--help"], ["serve", "--help"]]
)
def test_the_bounds_leave_help_working(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 0


@pytest.mark.parametrize(
    ("argv", "dest", "value"),
    [
        (["profile", "model.py", "--max-workers", "0"], "max_workers", 0),
        (["predict", "model.py", "--max-workers", "256"], "max_workers", 256),
        (["serve", "--port", "0"], "port", 0),
        (["serve", "--port", "65535"], "port", 65535),
        (["simulate", "t.csv", "--cores", "4096"], "cores", 4096),
        (["simulate", "t.csv", "--gpus", "256", "--threshold", "1"], "gpus", 256),
        (["simulate", "t.csv", "--threshold", "0"], "threshold", 0.0),
        (["simulate", "t.csv", "--interval", "1"], "interval", 1.0),
        (["trace", "generate", "--jobs", "10000"], "jobs", 10_000),
    ],
)
def test_each_end_of_a_range_is_accepted(argv, dest, value):
    assert getattr(build_parser().parse_args(argv), dest) == value  # parsed only: nothing runs
