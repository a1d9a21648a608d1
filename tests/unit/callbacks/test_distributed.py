"""A distributed run's ranks: the ranks on a node agree on one job, or say plainly that each is its own."""

from __future__ import annotations

import json
import logging
import time

import torch.distributed as dist
import torch.multiprocessing as mp

from adlrec.callbacks import team as team_module
from adlrec.callbacks.controller import Controller, distributed_rank
from adlrec.callbacks.team import form_team
from adlrec.client import Assignment, ServiceClient
from tests.unit.callbacks.test_controller import Service, loader

CLOSED = "http://127.0.0.1:9"  # nothing listens: the controller must go on regardless


def controller(node: str = "node-a") -> Controller:
    return Controller(ServiceClient(CLOSED), node, interval_s=60.0, stop_wait_s=0.1)


def recorded() -> list[str]:
    """The messages adlrec.callbacks logs from now on in this (rank) process, INFO and above."""
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("adlrec.callbacks")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    return records


def _teams(rank: int, init: str, out: str, job_id: str | None) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=4)
    team = form_team("node-a" if rank < 2 else "node-b", job_id)
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(team.__dict__, f)


def teams(tmp_path, job_id: str | None) -> list[dict]:
    out = str(tmp_path / "rank")
    args = (f"file://{tmp_path / 'store'}", out, job_id)
    mp.start_processes(_teams, args=args, nprocs=4, start_method="fork")
    return [json.loads((tmp_path / f"rank.{r}").read_text()) for r in range(4)]


def test_the_ranks_on_each_node_of_a_real_process_group_form_one_job_led_by_their_lowest_rank(tmp_path):
    t = teams(tmp_path, None)
    assert [x["leader"] for x in t] == [True, False, True, False]
    assert {x["ranks"] for x in t} == {2} and {x["nodes"] for x in t} == {2} and {x["world"] for x in t} == {4}
    base = t[0]["job_id"].removesuffix("-0")
    assert [x["job_id"] for x in t] == [f"{base}-0", f"{base}-0", f"{base}-1", f"{base}-1"]


def test_a_job_id_given_to_the_ranks_names_the_job_on_each_node(tmp_path):
    t = teams(tmp_path, "x" * 128)  # the longest id the service takes: the node's suffix still fits
    assert [x["job_id"] for x in t] == ["x" * 126 + "-0"] * 2 + ["x" * 126 + "-1"] * 2


def _single_node(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    records = recorded()
    c = controller()
    c.registration["job_id"] = "run-7"
    c.start(None)
    c.stop()
    first = team_module._groups[0][1]
    c.start(None)  # a second fit: the ranks agree again, over the same gloo group
    c.stop()
    groups = [g is first for _, g in team_module._groups]
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump({"team": c.team.__dict__, "records": records, "groups": groups}, f)


def test_on_one_node_the_job_keeps_its_given_id_and_only_the_leader_says_it_leads(tmp_path):
    out = str(tmp_path / "rank")
    mp.start_processes(_single_node, args=(f"file://{tmp_path / 'store'}", out), nprocs=2, start_method="fork")
    got = [json.loads((tmp_path / f"rank.{r}").read_text()) for r in range(2)]
    assert [g["team"]["job_id"] for g in got] == ["run-7", "run-7"]
    assert [g["team"]["leader"] for g in got] == [True, False]
    assert [g["groups"] for g in got] == [[True], [True]]  # one group, made at the first start
    assert any("rank 0 leads the 2 ranks on node node-a as job run-7" in m for m in got[0]["records"])
    assert not any("leads" in m or "of its own" in m for m in got[1]["records"])
    assert not any("was given" in m for g in got for m in g["records"])  # no ranks= given: none to correct


def _one_rank_never_starts(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    records = recorded()
    team = form_team("node-a", timeout_s=1.0) if rank == 0 else None  # rank 1 does not start its adapter yet
    dist.barrier()  # rank 1 waits here for rank 0 to have given up
    late = form_team("node-a", timeout_s=1.0) if rank == 1 else None  # and then starts it alone, too late
    dist.barrier()
    again = form_team("node-a", timeout_s=30.0)  # a later start of both: they agree
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump({"team": (team or late) and (team or late).__dict__, "again": again.__dict__, "records": records}, f)


def test_a_rank_that_never_starts_its_adapter_holds_the_others_up_only_so_long(tmp_path):
    out = str(tmp_path / "rank")
    mp.start_processes(
        _one_rank_never_starts, args=(f"file://{tmp_path / 'store'}", out), nprocs=2, start_method="fork"
    )
    got = [json.loads((tmp_path / f"rank.{r}").read_text()) for r in range(2)]
    for g in got:
        assert g["team"] is None
        assert any("could not agree on one job" in m and "each registers as its own" in m for m in g["records"])
    assert [g["again"]["leader"] for g in got] == [True, False] and {g["again"]["ranks"] for g in got} == {2}


def _one_rank_late_at_a_second_start(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    first = form_team("node-a", timeout_s=3.0)  # the first fit: both start, over a gloo group made now
    dist.barrier()
    late = form_team("node-a") if rank == 0 else None  # the second: rank 1 starts its adapter only ...
    dist.barrier()
    late = form_team("node-a") if rank == 1 else late  # ... after rank 0 gave up on it, alone
    dist.barrier()
    again = form_team("node-a", timeout_s=30.0)  # the third: both start
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump({"teams": [t and t.ranks for t in (first, late, again)]}, f)


def test_a_gather_that_timed_out_is_not_tried_again_over_its_group(tmp_path):
    """A gather that timed out leaves its group unusable: the next start makes another, and the ranks agree
    again (reused, the group would fail every start after)."""
    out = str(tmp_path / "rank")
    mp.start_processes(
        _one_rank_late_at_a_second_start, args=(f"file://{tmp_path / 'store'}", out), nprocs=2, start_method="fork"
    )
    got = [json.loads((tmp_path / f"rank.{r}").read_text()) for r in range(2)]
    assert [g["teams"] for g in got] == [[2, None, 2], [2, None, 2]]


def test_outside_a_process_group_there_is_no_team():
    assert form_team("node-a") is None


def _alone(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=1)
    team = form_team("node-a")
    groups = len(team_module._groups)
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump({"team": team and team.__dict__, "groups": groups}, f)


def test_a_process_group_of_one_rank_is_no_team(tmp_path):
    """One process in a process group of its own: a job as any, not a team of one that makes itself a gloo
    group and a new job id at each start."""
    out = str(tmp_path / "rank")
    mp.start_processes(_alone, args=(f"file://{tmp_path / 'store'}", out), nprocs=1, start_method="fork")
    assert json.loads((tmp_path / "rank.0").read_text()) == {"team": None, "groups": 0}


def test_a_launchers_variables_name_the_rank_before_the_process_group_is_up(monkeypatch, caplog):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert distributed_rank() == (3, 4)
    with caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        c = controller()
        c.start(None)
        c.stop()
    assert c.team is None
    assert "rank 3 of 4 of a distributed run registers as a job of its own" in caplog.text
    assert "process group is not up" in caplog.text


def test_a_launchers_variables_that_are_not_both_whole_numbers_are_no_distributed_run(monkeypatch):
    """``int('')`` would raise in the adapter's start, into the training loop."""
    for rank, world in (("1", ""), ("", "4"), ("1", "four")):
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("WORLD_SIZE", world)
        assert distributed_rank() == (0, 1)


def test_ranks_without_a_process_group_keep_a_long_job_id_within_the_services_bound(monkeypatch, caplog):
    """Each rank's ``-rank<r>`` is appended within the 128 characters the service takes: past them, the
    service refused the registration and the rank trained unplanned."""
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    service = Service()
    c = Controller(service, "n", interval_s=3600, registration={"job_id": "x" * 128, "ranks": 4}, stop_wait_s=10)
    with caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        c.start(None)
        c.stop()
    assert service.registered == [{"job_id": "x" * 122 + "-rank3", "ranks": 1}]
    assert "ranks=4 was given, but rank 3 registers as a job of its own: ranks=1" in caplog.text


def test_a_single_process_says_nothing_of_ranks(monkeypatch, caplog):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed_rank() == (0, 1)
    with caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        c = controller()
        c.start(None)
        c.stop()
    assert "distributed run" not in caplog.text


def _ranks_given(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    records = recorded()
    service = Service()
    c = Controller(service, "node-a", interval_s=60.0, registration={"ranks": 4}, stop_wait_s=10)
    c.start(None)  # ranks=4: the user's own count, wrong for this run: 2 ranks on this node
    c.stop()
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump({"team": c.team.__dict__, "records": records, "registered": service.registered}, f)


def test_a_ranks_argument_that_is_not_the_teams_size_is_overridden_and_said_so(tmp_path):
    out = str(tmp_path / "rank")
    mp.start_processes(_ranks_given, args=(f"file://{tmp_path / 'store'}", out), nprocs=2, start_method="fork")
    got = [json.loads((tmp_path / f"rank.{r}").read_text()) for r in range(2)]
    assert [g["team"]["ranks"] for g in got] == [2, 2]
    assert got[0]["registered"] == [{"ranks": 2, "job_id": got[0]["team"]["job_id"]}] and got[1]["registered"] == []
    said = [m for m in got[0]["records"] if "ranks=4" in m]
    assert len(said) == 1 and "2 ranks of this run on node node-a" in said[0] and "registers ranks=2" in said[0]
    assert not any("ranks=4" in m for m in got[1]["records"])  # the leader says it, once


def _roles(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    service = Service([Assignment(1, 1, "active", new=True)])
    c = Controller(service, "node-a", interval_s=0.05, registration={"job_id": "run-9"}, stop_wait_s=10)
    c.start(loader(workers=2))
    deadline = time.monotonic() + 30
    while len(service.follows) + len(service.beats) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    c.stop()
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(
            {
                "registered": service.registered,
                "beats": len(service.beats),
                "follows": service.follows,
                "finished": service.finished,
                "applied": c.applied,
            },
            f,
        )


def test_the_leader_registers_reports_and_finishes_the_job_and_the_follower_only_reads_and_applies_it(tmp_path):
    """A follower that registered and reported too would restart the job's life at the service, send its
    figures beside the leader's, and end the job while the leader still trains."""
    out = str(tmp_path / "rank")
    mp.start_processes(_roles, args=(f"file://{tmp_path / 'store'}", out), nprocs=2, start_method="fork")
    leader, follower = (json.loads((tmp_path / f"rank.{r}").read_text()) for r in range(2))
    assert leader["registered"] == [{"job_id": "run-9", "ranks": 2, "requested_workers": 2}]
    assert leader["beats"] >= 2 and leader["follows"] == [] and leader["finished"] == 1
    assert follower["registered"] == [] and follower["beats"] == 0 and follower["finished"] == 0
    assert follower["follows"][0] == ["run-9", True]  # its first read of this run: the plan is new to it
    assert all(f == ["run-9", False] for f in follower["follows"][1:]) and len(follower["follows"]) >= 2
    assert leader["applied"] == follower["applied"] == [[1, 1]]
