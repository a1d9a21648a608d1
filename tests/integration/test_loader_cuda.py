"""The resizable loader in a training process that uses CUDA (skipped where torch sees no GPU).

What only a GPU machine shows: batches come out pinned (``pin_memory=True`` pins nothing without an
accelerator), and workers and the zygote forked from a process whose CUDA context is up keep the
epoch's order while a real training step runs on the GPU between resizes.
"""

from __future__ import annotations

import pytest
import torch

from adlrec.loader import ResizableLoader
from tests.factories import Indices

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device here")

# after batch k, resize to n: grow (a pool woven in), replace from 0, drop, grow again
SCHEDULE = {2: 4, 8: 0, 12: 3, 20: 1, 26: 2}


def _loader(**kw) -> ResizableLoader:
    return ResizableLoader(
        Indices(240), 4, shuffle=True, seed=7, num_workers=2, handover=1, multiprocessing_context="fork", **kw
    )


@needs_cuda
@pytest.mark.parametrize("fork_server", [False, True], ids=["fork", "zygote"])
def test_pinned_batches_keep_the_epochs_order_through_resizes_beside_a_gpu_step(fork_server):
    device = torch.device("cuda")
    model = torch.nn.Linear(1, 1).to(device)  # the CUDA context is up before any worker is forked
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    with _loader() as plain:
        expected = [b.tolist() for b in plain]

    got, pinned = [], []
    with _loader(pin_memory=True, fork_server=fork_server) as loader:
        for i, batch in enumerate(loader, start=1):
            pinned.append(batch.is_pinned())
            x = batch.to(device, non_blocking=True).float().unsqueeze(1)
            opt.zero_grad()
            model(x).pow(2).mean().backward()
            opt.step()
            got.append(batch.tolist())
            if i in SCHEDULE:
                loader.resize(SCHEDULE[i])
        torch.cuda.synchronize()
        assert loader.num_workers == SCHEDULE[max(SCHEDULE)]

    assert got == expected
    assert all(pinned), f"unpinned batches at {[i for i, p in enumerate(pinned, 1) if not p]}"
