"""The simulator's records refuse settings no replay can mean."""

import pytest

from adlrec.simulate import JobResult, Node, SimConfig, SimResult, TraceJob


@pytest.mark.parametrize(
    "build",
    [
        lambda: Node(cores=0),
        lambda: Node(memory_mb=-1),
        lambda: SimConfig(interval_s=0.0),
        lambda: SimConfig(threshold=-0.05),
        lambda: SimConfig(contention="none"),
        lambda: SimConfig(resize_s=-0.5),
        lambda: SimConfig(main_cpu=1.5),
        lambda: TraceJob("z", 0.0, 10.0, (0.0, 0.0)),
        lambda: TraceJob("z", 0.0, 10.0, (5.0,)),
        lambda: Node(gpus=0),
        lambda: TraceJob("z", 0.0, 0.0, (5.0, 10.0)),
        lambda: TraceJob("z", float("nan"), 10.0, (5.0, 10.0)),
        lambda: TraceJob("z", 0.0, 10.0, (5.0, 10.0), gpus=0),
        lambda: TraceJob("z", 0.0, 10.0, (5.0, 10.0), requested_workers=-1),
        lambda: SimConfig(main_cpu=-0.5),
        lambda: SimConfig(interval_s=float("inf")),
    ],
    ids=[
        "no cores",
        "negative memory",
        "no interval",
        "negative threshold",
        "unknown contention model",
        "negative resize",
        "main_cpu past a core",
        "curve zero everywhere",
        "curve without a worker",
        "no GPUs",
        "no work",
        "arrival not a number",
        "job on no GPU",
        "negative requested workers",
        "negative main_cpu",
        "infinite interval",
    ],
)
def test_a_record_that_no_replay_can_mean_is_refused(build):
    with pytest.raises(ValueError):
        build()


def test_mean_jct_is_the_mean_of_completion_minus_submission():
    jobs = (JobResult("a", 0.0, 0.0, 5.0, 0, 1, 1.0), JobResult("b", 1.0, 5.0, 13.0, 0, 1, 1.0))
    result = SimResult("even", jobs, 13.0, 13.0, 0.5, 0.5, 1.0, 2, 0, 1.0)
    assert result.mean_jct_s == (5.0 + 12.0) / 2
    assert SimResult("even", (), 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 1.0).mean_jct_s == 0.0
