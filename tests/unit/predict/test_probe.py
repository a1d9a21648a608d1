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
