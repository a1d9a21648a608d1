"""Train a model.py in a plain PyTorch loop whose DataLoader workers the adlrec service decides.

    adlrec serve &                                          # the service, on 127.0.0.1:8470
    python examples/train_loop.py examples/image.py --device emulate:20 --epochs 3
    torchrun --standalone --nproc-per-node 2 examples/train_loop.py examples/image.py   # DDP: one job of 2 ranks

It probes the job briefly (the features the service predicts its curve from), registers it, and trains
with an ``adlrec.loader.ResizableLoader`` under ``ADLLoop``: every heartbeat reports the measured
throughput and data-wait share, and each new plan resizes the loader mid-epoch without losing or
repeating a sample.  With the service down it trains on with the workers it has.  ``--no-service``
trains with a fixed worker count (a baseline).  Prints one JSON line: samples, seconds, samples/s,
the worker counts it ran with.

Under ``torchrun`` (its ``WORLD_SIZE``, ``RANK`` and ``LOCAL_RANK``), each process is a rank of a DDP run:
it joins the process group (NCCL on CUDA, gloo otherwise), trains a ``DistributedDataParallel`` model on
its ``DistributedSampler`` shard (an emulated step waits for every rank, as gradient sync does), and
the ranks on this node are one job of the service.  Each rank prints its own JSON line.  Name the node
with ``--node-name`` there: torchrun reads a ``--node`` anywhere on its line as a prefix of its own options.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time

from pydantic import ValidationError

from adlrec.callbacks import ADLLoop, batch_samples, check_arguments
from adlrec.config import load_settings, settings_problem
from adlrec.errors import AdlrecError
from adlrec.job import load_job
from adlrec.loader import ResizableLoader
from adlrec.predict.probe import probe_job
from adlrec.profile.device import EmulatedStep, make_step, parse_device
from adlrec.profile.hardware import detect_hardware
from adlrec.schemas import MAX_WORKERS


def join_run(device) -> tuple[int, int]:
    """This process's rank and the run's size: under torchrun, after joining its process group."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    import torch
    import torch.distributed as dist

    if device.kind == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl" if device.kind == "cuda" else "gloo")  # torchrun's env:// rendezvous
    return dist.get_rank(), world


def distributed_step(step):
    """The step of one rank: a DDP model's (its backward syncs gradients), or an emulated step that waits
    for every rank after its own time, as that sync would."""
    import torch
    import torch.distributed as dist

    if not isinstance(step, EmulatedStep):
        local = [torch.cuda.current_device()] if step.device.type == "cuda" else None
        step.model = torch.nn.parallel.DistributedDataParallel(step.model, device_ids=local)
        return step
    ready = torch.zeros(1)

    def lockstep(batch) -> None:
        step(batch)
        dist.all_reduce(ready)

    return lockstep


def node_probe(job, device, settings, rank: int, world: int) -> dict:
    """The job's probe features, measured once per node.  Ranks probing at once would share the node's
    cores and each measure a fraction of what the job gets; here the node's first local rank probes (the
    others wait in the gather) and every rank of the node takes its features."""

    def probe() -> dict:
        result = probe_job(job, device, settings.model_copy(update={"point_budget_s": 1.0}), detect_hardware(), 4)
        if world > 1:
            print(f"train_loop.py: rank {rank} probed the job for its node in {result.seconds:.1f} s", file=sys.stderr)
        return result.features.to_dict()

    if world == 1:
        return probe()
    import torch.distributed as dist

    node = os.environ.get("GROUP_RANK", "0")  # torchrun's node rank
    everyone: list = [None] * world
    dist.all_gather_object(everyone, (node, probe() if os.environ.get("LOCAL_RANK", "0") == "0" else None))
    return next(features for n, features in everyone if n == node and features is not None)


def check_counts(epochs: int, workers: int, interval: float, *, service: bool) -> None:
    """``--epochs``, ``--workers`` and ``--interval`` as the run can use them, each named as the user typed it:
    an epoch count below 1 trained nothing and said 0 samples/s; a worker count past the service's bound (256)
    was refused at registration, after the probe, and the job trained unplanned."""
    if epochs < 1:
        raise ValueError(f"--epochs must be a whole number >= 1, got {epochs}")
    if workers < 0:
        raise ValueError(f"--workers must be a whole number >= 0, got {workers}")
    if not interval > 0:  # NaN too
        raise ValueError(f"--interval must be a number of seconds > 0, got {interval}")
    if service and workers > MAX_WORKERS:
        raise ValueError(
            f"--workers must be at most {MAX_WORKERS}, the most the service plans for a loader, got {workers} "
            "(--no-service trains with any count)"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model_py")
    ap.add_argument("--device", default="emulate:20", help="cpu | cuda | emulate:MS (default emulate:20)")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2, help="workers to start with")
    ap.add_argument("--url", default=os.environ.get("ADLREC_SERVICE_URL", "http://127.0.0.1:8470"))
    ap.add_argument(  # --node-name under torchrun, whose own options --node-rank/--node_rank take --node as theirs
        "--node", "--node-name", dest="node", default=None, help="the node's name at the service (default: this host's)"
    )
    ap.add_argument("--job-id", default=None)
    ap.add_argument("--interval", type=float, default=2.0, help="seconds between heartbeats")
    ap.add_argument("--no-service", action="store_true", help="train with --workers throughout")
    ap.add_argument(
        "--main-cores",
        type=int,
        default=None,
        help="cores the training processes need (default: one per rank; 0 fits an emulated step)",
    )
    args = ap.parse_args()
    # adlrec's callback says on stderr what it does: each plan applied, a service away or back
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("adlrec").setLevel(logging.INFO)

    try:  # a mistake in the arguments or the model.py: one line, before anything starts
        check_counts(args.epochs, args.workers, args.interval, service=not args.no_service)
        try:
            settings = load_settings()
        except ValidationError as exc:  # a bad ADLREC_* variable: one line, not pydantic's several
            raise ValueError(settings_problem(exc, flags=False)) from None
        job = load_job(args.model_py, data_dir=settings.datasets_dir)
        device = parse_device(args.device)
        rank, world = join_run(device)  # first: on CUDA it picks this rank's GPU for the model
        step = make_step(job, device)
        dataset, sampler = job.dataset(), None  # one process: the loader shuffles; DDP: each rank its shard
        if world > 1:
            from torch.utils.data import DistributedSampler

            step = distributed_step(step)
            sampler = DistributedSampler(dataset, world, rank, shuffle=True, seed=0)
        loader = ResizableLoader(
            dataset,
            batch_size=job.batch_size,
            shuffle=sampler is None,
            sampler=sampler,
            seed=0,
            num_workers=args.workers,
            collate_fn=job.collate_fn,
            multiprocessing_context="fork",
        )
        token = os.environ.get("ADLREC_SERVICE_TOKEN")
        if not args.no_service:  # before the probe, which takes seconds
            check_arguments("ADLLoop", url=args.url, node=args.node, token=token, interval_s=args.interval)
        # Probed in both modes, so a baseline run pays the same start-up as a run under the service.
        probe = node_probe(job, device, settings, rank, world)
        adl = None
        if not args.no_service:
            adl = ADLLoop(
                loader,
                url=args.url,
                token=token,
                node=args.node,
                probe=probe,
                interval_s=args.interval,
                job_id=args.job_id,
                **({} if args.main_cores is None else {"main_cores": args.main_cores}),
            )
    except (AdlrecError, ValueError, TypeError) as exc:
        print(f"train_loop.py: error: {exc}", file=sys.stderr)
        return 2
    used = [args.workers]
    samples = 0
    start, started_at = time.perf_counter(), time.time()
    with loader:
        if adl is None:
            for epoch in range(args.epochs):
                if sampler is not None:
                    sampler.set_epoch(epoch)  # each epoch its own shuffle, the same on every rank
                for batch in loader:
                    step(batch)
                    samples += batch_samples(batch)  # the last batch of an epoch may be short
            seconds = time.perf_counter() - start
        else:
            with adl:
                for epoch in range(args.epochs):
                    if sampler is not None:
                        sampler.set_epoch(epoch)
                    for batch in adl.iterate():
                        step(batch)
                        samples += batch_samples(batch)
                        if loader.num_workers != used[-1]:
                            used.append(loader.num_workers)
                # the training's time: not the job's finish call after it, which waits for a frozen service
                seconds = time.perf_counter() - start
    out = {
        "job": job.name,
        "samples": samples,
        "seconds": round(seconds, 3),
        "samples_per_s": round(samples / seconds, 1),
    }
    if world > 1:
        out |= {"rank": rank, "world_size": world}
    print(json.dumps(out | {"workers": used, "started_at": started_at, "ended_at": started_at + seconds}))
    if world > 1:
        import torch.distributed as dist

        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C: its loader and the job at the service were closed as it unwound
        print("train_loop.py: interrupted", file=sys.stderr)
        sys.exit(130)
