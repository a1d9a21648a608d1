"""The worker gate across start methods: a held worker goes on only once its own gate is opened; what
forked workers inherit."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

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
    unopened = WorkerGate(1, ctx)
    unopened.close()
    unopened.open(0)  # after close: a no-op, not an error


def test_a_pickled_gate_carries_only_the_workers_ends():
    gate = WorkerGate(3, multiprocessing.get_context())
    state = gate.__getstate__()
    assert state["_writers"] is None and len(state["readers"]) == 3
    gate.close()


INHERITED_NUMPY_RANDOM = """
import sys
import torch
assert "numpy.random" not in sys.modules  # numpy 2 loads it lazily; torch does not
from adlrec.loader import ResizableLoader

class ModuleId:
    def __len__(self):
        return 8
    def __getitem__(self, i):  # in the worker: which numpy.random object its RNG was seeded through
        return id(sys.modules.get("numpy.random"))

fork_server = sys.argv[1] == "zygote"
with ResizableLoader(ModuleId(), 1, num_workers=1, multiprocessing_context="fork", fork_server=fork_server) as loader:
    it = iter(loader)
    ids = {next(it).item()}
    loader.resize(2)  # the new pool's workers: forked by the training process, or by the zygote
    ids |= {b.item() for b in it}
print("same" if ids == {id(sys.modules.get("numpy.random"))} else f"different: {ids}")
"""


@pytest.mark.skipif("fork" not in METHODS, reason="forked workers only")
@pytest.mark.parametrize("forked_by", ["training process", "zygote"])
def test_forked_workers_inherit_numpy_random_instead_of_importing_it_each(forked_by):
    """torch seeds numpy's global RNG in every worker: a worker that imports numpy.random itself spends
    most of its start-up CPU on it (bench/worker_start.py), taken from the running pool at a resize."""
    done = subprocess.run(
        [sys.executable, "-c", INHERITED_NUMPY_RANDOM, "zygote" if forked_by == "zygote" else "plain"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "same"
