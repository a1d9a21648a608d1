"""``ADLCallback`` for Lightning: the only module that imports lightning.

    loader = ResizableLoader(dataset, batch_size=64, shuffle=True, num_workers=2)
    trainer = Trainer(callbacks=[ADLCallback(url="http://scheduler:8470", node="gpu-01", probe=probe)])
    trainer.fit(model, train_dataloaders=loader)

Lightning passes a non-``DataLoader`` train loader through unchanged and exposes it as
``trainer.train_dataloader``; the callback resizes it when the service's plan changes.  A plain
``DataLoader`` is measured and reported, but cannot be resized mid-epoch (a warning says so).
Validation, checkpoints and the ends of epochs are left out of the measurements (neither step time
nor a wait for data).  A ``Trainer`` takes one ``ADLCallback``: with two, each would register a job
and resize the same loader, so ``fit`` refuses them.  One callback may serve several ``fit`` calls,
each registering the job again.
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

    def setup(self, trainer: Any, pl_module: Any, stage: str) -> None:
        """Refuse a second ADLCallback before anything starts: each would register a job with the
        service and resize the same loader, one undoing the other's plans.  (Only ``fit`` trains: a
        ``validate`` or ``test`` run starts neither.)"""
        mine = [c for c in trainer.callbacks if isinstance(c, ADLCallback)]
        if stage == "fit" and len(mine) > 1:
            raise ValueError(
                f"ADLCallback: this Trainer has {len(mine)} ADLCallbacks in callbacks=; give it one (each would "
                "register a job with the service and resize the same loader)"
            )

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        loader = trainer.train_dataloader
        self.controller.start(loader)  # any loader is measured and reported; only a resizable one is resized

    def on_train_batch_start(self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int) -> None:
        self.controller.batch_fetched()

    def on_train_batch_end(self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int) -> None:
        self.controller.batch_done(batch_samples(batch))

    # where training stops between steps: that time is neither a step's nor a wait for data
    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        self.controller.pause()  # the last epoch's end (its validation, checkpoint) and this one's start

    def on_validation_start(self, trainer: Any, pl_module: Any) -> None:
        self.controller.pause()  # validation within an epoch (val_check_interval)

    def on_save_checkpoint(self, trainer: Any, pl_module: Any, checkpoint: dict[str, Any]) -> None:
        self.controller.pause()  # a checkpoint saved between steps (every_n_train_steps)

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        self.controller.stop()

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.controller.stop()
