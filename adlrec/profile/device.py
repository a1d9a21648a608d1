"""Where a training step runs: parse ``--device`` and build the step callable.

A *step* consumes one ``(input, target)`` batch.  On ``cpu`` and ``cuda`` it is a real
forward/backward/optimizer step; under ``emulate:MS`` it is a timed wait of MS milliseconds, so a
machine without an accelerator can profile how a job backed by one of that speed stalls on real
data loading.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from adlrec.errors import UsageError
from adlrec.job import Job
from adlrec.schemas import DeviceSpec

__all__ = ["EmulatedStep", "TrainStep", "make_step", "parse_device", "to_device"]

Step = Callable[[Any], None]


def parse_device(text: str, *, cuda_available: bool | None = None) -> DeviceSpec:
    """``auto`` | ``cpu`` | ``cuda`` | ``emulate:MS`` → a :class:`DeviceSpec`."""
    text = text.strip().lower()
    if text.startswith("emulate"):
        _, sep, ms = text.partition(":")
        try:
            value = float(ms) if sep else float("nan")
        except ValueError:
            value = float("nan")
        if not (value > 0 and value < 60_000):
            raise UsageError(
                f"--device {text!r}: expected emulate:MS with MS a step time in milliseconds, 0 < MS < 60000, "
                "e.g. emulate:20"
            )
        return DeviceSpec(kind="emulate", step_ms=value)
    if cuda_available is None and text in ("auto", "cuda"):
        import torch

        cuda_available = torch.cuda.is_available()
    if text == "auto":
        return DeviceSpec(kind="cuda" if cuda_available else "cpu")
    if text == "cpu":
        return DeviceSpec(kind="cpu")
    if text == "cuda":
        if not cuda_available:
            raise UsageError("--device cuda: torch sees no CUDA device here; use cpu or emulate:MS")
        return DeviceSpec(kind="cuda")
    raise UsageError(f"--device {text!r}: expected auto, cpu, cuda or emulate:MS (e.g. emulate:20)")


def to_device(obj: Any, device: Any, non_blocking: bool = False) -> Any:
    """Move tensors inside tuples (named ones too), lists and dicts to ``device``."""
    import torch

    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=non_blocking)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):  # a namedtuple takes its fields as arguments
        return type(obj)(*(to_device(o, device, non_blocking) for o in obj))
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(o, device, non_blocking) for o in obj)
    if isinstance(obj, dict):
        return {k: to_device(v, device, non_blocking) for k, v in obj.items()}
    return obj


class TrainStep:
    """A real training step: forward, loss, backward, optimizer step (synchronised on CUDA)."""

    def __init__(self, job: Job, device: DeviceSpec) -> None:
        import torch

        self._torch = torch
        self.device = torch.device("cuda" if device.kind == "cuda" else "cpu")
        self.model = job.model().to(self.device)
        self.model.train()
        self.optimizer = job.optimizer(self.model)
        self.loss_fn = job.loss_fn
        self._job = job
        self._cuda = device.kind == "cuda"

    def __call__(self, batch: Any) -> None:
        inputs, target = _split(self._job, batch)
        inputs = to_device(inputs, self.device, non_blocking=self._cuda)
        target = to_device(target, self.device, non_blocking=self._cuda)
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.loss_fn(self.model(inputs), target)
        loss.backward()
        self.optimizer.step()
        if self._cuda:
            self._torch.cuda.synchronize(self.device)

    def place(self, batch: Any) -> Any:
        """Put a batch on the device once (for the ceiling run)."""
        return to_device(batch, self.device)


class EmulatedStep:
    """A timed wait of ``step_ms`` standing in for an accelerator's training step."""

    def __init__(self, step_ms: float, sleep: Callable[[float], None] = time.sleep) -> None:
        self.seconds = step_ms / 1000.0
        self._sleep = sleep

    def __call__(self, batch: Any) -> None:
        self._sleep(self.seconds)

    def place(self, batch: Any) -> Any:
        return batch


def make_step(job: Job, device: DeviceSpec) -> TrainStep | EmulatedStep:
    if device.emulated:
        assert device.step_ms is not None
        return EmulatedStep(device.step_ms)
    return TrainStep(job, device)


def _split(job: Job, batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return batch[0], batch[1]
    from adlrec.errors import JobContractError

    raise JobContractError(
        f"{job.path.name}: batches must be (input, target) pairs; got {type(batch).__name__}"
        + (f" of length {len(batch)}" if isinstance(batch, (list, tuple)) else "")
    )
