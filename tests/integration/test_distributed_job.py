"""A distributed run against a real service on port 0: its two ranks on one node are one job, planned as a
whole, and both apply the plan to their real, resizable loaders."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DistributedSampler

from adlrec.callbacks import ADLLoop
from adlrec.loader import ResizableLoader
from adlrec.service import create_app
from tests.factories import Indices
from tests.service_helpers import LiveServer, service_settings

STEEP = [10.0, 50.0, 90.0, 100.0, 100.0, 100.0]  # one rank's curve: it peaks at 3 workers
N, EPOCHS = 240, 4
ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).parent / "scripts"


def _rank(rank: int, init: str, url: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    data = Indices(N)
    sampler = DistributedSampler(data, num_replicas=2, rank=rank, shuffle=True, seed=0)
    ld = ResizableLoader(data, batch_size=4, sampler=sampler, num_workers=1, multiprocessing_context="fork", handover=0)
    epochs = []
    with ld, ADLLoop(ld, url=url, token="s3cret", node="n1", curve=STEEP, interval_s=0.1) as adl:
        for epoch in range(EPOCHS):
            sampler.set_epoch(epoch)
            seen = []
            for batch in adl.iterate():
                dist.all_reduce(torch.zeros(1))  # the ranks step together, as DDP's gradient sync makes them
                seen += batch.tolist()
                time.sleep(0.02)
            epochs.append(seen)
        order = []
        for epoch in range(EPOCHS):
            sampler.set_epoch(epoch)
            order.append(list(sampler))
        result = {
            "team": adl.controller.team.__dict__,
            "applied": adl.controller.applied,
            "workers": ld.num_workers,
            "epochs": epochs,
            "order": order,
        }
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        json.dump(result, f)


def test_the_ranks_of_a_run_are_one_job_and_each_applies_its_plan(tmp_path):
    settings = service_settings(tmp_path, service_debounce_s=0.05)  # 8 cores
    with LiveServer(create_app(settings)) as srv:
        args = (f"file://{tmp_path / 'store'}", srv.url, str(tmp_path / "rank"))
        mp.start_processes(_rank, args=args, nprocs=2, start_method="spawn")
        jobs = httpx.get(f"{srv.url}/jobs", timeout=10).json()
        plans = httpx.get(f"{srv.url}/plans", timeout=10).json()["plans"]
    got = [json.loads((tmp_path / f"rank.{r}").read_text()) for r in range(2)]
    job_id = got[0]["team"]["job_id"]
    assert [g["team"]["job_id"] for g in got] == [job_id, job_id]
    assert [g["team"]["leader"] for g in got] == [True, False]
    # one job, registered by the leader, with the run's two ranks, their GPUs and main processes
    assert [(j["job_id"], j["ranks"], j["gpus"], j["main_cores"], j["status"]) for j in jobs] == [
        (job_id, 2, 2, 2, "finished")
    ]
    assert jobs[0]["requested_workers"] == 1  # each rank's num_workers
    # 8 cores less 2 main processes: 6 worker cores, 3 a rank reaches its peak: the whole job at its peak
    first = plans[-1]
    assert first["workers"] == {job_id: 6} and first["throughput"] == {job_id: 200.0}
    for g in got:  # both ranks applied it: each runs 3 workers, and lost no sample of its shard
        assert g["applied"][0] == [first["plan_id"], 3]
        assert g["workers"] == 3
        assert g["epochs"] == g["order"]
    assert sorted(i for g in got for i in g["epochs"][0]) == list(range(N))


def test_a_lightning_ddp_run_is_one_job_and_both_ranks_apply_its_plan(tmp_path):
    """The user's own command: a script whose Trainer runs DDP on 2 processes, Lightning's launcher starting
    the second by running the script again."""
    pytest.importorskip("lightning")
    settings = service_settings(tmp_path, service_debounce_s=0.05)
    env = os.environ | {"PYTHONPATH": str(ROOT), "MLFLOW_DISABLE_TELEMETRY": "true"}
    with LiveServer(create_app(settings)) as srv:
        out = str(tmp_path / "rank")
        run = subprocess.run(
            [sys.executable, str(SCRIPTS / "ddp_lightning.py"), srv.url, out],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr[-3000:]
        jobs = httpx.get(f"{srv.url}/jobs", timeout=10).json()
        plans = httpx.get(f"{srv.url}/plans", timeout=10).json()["plans"]
    got = [json.loads((tmp_path / f"rank.{r}").read_text()) for r in range(2)]
    job_id = got[0]["team"]["job_id"]
    assert [(j["job_id"], j["ranks"], j["status"]) for j in jobs] == [(job_id, 2, "finished")]
    first = plans[-1]
    assert first["workers"] == {job_id: 6}
    for g in got:
        assert g["applied"][0] == [first["plan_id"], 3] and g["workers"] == 3
        assert all(len(e) == N // 2 for e in g["epochs"])
    for epoch in range(4):  # the two shards of each epoch: every sample once
        assert sorted(got[0]["epochs"][epoch] + got[1]["epochs"][epoch]) == list(range(N))


def test_the_runnable_lightning_script_trains_a_model_py_with_ddp_as_one_job(tmp_path, tiny_job_path):
    """``examples/train_lightning.py --devices 2``: what a user types for a DDP run of a model.py."""
    pytest.importorskip("lightning")
    settings = service_settings(tmp_path, service_debounce_s=0.05, service_token=None)
    env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path / "d"), "MLFLOW_DISABLE_TELEMETRY": "true"}
    script = ROOT / "examples" / "train_lightning.py"
    with LiveServer(create_app(settings)) as srv:
        argv = [
            str(tiny_job_path),
            "--devices",
            "2",
            "--epochs",
            "3",
            "--url",
            srv.url,
            "--node",
            "n1",
            "--interval",
            "0.1",
        ]
        run = subprocess.run(
            [sys.executable, str(script), *argv], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        jobs = httpx.get(f"{srv.url}/jobs", timeout=10).json()
    assert run.returncode == 0, run.stderr[-3000:]
    said = sorted(line for line in run.stdout.splitlines() if line.startswith("rank "))
    assert [line.split(";")[0] for line in said] == ["rank 0: trained 96 samples", "rank 1: trained 96 samples"]
    assert [(j["node"], j["ranks"], j["gpus"], j["status"], j["curve_source"]) for j in jobs] == [
        ("n1", 2, 2, "finished", "analytic")
    ]
    # probed once for the node, by the process the user started: the rank Lightning started took its features
    assert run.stderr.count("train_lightning.py: probed the job in") == 1, run.stderr[-3000:]


def test_ranks_without_a_process_group_are_jobs_of_their_own_though_given_one_job_id(tmp_path, monkeypatch):
    """Before the process group is up (a launcher's RANK and WORLD_SIZE only), each rank registers a job of
    its own, as its warning says: the job_id= every rank was given must not make them one job, registered
    again by each rank (its measurements forgotten) and fed each rank's heartbeats, and a ranks= each was
    given must not count the run's processes that many times over."""
    from adlrec.callbacks.controller import Controller
    from adlrec.client import ServiceClient

    settings = service_settings(tmp_path, service_token=None)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with LiveServer(create_app(settings)) as srv:
        controllers = []
        for rank in range(2):  # the two ranks' adapters, as each rank's script makes them
            monkeypatch.setenv("RANK", str(rank))
            c = Controller(
                ServiceClient(srv.url),
                "n1",
                interval_s=60.0,
                registration={"job_id": "run-7", "curve": STEEP, "ranks": 2},
            )
            c.start(None)
            controllers.append(c)
        for c in controllers:
            c.stop()
        jobs = httpx.get(f"{srv.url}/jobs", timeout=10).json()
    assert sorted((j["job_id"], j["ranks"], j["status"]) for j in jobs) == [
        ("run-7-rank0", 1, "finished"),
        ("run-7-rank1", 1, "finished"),
    ]


@pytest.mark.parametrize("device", ["emulate:5", "cpu"])
def test_the_runnable_plain_loop_script_under_torchrun_is_one_job_of_two_ranks(tmp_path, tiny_job_path, device):
    """``torchrun --nproc-per-node 2 examples/train_loop.py``: what a user types for a DDP run of a plain loop
    (``cpu``: a real DistributedDataParallel model on gloo; ``emulate``: a timed step the ranks sync after)."""
    settings = service_settings(tmp_path, service_debounce_s=0.05, service_token=None)
    env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path / "d"), "MLFLOW_DISABLE_TELEMETRY": "true"}
    script = ROOT / "examples" / "train_loop.py"
    with LiveServer(create_app(settings)) as srv:
        argv = [str(tiny_job_path), "--device", device, "--epochs", "3", "--url", srv.url, "--node-name", "n1"]
        run = subprocess.run(
            [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", str(script)]
            + argv
            + ["--interval", "0.1", "--job-id", "loop-ddp"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        jobs = httpx.get(f"{srv.url}/jobs", timeout=10).json()
    assert run.returncode == 0, run.stderr[-3000:]
    said = sorted(
        (json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")), key=lambda o: o["rank"]
    )
    # each rank trains its half of the 64 samples, 3 epochs
    assert [(o["rank"], o["world_size"], o["samples"]) for o in said] == [(0, 2, 96), (1, 2, 96)]
    assert "rank 0 leads the 2 ranks on node n1 as job loop-ddp" in run.stderr
    # one probe for the node, not two sharing its cores
    assert re.findall(r"rank (\d) probed the job for its node", run.stderr) == ["0"]
    assert [(j["job_id"], j["node"], j["ranks"], j["gpus"], j["main_cores"], j["status"]) for j in jobs] == [
        ("loop-ddp", "n1", 2, 2, 2, "finished")
    ]
