"""The probe's time budget, as a share of what a full sweep (adlrec/profile/sweep.py) is budgeted."""

import pytest

from adlrec.predict.probe import probe_budget, sweep_budget


def test_the_probe_gets_a_quarter_of_a_full_sweeps_budget_split_over_its_four_measurements():
    # a sweep to 2 workers at 1 s a point: the ceiling, the loader alone (0.5 s) and training (1 s) at each of
    # 0, 1 and 2 workers, the ceiling again
    assert sweep_budget(1.0, 2) == pytest.approx(1 + 3 * 1.5 + 1)
    assert sweep_budget(0.5, 8) == pytest.approx(0.5 * (2 + 9 * 1.5))
    # the ceiling and the loader alone at 0, 1 and 2 workers share a quarter of it
    assert probe_budget(1.0, 2) == pytest.approx(6.5 / 4 / 4)


def test_a_probe_measures_the_loader_at_0_1_and_2_workers_on_the_node_it_is_given(tmp_path, tiny_job_path, monkeypatch):
    from dataclasses import replace

    from adlrec.config import Settings
    from adlrec.job import load_job
    from adlrec.predict.probe import probe_job
    from adlrec.profile.device import parse_device
    from adlrec.profile.hardware import detect_hardware
    from adlrec.profile.sweep import JobBench

    measured: dict[object, float] = {}

    class Recording(JobBench):  # the real measurements, each noted under what it measured
        def fetch(self):
            cost = super().fetch()
            measured["fetch"] = cost.extra_s
            return cost

        def ceiling(self, budget_s):
            m = super().ceiling(budget_s)
            measured["ceiling"] = m.rate
            return m

        def loader_alone(self, workers, budget_s):
            m = super().loader_alone(workers, budget_s)
            measured[workers] = m.rate
            return m

    monkeypatch.setattr("adlrec.predict.probe.JobBench", Recording)
    job = load_job(tiny_job_path, data_dir=tmp_path / "data")
    node = replace(detect_hardware(), logical_cores=3)  # the features' cores are the node's, not this machine's
    result = probe_job(
        job, parse_device("emulate:2"), Settings(data_dir=tmp_path / "data", point_budget_s=0.2), node, 2
    )
    f = result.features
    assert (f.cores, f.batch_size, f.device_kind) == (3, job.batch_size, "emulate")
    assert len({f.prep_rate_0, f.prep_rate_1, f.prep_rate_2}) == 3  # three measurements, each its own
    # each at its own count: the rates of 1 and 2 workers swapped, or 1 worker measured twice, looked as plausible
    assert (f.prep_rate_0, f.prep_rate_1, f.prep_rate_2) == (measured[0], measured[1], measured[2])
    assert (f.ceiling, f.fetch_extra_s) == (measured["ceiling"], measured["fetch"])
    assert result.part_budget_s == pytest.approx(probe_budget(0.2, 2))
