"""What a JobBench window leaves out: the warm-up batches, counted by the training steps a real model takes.

Real DataLoader workers (fork); the step is a real CPU training step on a model that counts its forward calls.
"""

from __future__ import annotations

import textwrap

import pytest

from adlrec.config import Settings
from adlrec.job import load_job
from adlrec.profile.device import parse_device
from adlrec.profile.sweep import JobBench

JOB = """
import torch
from torch.utils.data import Dataset
PARAMS = {"batch_size": 4}
class DS(Dataset):
    def __len__(self): return 32
    def __getitem__(self, i): return torch.zeros(3), i % 2
class Counting(torch.nn.Linear):
    def __init__(self):
        super().__init__(3, 2)
        self.calls = 0
    def forward(self, x):
        self.calls += 1
        return super().forward(x)
def build_dataset(cfg): return DS()
def build_model(cfg): return Counting()
def loss_fn(o, t): return torch.nn.functional.cross_entropy(o, t)
"""

BUDGET = 120.0


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    folder = tmp_path_factory.mktemp("warmup")
    (folder / "model.py").write_text(textwrap.dedent(JOB))
    # a budget no warm-up outlasts (after budget_s of warm-up a window starts anyway), and a target the first
    # check meets, at 5 batches: the window ends there however loaded the machine
    settings = Settings(data_dir=folder / "data", warmup_s=0.0, min_batches=2, rse_target=0.99)
    return JobBench(load_job(folder / "model.py", data_dir=folder / "data"), parse_device("cpu"), settings)


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_training_with_w_workers_steps_through_2w_plus_3_batches_before_its_window(bench, workers):
    # docs/profiling.md: the first 2w + 3 batches are warm-up (worker start, every worker's first two batches)
    bench.step.model.calls = 0
    m = bench.training(workers, BUDGET)
    assert bench.step.model.calls - m.batches == 2 * workers + 3


def test_the_ceiling_steps_through_3_batches_before_its_window(bench):
    bench.step.model.calls = 0
    m = bench.ceiling(BUDGET)
    assert bench.step.model.calls - m.batches == 3
