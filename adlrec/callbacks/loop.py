"""``ADLLoop``: the controller for a plain PyTorch training loop.

loader = ResizableLoader(dataset, batch_size=64, shuffle=True, num_workers=2)
with ADLLoop(loader, url="http://scheduler:8470", node="gpu-01", probe=probe) as adl:
    for epoch in range(epochs):
        for batch in adl.iterate():      # times each wait for data and each step
            train_step(batch)
        validate()                       # between epochs: not measured (each iterate() starts afresh)

Validation or a checkpoint *inside* an epoch's loop body: call ``adl.pause()`` there, and that step
is left out of the measurements.  One ``ADLLoop`` may serve several ``with`` blocks, each
registering the job again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from adlrec.callbacks._build import batch_samples, make_controller
from adlrec.callbacks.controller import Resizable, ServiceLike

__all__ = ["ADLLoop"]


class ADLLoop:
    def __init__(
        self,
        loader: Resizable,
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
        if isinstance(loader, (str, bytes)) or not (hasattr(loader, "__iter__") or hasattr(loader, "__getitem__")):
            raise TypeError(
                "ADLLoop: loader must be the training loop's loader, an iterable of batches (an "
                f"adlrec.loader.ResizableLoader, to be resized; a DataLoader is measured only), got {loader!r}"[:500]
            )
        self.loader = loader
        self._entered = False
        self.controller = make_controller(
            "ADLLoop",
            url=url,
            node=node,
            token=token,
            client=client,
            interval_s=interval_s,
            probe=probe,
            curve=curve,
            registration=registration,
        )

    def __enter__(self) -> ADLLoop:
        self.controller.start(self.loader)
        self._entered = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._entered = False
        self.controller.stop()

    def iterate(self) -> Iterator[Any]:
        """One epoch of the loader's batches; the time between yields is the step."""
        if not self._entered:
            raise RuntimeError(
                "ADLLoop.iterate() outside `with ADLLoop(...) as adl:`; the with block registers the job "
                "with the service on entry and reports it finished on exit"
            )
        c = self.controller
        c.pause()  # the time since the last epoch's end (validation, a checkpoint) is no wait for data
        it = iter(self.loader)
        while True:
            try:
                batch = next(it)
            except StopIteration:
                return
            c.batch_fetched()
            yield batch
            c.batch_done(batch_samples(batch))

    def pause(self) -> None:
        """Leave this step out of the measurements: call it in the loop body around validation or a
        checkpoint, which are neither the step's time nor a wait for data."""
        self.controller.pause()
