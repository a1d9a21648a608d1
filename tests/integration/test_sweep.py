"""One real sweep of the tiny job, called as the CLI calls it: what profile_job puts into a profile.

Real DataLoader workers (fork) on real files; the step is a 10 ms wait (``emulate:10``), so the ceiling
and training throughput are bounded by 8 samples / 10 ms = 800 samples/s whatever the machine's load,
while the loader alone (no step) delivers far faster.  The rse target cannot be reached (1e-6), so every
point runs out of its budget: the budgets show in the windows' lengths, not in wall-clock time.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import psutil
import pytest

from adlrec.config import Settings
from adlrec.job import load_job
from adlrec.profile.decompose import decompose
from adlrec.profile.device import parse_device
from adlrec.profile.sweep import profile_job
from tests.factories import make_profile

TINY = Path(__file__).parent.parent / "fixtures" / "tiny_job.py"
BUDGET = 0.4
STEP_BOUND = 8 / 0.010  # batch of 8 per 10 ms wait: no rate with the step can exceed it


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    data = tmp_path_factory.mktemp("sweep")
    settings = Settings(data_dir=data, point_budget_s=BUDGET, rse_target=1e-6, warmup_s=0.0, min_batches=20, seed=0)
    # a tenth of the tiny job's per-sample work: at 200, one worker alone made 760 samples/s on two cores at a
    # load of 8, under the step's 800; at 20 the loader stays far ahead of the step on a busy machine too
    job = load_job(TINY, overrides={"work": "20"}, data_dir=data, seed=0)
    hardware = make_profile().hardware  # passed in, as the CLI passes a probed one: not detected again
    progress = []
    profile = profile_job(
        job,
        parse_device("emulate:10", cuda_available=False),
        settings,
        max_workers=1,
        command="adlrec profile tiny_job.py",
        on_progress=progress.append,
        hardware=hardware,
    )
    return job, hardware, progress, profile


def test_progress_reports_every_stage_in_order_counting_up_to_the_total(swept):
    *_, progress, _ = swept
    stages = ["fetch", "ceiling", "w=0 loader", "w=0 train", "w=1 loader", "w=1 train", "ceiling again"]
    assert [e.stage for e in progress] == stages
    assert [e.done for e in progress] == list(range(1, len(stages) + 1))
    assert {e.total for e in progress} == {len(stages)}  # 3 + 2 per worker count


def test_the_profile_records_the_job_the_settings_and_the_given_hardware(swept):
    job, hardware, _, profile = swept
    assert (profile.workload, profile.source_hash, profile.batch_size) == ("tiny", job.source_hash, 8)
    assert profile.params == dict(job.params)
    assert profile.hardware is hardware
    assert (profile.budget_s, profile.rse_target) == (BUDGET, 1e-6)
    assert profile.command == "adlrec profile tiny_job.py"
    assert datetime.fromisoformat(profile.created_at).utcoffset() is not None  # created_at names its zone
    assert [p.workers for p in profile.points] == [0, 1]


def test_each_point_is_the_training_window_and_the_loader_alone_rate(swept):
    *_, profile = swept
    for p in profile.points:
        # the window that ran out of budget: at least the whole training budget long
        assert not p.stable and p.seconds >= BUDGET * 0.999
        assert p.throughput == pytest.approx(p.batches * 8 / p.seconds)  # rate = samples / window
        assert 0 < p.throughput <= STEP_BOUND
        # the loader alone (no 10 ms step) is far faster than training with it; the step waits, not the loader
        assert p.prep_rate > STEP_BOUND
        assert p.wait_fraction < 0.5
    assert profile.baseline.prep_rate == profile.points[0].prep_rate  # the in-process loader: 0 workers
    assert profile.points[0].worker_uss_mb == 0.0 and profile.points[1].worker_uss_mb > 0
    # a forked worker shares pages with its parent: its proportional share of them counts in PSS, not in USS
    assert profile.points[1].worker_pss_mb > profile.points[1].worker_uss_mb


def test_each_point_is_decomposed_against_the_first_ceiling_and_the_measured_fetch_cost(swept):
    *_, profile = swept
    b = profile.baseline
    extra = max(0.0, b.fetch_cold_s - b.fetch_cached_s)
    for p in profile.points:
        s = decompose(p.throughput, b.ceiling, p.prep_rate, extra, p.workers)
        assert (p.stall_fraction, p.prep_share, p.fetch_share) == (s.stall_fraction, s.prep_share, s.fetch_share)


def test_the_ceiling_is_measured_twice_each_bounded_by_the_step(swept):
    *_, profile = swept
    b = profile.baseline
    assert 0 < b.ceiling <= STEP_BOUND and 0 < b.ceiling_end <= STEP_BOUND
    assert b.ceiling_end != b.ceiling  # a second measurement, not the first one copied
    # each with its own error: 0.4 s of 10 ms steps is about 40 batches, enough for the 10 batch-means groups
    assert b.ceiling_end_rse != b.ceiling_rse


def test_the_notes_say_emulated_first_and_name_every_point_that_ran_out_of_budget(swept):
    *_, profile = swept
    assert profile.notes[0] == "training step emulated by a 10 ms wait; data loading is real"
    (budget,) = [n for n in profile.notes if "budget ran out" in n]
    assert "when the budget ran out at workers=[0, 1]: raise --budget" in budget
    assert not [n for n in profile.notes if "epoch" in n]  # 64 samples: 8 batches, more than 1 worker


SLOW_STEP_MS = 250  # longer than the budget: each window holds one training step
SLOW_BUDGET = 0.2


@pytest.fixture(scope="module")
def one_step_windows(tmp_path_factory):
    """A sweep of 0 workers only, whose every window with the step holds a single step: too few for an error."""
    data = tmp_path_factory.mktemp("slow")
    settings = Settings(data_dir=data, point_budget_s=SLOW_BUDGET, rse_target=0.05, warmup_s=0.0, seed=0)
    job = load_job(TINY, data_dir=data, seed=0)
    progress = []
    profile = profile_job(
        job,
        parse_device(f"emulate:{SLOW_STEP_MS}", cuda_available=False),
        settings,
        max_workers=0,
        on_progress=progress.append,
        hardware=make_profile().hardware,  # 8 logical cores: a default sweep would go to 10 workers
    )
    return progress, profile


def test_max_workers_0_sweeps_the_in_process_loader_alone(one_step_windows):
    progress, profile = one_step_windows
    assert [p.workers for p in profile.points] == [0]
    assert [e.stage for e in progress] == ["fetch", "ceiling", "w=0 loader", "w=0 train", "ceiling again"]
    assert progress[-1].total == 5


def test_a_window_of_one_step_after_the_warmup_has_no_error_and_is_named_as_too_short(one_step_windows):
    """Three warm-up steps, then the budget (shorter than a step) ends the window at its first step: the
    training point and both ceilings have no error estimate, while the loader alone (no step) has many batches."""
    _, profile = one_step_windows
    (p,) = profile.points
    assert (p.batches, p.stable) == (1, False) and math.isinf(p.rse)  # the training window's, not the loader's
    assert p.throughput == pytest.approx(8 / p.seconds)
    assert math.isinf(profile.baseline.ceiling_rse) and math.isinf(profile.baseline.ceiling_end_rse)
    (budget,) = [n for n in profile.notes if "budget ran out" in n]
    assert budget.startswith("throughput error above the 5% target (or under 10 batches) when the budget ran out")
    assert "ran out at workers=[0]: raise --budget" in budget


def test_a_step_that_only_waits_shows_almost_no_cpu_in_its_point(one_step_windows):
    """cpu is the training window's: the main process asleep in the step, not the loader alone's busy loop."""
    _, profile = one_step_windows
    (p,) = profile.points
    assert p.cpu_util * psutil.cpu_count(logical=True) < 0.25  # under a quarter of one core
