"""A distributed run's ranks are told, once each, what the service does and does not know of them."""

from __future__ import annotations

import logging

import torch.distributed as dist
import torch.multiprocessing as mp

from adlrec.callbacks.controller import Controller, distributed_rank
from adlrec.client import ServiceClient

CLOSED = "http://127.0.0.1:9"  # nothing listens: the controller must go on regardless


def controller() -> Controller:
    return Controller(ServiceClient(CLOSED), "node-a", interval_s=60.0, stop_wait_s=0.1)


def _rank(rank: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
    records: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("adlrec.callbacks").addHandler(handler)
    c = controller()
    c.start(None)
    c.stop()
    seen = distributed_rank()
    dist.barrier()
    dist.destroy_process_group()
    with open(f"{out}.{rank}", "w") as f:
        f.write(f"{seen}\n" + "\n".join(records))


def test_each_rank_of_a_real_two_process_group_warns_that_it_registers_alone(tmp_path):
    out = str(tmp_path / "rank")
    mp.start_processes(_rank, args=(f"file://{tmp_path / 'store'}", out), nprocs=2, start_method="fork")
    for rank in (0, 1):
        seen, *messages = (tmp_path / f"rank.{rank}").read_text().splitlines()
        assert seen == f"({rank}, 2)"
        warned = [m for m in messages if "distributed run" in m]
        assert len(warned) == 1 and f"rank {rank} of 2" in warned[0] and "Distributed training" in warned[0]


def test_a_launchers_variables_name_the_rank_before_the_process_group_is_up(monkeypatch, caplog):
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert distributed_rank() == (3, 4)
    with caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        c = controller()
        c.start(None)
        c.stop()
    assert "rank 3 of 4 of a distributed run" in caplog.text


def test_a_single_process_says_nothing_of_ranks(monkeypatch, caplog):
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert distributed_rank() == (0, 1)
    with caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        c = controller()
        c.start(None)
        c.stop()
    assert "distributed run" not in caplog.text
