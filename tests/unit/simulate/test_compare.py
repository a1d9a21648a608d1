"""Comparing policies: gains against the baseline, and the policy time from an injected clock."""

import itertools
import math

import pytest

from adlrec.allocate import even, optimal
from adlrec.simulate import (
    JobResult,
    Node,
    PolicyRun,
    SimConfig,
    SimResult,
    TraceJob,
    compare_policies,
    comparison_rows,
    simulate,
)
from adlrec.simulate.compare import comparison_csv, comparison_table


def result(policy, throughput, makespan):
    return SimResult(policy, (), makespan, makespan, 0.5, throughput, 100.0, 10, 0, 1.0)


def test_gains_are_measured_against_even_wherever_it_runs_and_against_the_first_run_without_it():
    runs = [PolicyRun(result("optimal", 0.6, 75.0), 1.0), PolicyRun(result("even", 0.5, 100.0), 1.0)]
    best, base = comparison_rows(runs)
    # throughput 0.6 / 0.5 - 1 = +20%; makespan 1 - 75 / 100 = +25% (positive: shorter)
    assert (best["throughput_vs_base_pct"], best["makespan_vs_base_pct"]) == (pytest.approx(20.0), pytest.approx(25.0))
    assert (base["throughput_vs_base_pct"], base["makespan_vs_base_pct"]) == (0.0, 0.0)
    first, second = comparison_rows(runs[::-1], baseline="proportional")  # absent: against the first run
    assert second["throughput_vs_base_pct"] == pytest.approx(20.0) and first["makespan_vs_base_pct"] == 0.0
    table = comparison_table(comparison_rows(runs[::-1], baseline="proportional"), "t", baseline="proportional")
    assert [c.header for c in table.columns[1:3]] == ["throughput vs even", "makespan vs even"]


def test_policy_time_comes_from_the_injected_clock_around_each_policy_call_only():
    trace = [TraceJob("a", 0.0, 1000.0, (50.0, 100.0, 200.0)), TraceJob("b", 1.0, 1000.0, (50.0, 100.0, 200.0))]
    clock = itertools.count(0.0, 0.25).__next__  # every reading 0.25 s after the last: 0.25 s per call
    runs = compare_policies(trace, {"even": even, "optimal": optimal}, Node(cores=6, gpus=2), SimConfig(), clock)
    for run in runs:  # each policy's own calls, not the other's, nor the replay between them
        assert run.policy_s == pytest.approx(0.25 * run.result.decisions)
        assert run.decisions_per_s == pytest.approx(4.0)
    assert PolicyRun(runs[0].result, 0.0).decisions_per_s == math.inf  # printed as "-"


def test_the_csv_has_a_header_and_six_significant_digits():
    rows = [{"policy": "even", "share": 1 / 3, "resizes": 2}]
    assert comparison_csv(rows) == "policy,share,resizes\neven,0.333333,2\n"


def test_each_policy_replays_with_its_own_policy_and_its_row_reports_its_own_result():
    # 2 worker cores for two jobs that saturate at 2: even gives 1 + 1, optimal 2 + 0 (a whole GPU busy)
    curve = (50.0, 100.0, 200.0)
    trace = [TraceJob("a", 0.0, 4000.0, curve), TraceJob("b", 0.0, 4000.0, curve), TraceJob("c", 30.0, 500.0, curve)]
    node, config = Node(cores=4, gpus=2), SimConfig(interval_s=1e6, threshold=0.0)
    runs = compare_policies(trace, {"even": even, "optimal": optimal}, node, config)
    # each run is its own policy's replay, and each row its own run's figures
    assert [run.result for run in runs] == [
        simulate(trace, even, node, config, name="even"),
        simulate(trace, optimal, node, config, name="optimal"),
    ]
    assert runs[0].result != runs[1].result
    for run, row in zip(runs, comparison_rows(runs), strict=True):
        r = run.result
        assert row == {
            "policy": r.policy,
            "aggregate_throughput": r.aggregate_throughput,
            "throughput_vs_base_pct": pytest.approx(
                100 * (r.aggregate_throughput / runs[0].result.aggregate_throughput - 1)
            ),
            "makespan_s": r.makespan_s,
            "makespan_vs_base_pct": pytest.approx(100 * (1 - r.makespan_s / runs[0].result.makespan_s)),
            "mean_jct_s": r.mean_jct_s,
            "busy_gpu_fraction": r.busy_gpu_fraction,
            "samples_per_s": r.samples_per_s,
            "cpu_share": r.mean_cpu_share,
            "resizes": r.resizes,
            "decisions": r.decisions,
            "decisions_per_s": run.decisions_per_s,
        }


def test_the_table_prints_each_figure_in_its_own_column():
    jobs = (JobResult("a", 0.0, 0.0, 3600.0, 0, 1, 1.0), JobResult("b", 0.0, 0.0, 10800.0, 0, 1, 1.0))
    # makespan 3 h, mean JCT 2 h, busy GPUs 40%, throughput per held GPU 0.5, CPU share 0.75, 3 resizes, 7 decisions
    r = SimResult("even", jobs, 10800.0, 10800.0, 0.4, 0.5, 100.0, 7, 3, 0.75)
    table = comparison_table(comparison_rows([PolicyRun(r, 2.0)]), "t")
    cells = {c.header: list(c.cells)[0] for c in table.columns}
    assert cells == {
        "policy": "even",
        "throughput vs even": "+0.0%",
        "makespan vs even": "+0.0%",
        "thr./held GPU": "0.500",
        "makespan": "3.00 h",
        "mean JCT": "2.00 h",
        "busy GPUs": "40.0%",
        "CPU share": "0.75",
        "resizes": "3",
        "decisions/s": "4",
    }


def test_a_baseline_with_no_makespan_or_throughput_gives_no_figures_against_it():
    # every job done within the clock's resolution: nothing to compare against, printed as "-", no ZeroDivisionError
    rows = comparison_rows([PolicyRun(result("even", 0.0, 0.0), 1.0), PolicyRun(result("optimal", 0.0, 0.0), 1.0)])
    assert all(math.isnan(r["throughput_vs_base_pct"]) and math.isnan(r["makespan_vs_base_pct"]) for r in rows)
    cells = [list(c.cells) for c in comparison_table(rows, "t").columns[1:3]]
    assert cells == [["-", "-"], ["-", "-"]]
