"""The simulator's records refuse settings no replay can mean."""

import pytest

from adlrec.simulate import Node, SimConfig, TraceJob


@pytest.mark.parametrize(
    "build",
    [
        lambda: Node(memory_mb=-1),
        lambda: SimConfig(resize_s=-0.5),
        lambda: SimConfig(main_cpu=1.5),
        lambda: TraceJob("z", 0.0, 10.0, (0.0, 0.0)),
    ],
    ids=["negative memory", "negative resize", "main_cpu past a core", "curve zero everywhere"],
)
def test_a_record_that_no_replay_can_mean_is_refused(build):
    with pytest.raises(ValueError):
        build()
