"""The service's decision as a pure function: snapshots in, plans out (no store, no clock)."""

from __future__ import annotations

from adlrec.allocate import POLICIES
from adlrec.schemas import AllocationPlan, AllocationRequest
from adlrec.service.recompute import compute_plans, effective_curve, node_request
from adlrec.service.records import ACTIVE, JobRecord, JobSpec, NodeInfo, PlanRecord, Snapshot

NODE = NodeInfo("n1", cores=6, memory_mb=10_000)
STEEP = (10.0, 50.0, 90.0, 100.0, 100.0, 100.0)
FLAT = (80.0, 95.0, 100.0, 100.0, 100.0, 100.0)


def job(job_id: str, curve=STEEP, node: str = "n1", reported: int | None = None, **spec) -> JobRecord:
    s = JobSpec(job_id=job_id, node=node, curve=curve, curve_source="explicit", **spec)
    return JobRecord(spec=s, status=ACTIVE, registered_at=0.0, last_seen=0.0, reported_workers=reported)


def plan_record(plan_id: int, node: str, workers: dict[str, int]) -> PlanRecord:
    plan = AllocationPlan("optimal", workers, dict.fromkeys(workers, 1.0), 1.0, 0.0, 0, 0, {})
    return PlanRecord(plan_id, node, 0.0, plan, AllocationRequest(cores=1, memory_mb=0, jobs=()))


def test_measured_points_replace_predicted_ones_and_nothing_else():
    assert effective_curve((1.0, 2.0, 3.0), {1: 9.0, 7: 5.0}) == (1.0, 9.0, 3.0)


def test_each_node_gets_its_own_request_and_an_optimal_plan():
    snap = Snapshot(
        nodes={"n1": NODE, "n2": NodeInfo("n2", 4, 1000)},
        jobs=(job("a"), job("b", curve=FLAT), job("c", node="n2")),
    )
    out = compute_plans(snap, "optimal", "busy_gpus", 0.0)
    assert [o.node for o in out] == ["n1", "n2"]
    n1, n2 = out
    assert n1.changed and n1.plan.workers == {"a": 3, "b": 1}  # 6 cores - 2 main processes
    assert n2.changed and n2.plan.workers == {"c": 3}
    assert n1.request.cores == 6 and [j.job_id for j in n1.request.jobs] == ["a", "b"]


def test_a_measurement_that_contradicts_the_prediction_moves_workers():
    snap = Snapshot(nodes={"n1": NODE}, jobs=(job("a"), job("b", curve=FLAT)))
    before = compute_plans(snap, "optimal", "busy_gpus", 0.0)[0].plan.workers
    # job a turns out to reach its peak with 1 worker; job b is slower than predicted until 3
    measured = {"a": {1: 100.0, 2: 100.0}, "b": {1: 40.0, 2: 60.0}}
    after = compute_plans(Snapshot(nodes={"n1": NODE}, jobs=snap.jobs, points=measured), "optimal", "busy_gpus", 0.0)
    assert before == {"a": 3, "b": 1}
    assert after[0].plan.workers["a"] < 3 and after[0].plan.workers["b"] > 1


def test_an_unchanged_allocation_is_not_a_new_plan():
    snap = Snapshot(nodes={"n1": NODE}, jobs=(job("a"), job("b", curve=FLAT)))
    first = compute_plans(snap, "optimal", "busy_gpus", 0.0)[0]
    again = Snapshot(nodes=snap.nodes, jobs=snap.jobs, latest={"n1": plan_record(1, "n1", first.plan.workers)})
    (o,) = compute_plans(again, "optimal", "busy_gpus", 0.0)
    assert not o.changed and o.plan.workers == first.plan.workers


def test_a_node_whose_jobs_all_left_gets_an_empty_plan_once():
    snap = Snapshot(nodes={"n1": NODE}, jobs=(), latest={"n1": plan_record(3, "n1", {"a": 2})})
    (o,) = compute_plans(snap, "optimal", "busy_gpus", 0.0)
    assert o.changed and o.plan.workers == {}
    empty = Snapshot(nodes={"n1": NODE}, jobs=(), latest={"n1": plan_record(4, "n1", {})})
    assert compute_plans(empty, "optimal", "busy_gpus", 0.0) == []


def test_current_workers_come_from_the_report_else_from_the_plan():
    latest = plan_record(1, "n1", {"a": 2, "b": 1})
    req = node_request(NODE, (job("a", reported=4), job("b")), {}, latest, "busy_gpus", 0.1)
    assert [j.current_workers for j in req.jobs] == [4, 1]
    assert req.threshold == 0.1


def test_an_infeasible_node_reports_why_and_the_others_still_get_plans():
    snap = Snapshot(
        nodes={"n1": NodeInfo("n1", 2, 1000), "n2": NODE},
        jobs=(job("a", min_workers=3), job("b", node="n2")),
    )
    bad, good = compute_plans(snap, "greedy", "busy_gpus", 0.0)
    assert bad.error == "2 cores cannot hold the jobs' 1 main process and 3 minimum workers"
    # the least it can be asked for: every job at its minimum (it kept its last plan, which a newcomer was not in)
    assert bad.changed and (bad.plan.policy, bad.plan.workers, bad.plan.cores_used) == ("minimum", {"a": 3}, 4)
    assert bad.plan.reasons["a"] == "3 workers, 100% of its peak; no plan fits the node, so every job gets its minimum"
    assert good.changed and good.plan.workers == {"b": 3}  # greedy stops at the peak


def test_a_newcomer_that_overfills_a_node_gets_its_minimum_as_every_job_does_and_once():
    # 2 cores; a planned at 1 worker; b and c came since: 3 main processes.  Keeping the last plan left b and c
    # with the 8 workers their scripts asked for, and a with its 1
    tight = NodeInfo("n1", 2, 10_000)
    jobs = (job("a", reported=1), job("b", requested_workers=8), job("c", requested_workers=8, min_workers=1))
    snap = Snapshot(nodes={"n1": tight}, jobs=jobs, latest={"n1": plan_record(1, "n1", {"a": 1})})
    (out,) = compute_plans(snap, "optimal", "busy_gpus", 0.1)
    assert out.error == "2 cores cannot hold the jobs' 3 main processes and 1 minimum worker"
    assert out.changed and out.plan.workers == {"a": 0, "b": 0, "c": 1} and out.plan.cores_used == 4
    again = Snapshot(nodes=snap.nodes, jobs=jobs, latest={"n1": plan_record(2, "n1", out.plan.workers)})
    (steady,) = compute_plans(again, "optimal", "busy_gpus", 0.1)
    assert not steady.changed and steady.error == out.error  # stored once; the problem still said


def test_a_job_of_ranks_is_planned_whole_from_one_ranks_curve_measurements_and_bounds():
    # 2 ranks on 8 cores: 2 main processes, 6 worker cores; each rank measured 70 samples/s at 2 workers
    ranked = job("ddp", reported=2, ranks=2, gpus=2, main_cores=2, min_workers=1, max_workers=4, requested_workers=8)
    demand = node_request(NodeInfo("n1", 8, 10_000), (ranked,), {"ddp": {2: 70.0}}, None, "busy_gpus", 0.0).jobs[0]
    # the job's curve over its total workers: twice a rank's at the floor of half of them, the measured point in place
    assert demand.curve == (20.0, 20.0, 100.0, 100.0, 140.0, 140.0) + (200.0,) * 5
    assert (demand.min_workers, demand.max_workers, demand.current_workers, demand.requested_workers) == (2, 8, 4, 16)
    assert (demand.gpus, demand.main_cores) == (2, 2)
    out = compute_plans(Snapshot(nodes={"n1": NodeInfo("n1", 8, 10_000)}, jobs=(ranked,)), "optimal", "busy_gpus", 0.0)
    assert out[0].plan.workers == {"ddp": 6} and out[0].plan.throughput == {"ddp": 200.0}


def test_beside_a_job_of_ranks_the_optimum_gives_it_multiples_of_its_ranks():
    # 9 cores, 3 main processes: 6 worker cores; a lone worker more for the 2-rank job would be wasted
    snap = Snapshot(nodes={"n1": NodeInfo("n1", 9, 10_000)}, jobs=(job("ddp", ranks=2, gpus=2, main_cores=2), job("b")))
    plan = compute_plans(snap, "optimal", "busy_gpus", 0.0)[0].plan
    assert plan.workers["ddp"] % 2 == 0 and sum(plan.workers.values()) <= 6


def test_every_policy_the_service_runs_gives_a_job_of_ranks_workers_in_multiples_of_them():
    # 13 cores, 3 main processes: 10 worker cores; the 2 ranks reach their peak at 3 workers each
    snap = Snapshot(
        nodes={"n1": NodeInfo("n1", 13, 10_000)},
        jobs=(job("ddp", ranks=2, gpus=2, main_cores=2, requested_workers=3), job("b")),
    )
    plans = {p: compute_plans(snap, p, "busy_gpus", 0.0)[0].plan.workers for p in sorted(POLICIES)}
    assert all(w["ddp"] % 2 == 0 for w in plans.values()), plans
    # greedy stopped at the job's first worker, worth nothing alone: the 2 ranks got none of 7 spare cores
    assert plans["greedy"] == {"ddp": 6, "b": 3}


def test_a_job_record_the_allocator_refuses_costs_only_its_own_node_a_plan():
    # a record written by an older adlrec or another process: a minimum past its curve's last point
    snap = Snapshot(nodes={"n1": NODE, "n2": NODE}, jobs=(job("a", min_workers=9), job("b", node="n2")))
    bad, good = compute_plans(snap, "optimal", "busy_gpus", 0.0)
    assert (bad.node, bad.request, bad.plan, bad.changed) == ("n1", None, None, False)
    assert "job 'a': need 0 <= min_workers (9)" in bad.error
    assert good.changed and good.plan.workers == {"b": 3}


def test_under_the_weighted_objective_the_heavier_job_gets_the_scarce_cores():
    snap = Snapshot(nodes={"n1": NODE}, jobs=(job("a", weight=5.0), job("b")))  # 4 worker cores for two jobs
    assert compute_plans(snap, "optimal", "busy_gpus", 0.0)[0].plan.workers == {"a": 2, "b": 2}  # weight unused
    assert compute_plans(snap, "optimal", "weighted", 0.0)[0].plan.workers == {"a": 3, "b": 1}


def test_a_node_s_memory_bounds_the_workers_of_a_job_that_needs_it():
    snap = Snapshot(nodes={"n1": NODE}, jobs=(job("a", mem_per_worker_mb=4000),))  # 10 GB: 2 such workers
    plan = compute_plans(snap, "optimal", "busy_gpus", 0.0)[0].plan
    assert plan.workers == {"a": 2} and plan.memory_used_mb == 8000  # 3 would reach its peak
