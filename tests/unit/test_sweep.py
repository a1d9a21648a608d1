"""The sweep's default size (the sweep itself runs in tests/integration/test_sweep.py)."""

from adlrec.profile.sweep import default_max_workers


def test_the_default_sweep_goes_two_past_the_cores_but_never_past_16():
    assert default_max_workers(1) == 3  # 1 core + 2: where oversubscription shows
    assert default_max_workers(14) == 16
    assert default_max_workers(64) == 16
    assert default_max_workers(0) == 2  # psutil may not know: still a curve, not an empty sweep
