"""The replay, on hand-made curves whose outcome can be worked out on paper."""

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adlrec.allocate import POLICIES, even, fixed, optimal
from adlrec.simulate import Node, SimConfig, SimulationError, TraceJob, simulate
from adlrec.simulate.contention import effective_throughput
from adlrec.simulate.records import CONTENTION_MODELS

STEP = (50.0, 100.0, 200.0, 200.0, 200.0)  # saturates at 2 workers
LINEAR = (5.0, 10.0, 20.0, 30.0, 40.0, 50.0)  # 10 samples/s per worker
QUIET = SimConfig(interval_s=1e6, threshold=0.0)  # no periodic ticks


def job(job_id, curve=STEP, arrival=0.0, work=10_000.0, gpus=1, requested=8):
    return TraceJob(job_id, arrival, work, curve, gpus=gpus, requested_workers=requested)


@pytest.mark.parametrize("name", ["even", "greedy", "optimal", "maxmin"])
def test_a_job_alone_finishes_at_arrival_plus_work_over_throughput(name):
    r = simulate([job("a", arrival=5.0)], POLICIES[name], Node(cores=4, gpus=1), QUIET, name=name)
    (a,) = r.jobs
    assert (a.start_s, a.finish_s, a.jct_s) == (5.0, pytest.approx(55.0), pytest.approx(50.0))
    assert r.makespan_s == pytest.approx(50.0)
    assert r.aggregate_throughput == pytest.approx(1.0) and r.busy_gpu_fraction == pytest.approx(1.0)
    assert r.resizes == 0 and r.mean_cpu_share == 1.0


def test_contention_slows_fixed_when_it_oversubscribes():
    node = Node(cores=4, gpus=1)
    r = simulate([job("a", arrival=5.0)], fixed, node, QUIET)
    # 4 workers (the curve's end) + 1 main on 4 cores: each process gets 0.8 of a core; the main
    # process caps the job at 0.8 x 200 = 160 samples/s
    assert r.mean_cpu_share == pytest.approx(0.8)
    assert r.jobs[0].finish_s == pytest.approx(5.0 + 10_000 / 160)
    assert r.jobs[0].finish_s > simulate([job("a", arrival=5.0)], even, node, QUIET).jobs[0].finish_s


def test_fixed_at_eight_workers_each_loses_to_even_on_a_crowded_node():
    curve = tuple(min(300.0, 100.0 * w) if w else 60.0 for w in range(17))  # saturates at 3 workers
    trace = [job(f"j{i}", curve=curve, requested=8) for i in range(4)]
    node = Node(cores=16, gpus=4)
    slow, fair = simulate(trace, fixed, node, QUIET), simulate(trace, even, node, QUIET)
    share = 16 / (4 * 8 + 4)
    assert slow.mean_cpu_share == pytest.approx(share)
    assert slow.jobs[0].finish_s == pytest.approx(10_000 / effective_throughput(curve, 8, share))
    assert slow.makespan_s > fair.makespan_s == pytest.approx(10_000 / 300)
    # the busy model lets the workers a job cannot use sleep: 4 x (3 + 1) processes fit 16 cores
    busy = simulate(trace, fixed, node, SimConfig(interval_s=1e6, contention="busy"))
    assert busy.mean_cpu_share == 1.0 and busy.makespan_s == pytest.approx(fair.makespan_s)


def test_resize_cost_is_charged_once_per_change_and_completion_frees_cores():
    node = Node(cores=5, gpus=2)
    trace = [job("a", LINEAR, work=600.0), job("b", LINEAR, arrival=10.0, work=10_000.0)]
    r = simulate(trace, even, node, SimConfig(interval_s=1e6, resize_s=0.5))
    a, b = r.jobs
    # a runs alone on 4 workers (40/s) until b arrives at 10 s (400 done); even then gives a 2, b 1:
    # a stalls 0.5 s and finishes its last 200 samples at 20/s
    assert a.finish_s == pytest.approx(10.0 + 0.5 + 200 / 20)
    assert a.resizes == 1
    # b got 1 worker at its start (free), then a's completion frees cores: 1 -> 4 workers, one stall
    assert b.resizes == 1
    assert b.finish_s == pytest.approx(a.finish_s + 0.5 + (10_000 - 10 * (a.finish_s - 10.0)) / 40)
    assert r.resizes == 2
    free = simulate(trace, even, node, SimConfig(interval_s=1e6, resize_s=0.0))
    assert free.jobs[0].finish_s == pytest.approx(20.0)


def test_jobs_queue_for_gpus_first_come_first_served():
    trace = [job("a", work=1000.0), job("b", work=1000.0, arrival=1.0), job("c", work=1000.0, arrival=2.0, gpus=2)]
    r = simulate(trace, optimal, Node(cores=8, gpus=2), QUIET)
    a, b, c = r.jobs
    assert (a.start_s, b.start_s) == (0.0, 1.0)
    assert c.start_s == pytest.approx(b.finish_s)  # c needs both GPUs
    assert r.makespan_s == pytest.approx(c.finish_s)


def test_periodic_ticks_re_decide_without_changing_a_settled_plan():
    r = simulate([job("a", work=100_000.0)], optimal, Node(cores=4, gpus=1), SimConfig(interval_s=60.0))
    assert r.decisions == 1 + int(500 // 60)  # the start, then a tick every minute until 500 s
    assert r.resizes == 0


def test_an_idle_gap_is_jumped_not_stepped_through_tick_by_tick():
    # 10^12 s between two jobs at a 1 s interval: stepping through the idle ticks would never end
    trace = [job("a", work=1000.0), job("b", arrival=1e12, work=1000.0)]
    out = []
    replay = threading.Thread(
        target=lambda: out.append(simulate(trace, optimal, Node(cores=4, gpus=1), SimConfig(interval_s=1.0))),
        daemon=True,
    )
    replay.start()
    replay.join(60)  # a guard against the hang, not a speed claim: the replay takes milliseconds
    assert out, "the replay stepped through the idle gap tick by tick"
    (r,) = out
    assert [j.finish_s for j in r.jobs] == [pytest.approx(5.0), pytest.approx(1e12 + 5.0)]
    assert r.decisions == 2 * 5  # at each start, then each second while a job runs


def test_replays_are_deterministic():
    trace = [job(f"j{i}", STEP if i % 2 else LINEAR, arrival=3.0 * i, work=2000.0) for i in range(6)]
    node = Node(cores=6, gpus=3)
    assert simulate(trace, optimal, node) == simulate(trace, optimal, node)


def test_a_job_that_can_never_progress_is_reported():
    stuck = TraceJob("z", 0.0, 10.0, (0.0, 10.0), requested_workers=0)
    with pytest.raises(SimulationError, match="no progress"):
        simulate([stuck], fixed, Node(cores=2, gpus=1))


def test_a_job_larger_than_the_node_is_refused():
    with pytest.raises(SimulationError, match="asks for 4 GPUs"):
        simulate([job("a", gpus=4)], even, Node(cores=8, gpus=2))


def test_a_replay_that_runs_past_max_intervals_stops_with_an_error():
    """A job left at 0 workers runs at T(0) = 1/s, far below its 1000/s peak: the upfront check
    (full speed) lets it through, and the replay itself stops after max_intervals ticks."""
    slow = TraceJob("slow", 0.0, 5_000.0, (1.0, 1000.0), gpus=1, requested_workers=0)
    config = SimConfig(interval_s=10.0, threshold=0.0)
    with pytest.raises(SimulationError, match=r"jobs slow still run after 110 intervals of 10 s"):
        simulate([slow], fixed, Node(cores=2, gpus=1), config, name="fixed", max_intervals=100)
    assert simulate([slow], fixed, Node(cores=2, gpus=1), config, max_intervals=1_000).makespan_s == 5_000.0


def test_a_trace_of_many_jobs_may_replay_past_max_intervals():
    # five 50-second jobs queued for one GPU: 25 intervals of 10 s at full speed, past max_intervals=10;
    # the cap is for a replay stuck far behind that, not for a long trace (trace generate --jobs 10000)
    trace = [job(f"j{i}", work=10_000.0) for i in range(5)]
    r = simulate(trace, even, Node(cores=4, gpus=1), SimConfig(interval_s=10.0), max_intervals=10)
    assert r.makespan_s == pytest.approx(250.0)


def test_a_job_that_cannot_end_in_max_intervals_even_at_full_speed_is_refused_before_replaying():
    with pytest.raises(SimulationError, match=r"job 'a' needs at least .* more than 10 intervals of 60 s"):
        simulate([job("a", work=200.0 * 60 * 11)], even, Node(cores=4, gpus=1), SimConfig(), max_intervals=10)


def test_an_arrival_too_large_to_add_an_interval_to_is_refused():
    with pytest.raises(SimulationError, match=r"arrives at 1e\+300 s, where adding 0.5 s to a time changes nothing"):
        simulate([job("a", arrival=1e300)], even, Node(cores=4, gpus=1), SimConfig())


def test_jobs_finish_at_times_as_large_as_unix_milliseconds():
    # at 1.7e12 s a step of the clock is 2^-12 s: the last sliver of a job's work took a step that
    # rounded to zero, so the job never completed and the replay spun while a later job was pending
    t0 = 1_733_400_000_000.0
    trace = [
        job("a", LINEAR, arrival=t0, work=15_280.1),
        job("b", LINEAR, arrival=t0 + 4.0, work=19_326.6),
        job("late", arrival=t0 + 3_600_000.0, work=1000.0),
    ]
    out = []
    replay = threading.Thread(
        target=lambda: out.append(simulate(trace, even, Node(cores=4, gpus=2), SimConfig(interval_s=60.0))),
        daemon=True,
    )
    replay.start()
    replay.join(60)  # a guard against the hang, not a speed claim: the replay takes milliseconds
    assert out, "a job never completed"
    (r,) = out
    assert r.jobs[2].jct_s == pytest.approx(5.0, abs=0.01)  # alone on the node: 1000 samples at 200/s
    assert all(j.finish_s > j.arrival_s for j in r.jobs)


@pytest.mark.parametrize("name", ["even", "proportional", "greedy", "maxmin", "optimal"])
def test_a_job_of_ranks_in_lockstep_is_given_a_multiple_of_them_as_the_service_gives_it(name):
    from adlrec.allocate import lockstep_curve

    # 2 ranks on 5 cores: 3 worker cores, of which a third worker would be wasted (W // 2 each)
    ddp = TraceJob("ddp", 0.0, 10_000.0, lockstep_curve(STEP[:3], 2), gpus=2, ranks=2)
    r = simulate([ddp], POLICIES[name], Node(cores=5, gpus=2), QUIET, name=name)
    assert r.jobs[0].mean_workers == pytest.approx(2.0)


@st.composite
def replays(draw):
    """A small trace (curves of any shape, zeros included), a node, settings and a policy."""
    gpus = draw(st.integers(1, 4))
    node = Node(cores=draw(st.integers(gpus, 12)), gpus=gpus)
    curve = st.lists(st.integers(0, 50), min_size=2, max_size=10).filter(lambda c: max(c) > 0)
    trace = [
        TraceJob(
            f"j{i}",
            float(draw(st.integers(0, 200))),
            float(draw(st.integers(1, 5000))),
            tuple(float(x) for x in draw(curve)),
            gpus=draw(st.integers(1, gpus)),
            requested_workers=draw(st.integers(0, 10)),
            weight=float(draw(st.integers(0, 2))),
        )
        for i in range(draw(st.integers(1, 5)))
    ]
    config = SimConfig(
        interval_s=float(draw(st.sampled_from([7, 60]))),  # a job at 1 sample/s: at most 5000 / 7 ticks
        resize_s=float(draw(st.sampled_from([0, 0.5, 5]))),
        threshold=draw(st.sampled_from([0.0, 0.05, 0.5])),
        objective=draw(st.sampled_from(["busy_gpus", "throughput", "weighted"])),
        contention=draw(st.sampled_from(CONTENTION_MODELS)),
        main_cpu=draw(st.sampled_from([0.0, 0.5, 1.0])),
    )
    return trace, node, config, draw(st.sampled_from(sorted(POLICIES)))


@settings(max_examples=200, deadline=None)
@given(replays())
def test_every_job_trains_on_its_work_no_faster_than_its_peak(replay):
    trace, node, config, name = replay
    try:
        r = simulate(trace, POLICIES[name], node, config, name=name)
    except SimulationError as exc:  # only a curve that is 0 somewhere can stop a job for good
        assert "no progress" in str(exc) and any(0.0 in j.curve for j in trace)
        return
    for j, done in zip(trace, r.jobs, strict=True):
        assert done.start_s >= j.arrival_s
        assert done.finish_s - done.start_s >= j.work_samples / j.peak * (1 - 1e-9)
    # busy GPU-time is each sample trained once, at its job's peak: every job's whole work, no more
    assert r.busy_gpu_fraction * node.gpus * r.makespan_s == pytest.approx(
        sum(j.gpus * j.work_samples / j.peak for j in trace), rel=1e-6
    )
    assert 0 <= r.busy_gpu_fraction <= 1 + 1e-9 and 0 <= r.aggregate_throughput <= 1 + 1e-9
    assert 0 < r.mean_cpu_share <= 1


def test_a_job_resized_twice_within_one_stall_pays_both_stalls():
    """Both changes cost resize_s, and the stall is served before any progress (never negative work)."""
    trace = [
        job("a", LINEAR, work=600.0),
        job("b", LINEAR, arrival=10.0, work=100_000.0),
        job("c", LINEAR, arrival=10.25, work=100_000.0),
    ]
    r = simulate(trace, even, Node(cores=7, gpus=3), SimConfig(interval_s=1e6, threshold=0.0, resize_s=0.5))
    a = r.jobs[0]
    # a alone: 6 worker cores, capped at 5 workers (50/s): 500 samples by 10 s.  b arrives: 5 worker
    # cores, even gives a 3 (stall 0.5 s); c arrives at 10.25: 4 cores, a 2 (another 0.5 s), so a
    # stalls until 10.25 + 0.25 + 0.5 = 11.0 and trains its last 100 samples at 20/s: 16.0
    assert a.resizes == 2 and a.finish_s == pytest.approx(16.0)
    # workers count while a job stalls too: (5 x 10 + 3 x 0.25 + 2 x 5.75) / 16
    assert a.mean_workers == pytest.approx(62.25 / 16)
    # stalled jobs hold their GPUs: busy GPU-time over the GPU-time from each start to each finish
    held = sum(j.finish_s - j.start_s for j in r.jobs)
    assert r.aggregate_throughput == pytest.approx(sum(j.work_samples / j.peak for j in trace) / held)


def test_a_large_job_at_the_head_of_the_queue_blocks_smaller_ones_behind_it():
    # no backfilling: `small` fits beside `a` at 2 s, but waits behind `big`, which needs both GPUs
    trace = [
        job("a", work=1000.0),
        job("big", gpus=2, arrival=1.0, work=1000.0),
        job("small", arrival=2.0, work=1000.0),
    ]
    r = simulate(trace, even, Node(cores=8, gpus=2), QUIET)
    a, big, small = r.jobs
    assert big.start_s == pytest.approx(a.finish_s) == pytest.approx(5.0)
    assert small.start_s == pytest.approx(big.finish_s) == pytest.approx(10.0)
    assert small.jct_s == pytest.approx(15.0 - 2.0)  # its queueing counts: completion minus submission
    assert small.mean_workers == 4.0  # over its run, not its queueing: alone, 4 workers (the curve's end)
    # a decision at each start and at each arrival, queued or not: a, big's arrival, small's, big, small
    assert r.decisions == 5


def test_jobs_that_arrive_together_start_in_trace_order():
    r = simulate([job("b", work=1000.0), job("a", work=1000.0)], even, Node(cores=4, gpus=1), QUIET)
    assert [(j.job_id, j.start_s) for j in r.jobs] == [("b", 0.0), ("a", pytest.approx(5.0))]


def test_the_policy_sees_the_running_jobs_in_start_order():
    # 3 worker cores for two jobs: even gives the remainder to the earlier job, b (first in the trace)
    trace = [job("b", LINEAR, work=200.0), job("a", LINEAR, work=200.0)]
    b, a = simulate(trace, even, Node(cores=5, gpus=2), QUIET).jobs
    assert b.finish_s == pytest.approx(200 / 20)  # 2 workers
    assert a.finish_s == pytest.approx(10.0 + 0.5 + (200 - 100) / 40)  # 1 worker, then 4 alone after a stall


def test_an_idle_node_counts_in_the_makespan_not_in_active_time_raw_samples_or_cpu_share():
    # a (2 GPUs, 2 workers: 200/s) runs 0..50 s, the node idles, b (3 workers: 200/s) runs 1000..1050 s
    r = simulate([job("a", gpus=2), job("b", arrival=1000.0)], even, Node(cores=4, gpus=2), QUIET)
    assert (r.makespan_s, r.active_s) == (pytest.approx(1050.0), pytest.approx(100.0))
    assert r.samples_per_s == pytest.approx(20_000 / 100)  # samples of the jobs, not x their GPUs
    assert r.mean_cpu_share == 1.0


def test_hysteresis_keeps_a_running_job_s_workers_when_a_change_gains_less_than_the_threshold():
    a_curve = (10.0, 50.0, 95.0, 100.0, 100.0, 100.0)
    b_curve = (10.0, 92.0, 100.0, 100.0)
    trace = [job("a", a_curve, work=100_000.0), job("b", b_curve, arrival=10.0, work=100_000.0)]
    node = Node(cores=6, gpus=2)
    # a alone: 3 workers (its peak).  b arrives, 4 worker cores: a 3 + b 1 keeps 1 + 0.92 = 1.92 busy
    # GPUs, a 2 + b 2 keeps 0.95 + 1 = 1.95 but moves a, which costs 0.05: 1.90, so a keeps its 3
    held = simulate(trace, optimal, node, SimConfig(interval_s=1e6, threshold=0.05)).jobs[0]
    assert (held.resizes, held.mean_workers, held.finish_s) == (0, 3.0, pytest.approx(1000.0))
    moved = simulate(trace, optimal, node, SimConfig(interval_s=1e6, threshold=0.0)).jobs[0]
    assert moved.resizes == 2  # 3 -> 2 at b's arrival, back when b finishes


def test_a_job_s_workers_fit_the_node_s_memory():
    # 100 MB per worker in 250 MB: 2 workers (20/s), though the cores allow all 5 (50/s)
    m = TraceJob("m", 0.0, 1000.0, LINEAR, mem_per_worker_mb=100)
    (done,) = simulate([m], optimal, Node(cores=8, gpus=1, memory_mb=250), QUIET).jobs
    assert (done.mean_workers, done.finish_s) == (2.0, pytest.approx(50.0))


def test_the_weighted_objective_gives_the_cores_to_the_heavier_job():
    # 2 worker cores for two 1-GPU jobs.  Busy GPUs: a 2 + b 0 = 1 + 0.5 beats a 0 + b 2 = 0.25 + 1;
    # weighted, b's weight 3 turns it: 1 + 3 x 0.5 = 2.5 against 0.25 + 3 = 3.25
    trace = [job("a", (50.0, 100.0, 200.0)), TraceJob("b", 0.0, 10_000.0, (100.0, 150.0, 200.0), weight=3.0)]
    node = Node(cores=4, gpus=2)
    a, b = simulate(trace, optimal, node, SimConfig(interval_s=1e6, threshold=0.0, objective="weighted")).jobs
    assert (b.mean_workers, b.finish_s) == (2.0, pytest.approx(50.0))
    a, b = simulate(trace, optimal, node, QUIET).jobs
    assert (a.mean_workers, a.finish_s) == (2.0, pytest.approx(50.0))


def test_a_main_process_that_never_slows_leaves_only_the_loader_contended():
    # as in test_contention_slows_fixed_when_it_oversubscribes, with --main-cpu 0: the 4 workers load
    # like 3.2, past the curve's peak at 2, so the job runs at 200/s despite the 0.8 share
    config = SimConfig(interval_s=1e6, threshold=0.0, main_cpu=0.0)
    r = simulate([job("a", arrival=5.0)], fixed, Node(cores=4, gpus=1), config)
    assert r.mean_cpu_share == pytest.approx(0.8) and r.jobs[0].finish_s == pytest.approx(5.0 + 10_000 / 200)


def test_a_trace_done_within_the_clocks_resolution_reports_no_contention_and_the_workers_given():
    # at 1e15 s the clock steps by 1/8 s, and one sample at 200/s takes 1/200 s: done at its arrival
    r = simulate([job("a", arrival=1e15, work=1.0)], optimal, Node(cores=4, gpus=1), QUIET)
    assert (r.makespan_s, r.active_s, r.busy_gpu_fraction, r.samples_per_s) == (0.0, 0.0, 0.0, 0.0)
    assert r.mean_cpu_share == 1.0 and r.jobs[0].mean_workers == 2.0  # optimal's count: the fewest at the peak


def test_a_trace_with_a_repeated_job_id_is_refused():
    with pytest.raises(SimulationError, match="job ids in a trace must be unique"):
        simulate([job("a"), job("a", arrival=1.0)], even, Node(cores=4, gpus=2))


def test_a_job_that_needs_exactly_max_intervals_at_full_speed_is_replayed():
    # 10 intervals of 60 s at 200/s, max_intervals=10: at the limit, not past it
    r = simulate([job("a", work=200.0 * 60 * 10)], even, Node(cores=4, gpus=1), SimConfig(), max_intervals=10)
    assert r.makespan_s == pytest.approx(600.0)


def test_a_replay_that_ends_on_its_last_allowed_tick_is_not_stopped():
    # as in test_a_replay_that_runs_past_max_intervals_stops_with_an_error: 1 sample/s, ideal 1.1 s, so
    # the limit is 100 + 10 x 1 = 110 ticks; 1100 samples end on the 110th, at 1100 s
    slow = TraceJob("slow", 0.0, 1_100.0, (1.0, 1000.0), gpus=1, requested_workers=0)
    config = SimConfig(interval_s=10.0, threshold=0.0)
    assert simulate([slow], fixed, Node(cores=2, gpus=1), config, max_intervals=100).makespan_s == 1_100.0


def test_the_replay_cap_allows_for_the_gpu_time_of_jobs_queued_behind_each_other():
    # twelve 50 s jobs on one GPU: 600 s at full speed, so the limit is 6 + 10 x 60 ticks; counting
    # only the longest job (50 s: 6 + 10 x 5 = 56 ticks) would stop this 60-tick replay
    trace = [job(f"j{i}", work=10_000.0) for i in range(12)]
    r = simulate(trace, even, Node(cores=4, gpus=1), SimConfig(interval_s=10.0), max_intervals=6)
    assert r.makespan_s == pytest.approx(600.0)


def test_the_replay_cap_allows_for_the_longest_job_on_a_node_of_many_gpus():
    # one 1-GPU job of 50 s at full speed on 8 GPUs: the GPU-time bound is 6.25 s, the job's own 50 s;
    # the limit is 4,960 + 10 x 5 = 5,010 ticks, and at 1 sample/s it replays 5,000
    slow = TraceJob("slow", 0.0, 50_000.0, (1.0, 1000.0), gpus=1, requested_workers=0)
    config = SimConfig(interval_s=10.0, threshold=0.0)
    assert simulate([slow], fixed, Node(cores=8, gpus=8), config, max_intervals=4_960).makespan_s == 50_000.0


def test_a_trace_out_of_arrival_order_replays_in_arrival_order_and_reports_in_trace_order():
    # b is listed first but arrives last: a starts at 0 and runs alone (50 s at 200/s) before b starts
    trace = [job("b", arrival=100.0, work=1000.0), job("a", arrival=0.0)]
    b, a = simulate(trace, even, Node(cores=4, gpus=1), QUIET).jobs
    assert (a.job_id, a.start_s, a.finish_s) == ("a", 0.0, pytest.approx(50.0))
    assert (b.job_id, b.start_s, b.finish_s) == ("b", 100.0, pytest.approx(105.0))


def test_the_replay_cap_counts_from_the_first_arrival_not_from_time_zero():
    # as in test_a_replay_that_runs_past_max_intervals_stops_with_an_error, arriving at 10^4 s: still
    # 100 + 10 x 1 intervals; counted from 0, the cap would be 10 x 1,000 more and the replay would end
    slow = TraceJob("slow", 1e4, 5_000.0, (1.0, 1000.0), gpus=1, requested_workers=0)
    config = SimConfig(interval_s=10.0, threshold=0.0)
    with pytest.raises(SimulationError, match=r"jobs slow still run after 110 intervals of 10 s"):
        simulate([slow], fixed, Node(cores=2, gpus=1), config, name="fixed", max_intervals=100)


def test_an_arrival_too_large_to_add_the_resize_cost_to_is_refused():
    # at 2^53 s the clock steps by 2 s: a 60 s interval still moves it, a 0.5 s stall does not
    with pytest.raises(SimulationError, match=r"arrives at 9\.0072e\+15 s, where adding 0\.5 s to a time changes"):
        simulate([job("a", arrival=2.0**53)], even, Node(cores=4, gpus=1), SimConfig(interval_s=60.0, resize_s=0.5))
    r = simulate([job("a", arrival=2.0**53)], even, Node(cores=4, gpus=1), SimConfig(interval_s=60.0, resize_s=0.0))
    assert r.jobs[0].start_s == 2.0**53


def test_a_job_whose_last_sliver_is_below_the_clocks_resolution_still_serves_its_resize_stall():
    # at 1.7e12 s the clock steps by 2^-12 s.  a (2 workers, 20/s) and b (1, 10/s) start together; b ends at
    # 1 s, leaving a 0.004 samples (200 us at 20/s), and a goes to 4 workers (40/s: 100 us, below a step)
    # with a 0.5 s stall.  c arrives mid-stall and moves a back to 2: a pays both stalls before its sliver
    t0 = 1_733_400_000_000.0
    trace = [
        job("a", LINEAR, arrival=t0, work=20.004),
        job("b", LINEAR, arrival=t0, work=10.0),
        job("c", LINEAR, arrival=t0 + 1.25, work=1000.0),
    ]
    a, b, _ = simulate(trace, even, Node(cores=5, gpus=2), SimConfig(interval_s=1e6, threshold=0.0, resize_s=0.5)).jobs
    assert b.finish_s == t0 + 1.0
    assert a.resizes == 2 and a.finish_s == pytest.approx(t0 + 1.25 + 0.25 + 0.5, abs=0.01)


def test_the_replay_cap_counts_each_job_s_gpu_time_on_all_its_gpus():
    # four 2-GPU jobs queued on a 2-GPU node, 10 s each at full speed: 40 s of the node, so the limit is
    # 10 + 10 x 40 ticks of 1 s; they replay at 0 workers (125/s), 320 s.  Counting a job's time on one
    # GPU only (20 s: 10 + 200 ticks) would stop it
    trace = [TraceJob(f"j{i}", 0.0, 10_000.0, (125.0, 1000.0), gpus=2, requested_workers=0) for i in range(4)]
    config = SimConfig(interval_s=1.0, threshold=0.0)
    assert simulate(trace, fixed, Node(cores=4, gpus=2), config, max_intervals=10).makespan_s == pytest.approx(320.0)


def test_the_length_check_uses_a_job_s_peak_where_its_curve_falls_past_it():
    # the peak, 200/s at 1 worker, ends 10 intervals of 60 s exactly: replayed, though the curve's last
    # point (100/s) would need 20
    peaked = TraceJob("p", 0.0, 200.0 * 60 * 10, (50.0, 200.0, 100.0))
    r = simulate([peaked], optimal, Node(cores=4, gpus=1), SimConfig(), max_intervals=10)
    assert r.makespan_s == pytest.approx(600.0)
