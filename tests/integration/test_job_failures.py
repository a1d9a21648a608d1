"""A job whose data goes wrong in DataLoader workers: one line naming what, never a hang or a traceback.

Real worker processes (fork), real files in tmp_path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adlrec.config import Settings
from adlrec.errors import JobContractError
from adlrec.job import load_job
from adlrec.profile.device import parse_device
from adlrec.profile.sweep import JobBench

JOB = """
import torch
from torch.utils.data import Dataset, get_worker_info
PARAMS = {{"batch_size": 4}}
class DS(Dataset):
    def __len__(self): return 32
    def __getitem__(self, i):
{getitem}
        return torch.zeros(3), i % 2
def build_dataset(cfg): return DS()
def build_model(cfg): return torch.nn.Linear(3, 2)
def loss_fn(o, t): return torch.nn.functional.cross_entropy(o, t)
"""


def write_job(folder: Path, getitem: str = "pass", extra: str = "") -> Path:
    path = folder / "model.py"
    path.write_text(textwrap.dedent(JOB).format(getitem=textwrap.indent(textwrap.dedent(getitem), " " * 8)) + extra)
    return path


def bench(path: Path, tmp_path: Path, **settings_kw) -> JobBench:
    settings = Settings(data_dir=tmp_path / "data", warmup_s=0.0, min_batches=2, **settings_kw)
    return JobBench(load_job(path, data_dir=tmp_path / "data"), parse_device("emulate:1"), settings)


def test_an_unpicklable_batch_is_refused_before_workers_would_hang(tmp_path):
    collate = "\ndef collate_fn(samples):\n    return torch.stack([x for x, _ in samples]), (y for _, y in samples)\n"
    path = write_job(tmp_path, extra=collate)
    env = os.environ | {"MLFLOW_DISABLE_TELEMETRY": "true"}
    args = ["profile", str(path), "--device", "emulate:1", "--budget", "0.2", "--max-workers", "1", "--no-log"]
    result = subprocess.run(  # the timeout only guards the test run: before the fix this hung forever
        [sys.executable, "-m", "adlrec.cli", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        "adlrec: error: model.py: a batch cannot be pickled (TypeError: cannot pickle 'generator' object); "
        "DataLoader worker processes send batches by pickling them, so __getitem__ and collate_fn must return "
        "picklable objects (tensors, numbers, lists, dicts)"
    ]


def test_a_worker_that_never_answers_times_out_as_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("ADLREC_WORKER_TIMEOUT_S", "1")  # the setting, as a user sets it
    # each worker's first item blocks for 20 s: far past the timeout, yet bounded, so that
    # without the backstop this test ends (and fails) instead of hanging
    blocking = """
        import time
        if get_worker_info() is not None and not getattr(DS, "slept", False):
            DS.slept = True
            time.sleep(20)
    """
    b = bench(write_job(tmp_path, blocking), tmp_path)
    with pytest.raises(
        JobContractError,
        match=r"^model.py: no batch came from the DataLoader workers in 1 s \(ADLREC_WORKER_TIMEOUT_S\): ",
    ):
        b.loader_alone(1, 0.2)


def test_stop_iteration_in_a_worker_is_named_not_measured_as_zero(tmp_path):
    path = write_job(tmp_path, "if get_worker_info() is not None:\n    raise StopIteration")
    b = bench(path, tmp_path)
    assert b.loader_alone(0, 0.2).rate > 0  # in-process it works: only workers stop
    with pytest.raises(JobContractError, match="^model.py: the dataset ran out of batches after 0: .*StopIteration"):
        b.loader_alone(1, 0.2)


def test_a_module_beside_model_py_reaches_the_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_job leaves the job's folder on sys.path
    helpers, lazy = (f"{name}_{tmp_path.name.replace('-', '_')}" for name in ("helpers", "lazy"))
    for name in (helpers, lazy):
        monkeypatch.delitem(sys.modules, name, raising=False)
    # a class from the helper module crosses the worker boundary; another is imported lazily, in workers only
    (tmp_path / f"{helpers}.py").write_text("class Target(int):\n    pass\n")
    (tmp_path / f"{lazy}.py").write_text("OFFSET = 0\n")
    lazy_import = f"if get_worker_info() is not None:\n    import {lazy}\n    i += {lazy}.OFFSET"
    path = write_job(tmp_path, lazy_import, extra=f"\nfrom {helpers} import Target\n")
    assert_targets_cross_the_worker_boundary(path, tmp_path)
    for name in (helpers, lazy):
        sys.modules.pop(name, None)


def assert_targets_cross_the_worker_boundary(path, tmp_path):
    """The job's samples carry a ``Target`` (defined where its test says), kept by its ``collate_fn``: a worker's
    batch must reach the sweep with its class."""
    text = path.read_text().replace("return torch.zeros(3), i % 2", "return torch.zeros(3), Target(i % 2)")
    path.write_text(text + "\ndef collate_fn(s):\n    return torch.stack([x for x, _ in s]), [t for _, t in s]\n")
    b = bench(path, tmp_path)
    assert b.loader_alone(1, 0.2).rate > 0
    with b._batches(1) as it:
        assert type(next(it)[1][0]).__name__ == "Target"


def test_a_class_defined_in_model_py_crosses_the_worker_boundary(tmp_path):
    """A worker pickles each batch by its classes' module name: model.py's module is registered under its name."""
    path = write_job(tmp_path, extra="\nclass Target(int):\n    pass\n")
    assert_targets_cross_the_worker_boundary(path, tmp_path)


def _live_workers(before: set[int]) -> set[int]:
    """Child processes started since ``before`` that still run (a zombie has ended)."""
    import psutil

    live = set()
    for p in psutil.Process().children(recursive=True):
        try:
            if p.pid not in before and p.status() != psutil.STATUS_ZOMBIE:
                live.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return live


def test_a_runtime_error_in_a_worker_is_named_not_taken_for_a_timeout(tmp_path):
    """Only torch's 'DataLoader timed out' is a timeout; a job's own RuntimeError is reported as it is."""
    path = write_job(tmp_path, "if get_worker_info() is not None:\n    raise RuntimeError('cannot decode')")
    with pytest.raises(JobContractError) as info:
        bench(path, tmp_path).loader_alone(1, 0.2)
    assert "RuntimeError" in str(info.value) and "cannot decode" in str(info.value)
    assert "no batch came" not in str(info.value)


def test_workers_are_stopped_when_a_measurement_fails_while_its_traceback_is_held(tmp_path):
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    path = write_job(tmp_path, "if get_worker_info() is not None and i > 8:\n    raise ValueError('bad sample')")
    b = bench(path, tmp_path)
    with pytest.raises(JobContractError, match="bad sample") as info:
        b.training(2, 0.5)
    assert info.value.__traceback__ is not None  # the frames that hold the loader's iterator are alive
    assert _live_workers(before) == set()  # and yet its workers are gone


def test_an_unpicklable_batch_is_fine_in_process(tmp_path):
    """Only workers pickle batches: a sweep of 0 workers (--max-workers 0) measures such a job."""
    collate = "\ndef collate_fn(samples):\n    return torch.stack([x for x, _ in samples]), (y for _, y in samples)\n"
    b = bench(write_job(tmp_path, extra=collate), tmp_path)
    assert b.loader_alone(0, 0.2).rate > 0


def test_processes_started_before_the_bench_are_not_counted_as_workers(tmp_path):
    """A service's writer or a test's helper process is no DataLoader worker: 0 workers, no worker memory."""
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        b = bench(write_job(tmp_path), tmp_path)
        assert b.training(0, 0.2).usage.worker_uss_mb == 0.0
    finally:
        helper.kill()
        helper.wait()
