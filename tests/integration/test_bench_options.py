"""The benches (bench/*.py) run as a user runs them: an option out of range is argparse's one-line error
naming the flag, exit code 2, before anything runs; not a traceback, a run of nothing, or a run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.terminal import own_group

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("script", "args", "says"),
    [
        # statistics.median's "no median for empty data" traceback
        ("allocate_scale.py", ["--repeats", "0"], "--repeats: expected a whole number >= 1, got 0"),
        ("resize_ab.py", [".", ".", "--rounds", "0"], "--rounds: expected a whole number >= 1, got 0"),
        ("thread_start.py", ["--trials", "0"], "--trials: expected a whole number >= 1, got 0"),
        # '--workers must be >= 2 (...), --batches and --repeats >= 1', whichever was wrong
        ("split_pools.py", ["--repeats", "0"], "--repeats: expected a whole number >= 1, got 0"),
        # the simulator's ValueError, as a traceback
        ("policies.py", ["--jobs", "0"], "--jobs: expected a whole number >= 1, got 0"),
        # float('abc') deep in the run, as a traceback
        ("resize.py", ["--sample-ms", "abc"], "--sample-ms: expected CPU ms or CPU+IO ms (numbers >= 0)"),
        ("split_pools.py", ["--sample-ms", "6,x"], "--sample-ms: expected CPU ms or CPU+IO ms (numbers >= 0)"),
        # an IndexError once the first row had run
        ("resize.py", ["--window", "0"], "--window: expected a whole number >= 1, got 0"),
        # the loader's "batch_size must be ...", as a traceback
        ("thread_start.py", ["--batch-size", "0"], "--batch-size: expected a whole number >= 1, got 0"),
        # each child process's traceback for the tuple it could not unpack
        ("resize_ab.py", [".", ".", "--change", "2"], "--change: each change needs two or more worker counts >= 0"),
        # "all 0 trials passed", exit code 0
        ("loader_soak.py", ["--trials", "0"], "--trials: expected a whole number >= 1, got 0"),
        # a service started, then every job's train_loop.py failed, said as "a job failed"
        ("live.py", ["--device", "foo"], "--device 'foo': expected auto, cpu, cuda or emulate:MS"),
        ("live.py", ["--cores", "0"], "--cores: expected a whole number >= 1, got 0"),
        # a service started and a run of 0 jobs
        ("service_load.py", ["--jobs", "0"], "--jobs: expected a whole number >= 1, got 0"),
        # 'need curves of at least 2 workloads; found 0 in nonexist', as if the folder were empty
        ("predict_accuracy.py", ["--profiles", "nonexist"], "--profiles nonexist: no such folder"),
        ("policies.py", ["--profiles", "nonexist"], "--profiles nonexist: no such folder"),
        # two minutes of waiting for /health, then 'did not answer'; httpx's InvalidURL traceback
        ("service_load.py", ["--url", "foo"], "--url: expected the service's http(s) address"),
        ("service_load.py", ["--url", "http://127.0.0.1:abc"], "--url: expected the service's http(s) address"),
        # ignored: the service it started had its own token
        ("service_load.py", ["--token", "t"], "--token: only with --url"),
        # MLflow's traceback
        ("predict_accuracy.py", ["--tracking-uri", "foo://bar"], "tracking store 'foo://bar': "),
    ],
)
def test_a_bad_option_is_one_line_naming_it(tmp_path, script, args, says):
    env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path), "MLFLOW_DISABLE_TELEMETRY": "true"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr[-2000:]
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"{script}: error: ") and says in last, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_ctrl_c_stops_a_bench_in_one_line(tmp_path):
    """Ctrl-C (SIGINT to the terminal's process group: the bench and its loader's workers) ended the
    benches in a KeyboardInterrupt traceback from wherever they were."""
    import signal

    env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path), "MLFLOW_DISABLE_TELEMETRY": "true"}
    argv = [sys.executable, str(ROOT / "bench" / "loader_soak.py"), "--trials", "1000"]
    with own_group(argv, env=env, cwd=ROOT) as proc:
        assert proc.stdout.readline().endswith(": ok\n")  # a trial done: it is in the middle of the next
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert err.splitlines()[-1] == "loader_soak.py: interrupted; what it had not printed yet is lost", err[-2000:]
    assert "Traceback" not in err


def test_a_service_url_nothing_answers_is_one_line_soon(tmp_path):
    """service_load.py --url at an address nothing listens on waited the 120 s it gives a service it
    starts itself, then said 'did not answer'; a refused connection is now said at once."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"  # bound, never listening: connections are refused
        env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path), "MLFLOW_DISABLE_TELEMETRY": "true"}
        argv = [sys.executable, str(ROOT / "bench" / "service_load.py"), "--url", url, "--token", "t"]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert done.returncode == 1, done.stderr[-2000:]
    last = done.stderr.splitlines()[-1]
    assert last.startswith(f"service_load.py: nothing answers at {url} (") and last.endswith(
        "): is the service running there?"
    ), done.stderr[-2000:]
    assert "Traceback" not in done.stderr


def _usage_values(doc: str) -> dict[str, str]:
    """``[--flag VALUE]`` in a docstring's usage lines, where VALUE is a default (not a placeholder)."""
    import re

    usage = "\n".join(line for line in doc.split("\n\n")[1].splitlines())
    return {
        flag: value for flag, value in re.findall(r"\[(--[a-z-]+) ([^]]+)\]", usage) if not re.search(r"[A-Z|]", value)
    }


def _help_defaults(text: str) -> dict[str, str]:
    """Each option's ``(default: X)`` as --help prints it."""
    import re

    entries, options = [], text.split("\noptions:\n", 1)[1]
    for line in options.splitlines():
        if line.startswith("  -"):
            entries.append(line)
        elif entries:
            entries[-1] += " " + line
    out = {}
    for entry in entries:
        entry = " ".join(entry.split())
        found = re.search(r"\(default: ([^)]*)\)$", entry)
        if found:
            out[entry.split()[0].rstrip(",")] = found.group(1)
    return out


def _same(a: str, b: str) -> bool:
    try:
        return float(a) == float(b)
    except ValueError:
        return a == b


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "bench").glob("*.py") if p.name != "_args.py"))
def test_help_states_the_defaults_the_docstring_does(script):
    """The docstrings' usage lines (which docs/*.md copy) give the defaults; --help gave none."""
    import ast

    path = ROOT / "bench" / script
    doc = ast.get_docstring(ast.parse(path.read_text()), clean=False)
    env = os.environ | {"MLFLOW_DISABLE_TELEMETRY": "true"}
    done = subprocess.run([sys.executable, str(path), "--help"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    stated, shown = _usage_values(doc), _help_defaults(done.stdout)
    assert stated, doc  # every bench's docstring has a usage line with a default
    for flag, value in stated.items():
        assert flag in shown and _same(shown[flag], value), (flag, value, done.stdout)


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "usage: bench/device_profiles.sh OUT_DIR [DEVICE] [BUDGET_S]"),  # was bash's 'line 14: 1: usage: ...'
        # each was adlrec's same refusal six times over, one per curve, and exit status 6
        (["{out}", "gpu"], "device_profiles.sh: adlrec: error: --device 'gpu': expected auto, cpu, cuda or emulate:MS"),
        (["{out}", "cpu", "0"], "device_profiles.sh: adlrec profile: error: argument --budget: expected a number"),
    ],
)
def test_device_profiles_stops_on_a_mistake_in_one_line(tmp_path, args, says):
    env = os.environ | {
        "ADLREC": f"{sys.executable} -m adlrec.cli",
        "ADLREC_DATA_DIR": str(tmp_path / "data"),
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    argv = [a.replace("{out}", str(tmp_path / "out")) for a in args]
    done = subprocess.run(
        ["bash", str(ROOT / "bench" / "device_profiles.sh"), *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 99, done.stdout + done.stderr
    assert done.stderr.splitlines() == [done.stderr.splitlines()[-1]] and says in done.stderr, done.stderr
    assert done.stdout == ""  # no curve measured, none reported FAILED
