"""ResizableLoader as Lightning's validation loader too (Lightning inspects its loaders' attributes)."""

from __future__ import annotations

import pytest
import torch

from adlrec.loader import ResizableLoader
from tests.factories import Indices

L = pytest.importorskip("lightning")


class Counting(L.LightningModule):
    """Records the indices each stage saw."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(1, 1)
        self.trained: list[int] = []
        self.validated: list[int] = []

    def training_step(self, batch, batch_idx):
        self.trained += batch.tolist()
        return self.layer(batch.float().unsqueeze(1)).sum()

    def validation_step(self, batch, batch_idx):
        self.validated += batch.tolist()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.0)


def test_a_resizable_loader_serves_lightnings_validation_as_well_as_its_training(tmp_path):
    train = ResizableLoader(Indices(24), 4, shuffle=True, seed=1, num_workers=1, multiprocessing_context="fork")
    val = ResizableLoader(Indices(10), 4, num_workers=1, multiprocessing_context="fork")
    model = Counting()
    trainer = L.Trainer(
        max_epochs=2,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=tmp_path,
    )
    with train, val:
        trainer.fit(model, train_dataloaders=train, val_dataloaders=val)
    assert sorted(model.trained) == sorted(list(range(24)) * 2)
    assert model.validated == list(range(10)) * 2
