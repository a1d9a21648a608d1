"""Train a model.py with a Lightning Trainer whose DataLoader workers the adlrec service decides.

    adlrec serve &                                          # the service, on 127.0.0.1:8470
    python examples/train_lightning.py examples/text.py --epochs 2
    python examples/train_lightning.py examples/text.py --devices 2   # DDP: 2 ranks, one job of the service

The train loader is an ``adlrec.loader.ResizableLoader`` handed to ``trainer.fit`` as is (Lightning
passes non-``DataLoader`` loaders through); ``ADLCallback`` registers the job with its probe features,
heartbeats measured throughput and data-wait share, and resizes the loader mid-epoch when a new plan
arrives.  With the service down, training goes on with the workers it has.  With ``--devices`` N > 1
the Trainer runs DDP over N processes (one per GPU, or N CPU processes without one), each rank loading
its shard through a ``DistributedSampler``; the ranks on this node are one job of the service.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

from pydantic import ValidationError
from torch.utils.data import DistributedSampler

from adlrec.callbacks import check_arguments
from adlrec.config import load_settings, settings_problem
from adlrec.errors import AdlrecError
from adlrec.job import load_job
from adlrec.loader import ResizableLoader
from adlrec.predict.probe import probe_job
from adlrec.profile.device import parse_device
from adlrec.profile.hardware import detect_hardware
from adlrec.schemas import MAX_WORKERS

# The probe features of the process that started this node's DDP ranks, which Lightning's launcher starts as
# copies of this script with its environment (LOCAL_RANK 1, 2, ...).
PROBE_VARIABLE = "ADLREC_EXAMPLE_PROBE"


def node_probe(job, device, settings) -> dict:
    """The job's probe features, measured once per node.  The process a user starts probes; the DDP ranks
    Lightning then starts on the node take its features from their environment, rather than each probing
    again in turn (seconds each) for features only the node's leading rank registers."""
    inherited = os.environ.get(PROBE_VARIABLE)
    if inherited is not None and os.environ.get("LOCAL_RANK", "0") != "0":
        return json.loads(inherited)
    result = probe_job(job, device, settings.model_copy(update={"point_budget_s": 1.0}), detect_hardware(), 4)
    print(f"train_lightning.py: probed the job in {result.seconds:.1f} s", file=sys.stderr)
    features = result.features.to_dict()
    os.environ[PROBE_VARIABLE] = json.dumps(features)  # before fit(), which starts the other ranks
    return features


def job_module(job):
    """A model.py's model, loss and optimizer as a LightningModule."""
    import lightning as L

    class JobModule(L.LightningModule):
        def __init__(self, job) -> None:
            super().__init__()
            self.job = job
            self.net = job.model()
            self.samples = 0

        def training_step(self, batch, batch_idx):
            inputs, target = batch
            self.samples += len(target)
            return self.job.loss_fn(self.net(inputs), target)

        def configure_optimizers(self):
            return self.job.optimizer(self.net)

    return JobModule(job)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_py")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2, help="workers to start with")
    ap.add_argument("--url", default=os.environ.get("ADLREC_SERVICE_URL", "http://127.0.0.1:8470"))
    ap.add_argument("--node", default=None, help="the node's name at the service (default: this host's name)")
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between heartbeats")
    ap.add_argument("--devices", type=int, default=1, help="processes of a DDP run (one per GPU); 1: no DDP")
    args = ap.parse_args()
    # adlrec's callback says on stderr what it does: each plan applied, a service away or back
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("adlrec").setLevel(logging.INFO)

    try:  # a mistake in the arguments or the model.py: one line, before anything starts
        try:
            settings = load_settings()
        except ValidationError as exc:  # a bad ADLREC_* variable: one line, not pydantic's several
            raise ValueError(settings_problem(exc, flags=False)) from None
        job = load_job(args.model_py, data_dir=settings.datasets_dir)
        device = parse_device("auto")
        if args.devices < 1:
            raise ValueError(f"--devices must be a whole number >= 1, got {args.devices}")
        if args.epochs < 1:  # Lightning's max_epochs=-1 trains without end, 0 trains nothing
            raise ValueError(f"--epochs must be a whole number >= 1, got {args.epochs}")
        if args.workers < 0:
            raise ValueError(f"--workers must be a whole number >= 0, got {args.workers}")
        if not args.interval > 0:  # NaN too
            raise ValueError(f"--interval must be a number of seconds > 0, got {args.interval}")
        if args.workers > MAX_WORKERS:  # the service would refuse the registration, and the job train unplanned
            raise ValueError(
                f"--workers must be at most {MAX_WORKERS}, the most the service plans for a loader, got {args.workers}"
            )
        token = os.environ.get("ADLREC_SERVICE_TOKEN")
        check_arguments("ADLCallback", url=args.url, node=args.node, token=token, interval_s=args.interval)
    except (AdlrecError, ValueError, TypeError) as exc:
        print(f"train_lightning.py: error: {exc}", file=sys.stderr)
        return 2

    # Lightning takes seconds to import: only once the arguments and the model.py are known good
    import lightning as L
    from lightning.fabric.utilities.exceptions import MisconfigurationException

    from adlrec.callbacks import ADLCallback

    try:
        trainer = L.Trainer(
            max_epochs=args.epochs,
            accelerator="gpu" if device.kind == "cuda" else "cpu",
            devices=args.devices,
            strategy="ddp" if args.devices > 1 else "auto",
            logger=False,
            enable_checkpointing=False,
        )
        dataset = job.dataset()
        sampler = None  # one process: the loader shuffles; DDP: each rank its shard, shuffled by epoch
        if trainer.world_size > 1:
            sampler = DistributedSampler(dataset, trainer.world_size, trainer.global_rank, shuffle=True, seed=0)
        loader = ResizableLoader(
            dataset,
            batch_size=job.batch_size,
            shuffle=sampler is None,
            seed=0,
            sampler=sampler,
            num_workers=args.workers,
            collate_fn=job.collate_fn,
            multiprocessing_context="fork",
        )
        # the probe takes seconds: only once every argument is known good
        probe = node_probe(job, device, settings)
        callback = ADLCallback(
            url=args.url,
            token=token,
            node=args.node,
            probe=probe,
            interval_s=args.interval,
        )
    except (AdlrecError, ValueError, TypeError, MisconfigurationException) as exc:
        print(f"train_lightning.py: error: {exc}", file=sys.stderr)
        return 2
    module = job_module(job)
    trainer.callbacks.append(callback)
    with loader:
        trainer.fit(module, train_dataloaders=loader)
    rank = f"rank {trainer.global_rank}: " if trainer.world_size > 1 else ""
    print(
        f"{rank}trained {module.samples} samples; workers now {loader.num_workers}; "
        f"plans applied {callback.controller.applied}"
    )
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: its loader and the job at the service were closed as it unwound
        print("train_lightning.py: interrupted", file=sys.stderr)
        sys.exit(130)
