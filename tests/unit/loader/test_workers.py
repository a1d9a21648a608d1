"""The worker gate across start methods: a held worker goes on only once its own gate is opened."""

from __future__ import annotations

import multiprocessing

import pytest

from adlrec.loader import WorkerGate

METHODS = [m for m in ("fork", "forkserver", "spawn") if m in multiprocessing.get_all_start_methods()]


def held(gate: WorkerGate, worker_id: int, done) -> None:
    gate.wait(worker_id)
    done.put(worker_id)


@pytest.mark.parametrize("method", METHODS)
def test_each_worker_passes_its_gate_only_when_that_gate_opens(method):
    ctx = multiprocessing.get_context(method)
    gate = WorkerGate(2, ctx)
    done = ctx.Queue()
    procs = [ctx.Process(target=held, args=(gate, i, done), daemon=True) for i in range(2)]
    for p in procs:
        p.start()
    gate.open(1)
    assert done.get(timeout=60) == 1  # worker 1 passed; worker 0 is still held
    assert procs[0].is_alive()
    gate.open(1)  # opening twice writes nothing more
    gate.open_all()
    assert done.get(timeout=60) == 0
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert gate.opened == [True, True]
    gate.close()
    gate.close()  # idempotent
    gate.open(0)  # after close: a no-op, not an error


def test_a_pickled_gate_carries_only_the_workers_ends():
    gate = WorkerGate(3, multiprocessing.get_context())
    state = gate.__getstate__()
    assert state["_writers"] is None and len(state["readers"]) == 3
    gate.close()
