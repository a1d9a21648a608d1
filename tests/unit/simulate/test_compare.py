"""Comparing policies: gains against the baseline, and the policy time from an injected clock."""

import itertools
import math

import pytest

from adlrec.allocate import even, optimal
from adlrec.simulate import Node, PolicyRun, SimConfig, SimResult, TraceJob, compare_policies, comparison_rows
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
