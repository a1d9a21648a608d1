"""``ADLCallback`` for Lightning: the only module that imports lightning.

    loader = ResizableLoader(dataset, batch_size=64, shuffle=True, num_workers=2)
    trainer = Trainer(callbacks=[ADLCallback(url="http://scheduler:8470", node="gpu-01", probe=probe)])
    trainer.fit(model, train_dataloaders=loader)

Lightning passes a non-``DataLoader`` train loader through unchanged and exposes it as
``trainer.train_dataloader``; the callback resizes it when the service's plan changes.  A plain
``DataLoader`` is measured and reported, but cannot be resized mid-epoch (a warning says so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lightning.pytorch.callbacks import Callback

from adlrec.callbacks._build import batch_samples, make_controller
from adlrec.callbacks.controller import ServiceLike

__all__ = ["ADLCallback"]


class ADLCallback(Callback):
    def __init__(
        self,
        *,
        url: str | None = None,
        node: str | None = None,
        token: str | None = None,
        client: ServiceLike | None = None,
        interval_s: float = 5.0,
        probe: dict[str, Any] | None = None,
        curve: Sequence[float] | None = None,
        **registration: Any,
    ) -> None:
        self.controller = make_controller(
            "ADLCallback",
            url=url,
            node=node,
            token=token,
            client=client,
            interval_s=interval_s,
            probe=probe,
            curve=curve,
            registration=registration,
        )

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        loader = trainer.train_dataloader
        self.controller.start(loader)  # any loader is measured and reported; only a resizable one is resized

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self.controller.batch_fetched()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.controller.batch_done(batch_samples(batch))

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.controller.stop()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.controller.stop()
