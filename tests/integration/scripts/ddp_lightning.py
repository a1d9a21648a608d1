"""A Lightning DDP run on 2 CPU processes with ADLCallback, as a user runs it: `python ddp_lightning.py URL OUT`.

Lightning's launcher starts the second rank by running this file again (LOCAL_RANK=1); each rank writes
what it saw to ``OUT.<rank>``.  Run by tests/integration/test_distributed_job.py against a real service.
"""

from __future__ import annotations

import json
import sys
import time

import lightning as L
import torch
from torch.utils.data import DistributedSampler

from adlrec.callbacks import ADLCallback
from adlrec.loader import ResizableLoader

STEEP = [10.0, 50.0, 90.0, 100.0, 100.0, 100.0]  # one rank's curve: it peaks at 3 workers
N = 240


class Indices(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> int:
        return i


class Tiny(L.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.seen: list[list[int]] = []

    def on_train_epoch_start(self) -> None:
        self.seen.append([])

    def training_step(self, batch, batch_idx):
        self.seen[-1] += batch.tolist()
        time.sleep(0.02)
        return self.layer(batch.float().unsqueeze(1)).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def main(url: str, out: str) -> None:
    callback = ADLCallback(url=url, token="s3cret", node="n1", curve=STEEP, interval_s=0.1)
    trainer = L.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=4,
        callbacks=[callback],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    data = Indices()
    sampler = DistributedSampler(data, num_replicas=2, rank=trainer.global_rank, shuffle=True, seed=0)
    loader = ResizableLoader(
        data, batch_size=4, sampler=sampler, num_workers=1, multiprocessing_context="fork", handover=0
    )
    model = Tiny()
    with loader:
        trainer.fit(model, train_dataloaders=loader)
    c = callback.controller
    result = {"team": c.team.__dict__, "applied": c.applied, "workers": loader.num_workers, "epochs": model.seen}
    with open(f"{out}.{trainer.global_rank}", "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
