"""Soak the resizable loader with random resize sequences; report any hang or wrong order.

    python bench/loader_soak.py [--trials 30] [--seed 0] [--timeout-s 60]

Not a benchmark: a search for hangs and lost samples among the interleavings the property tests
(``tests/integration/test_loader_resize.py``) do not reach, because they take no pause between a
resize and the next batch.  Each trial draws an epoch length, a starting worker count (0-4),
``fork_server`` (True, False, or the default with the zygote from 0 GB), ``handover`` and
``persistent_workers``, then runs one or two epochs with real fork workers: after a random quarter of
the batches it resizes one to three times in a row (to 0-5 workers), sometimes pausing 50 or 200 ms so
that every new pool's thread is waiting (for a fork turn, or for another pool's zygote fork) before
the next batch; some epochs end early, and some loaders are closed right after.  A full epoch must
yield every index once, in order.  A trial that does not finish within ``--timeout-s`` prints every
thread's stack and the script exits 1; otherwise it prints one line per trial and ``all N trials
passed``.  Split pools (the default) throughout.
"""

from __future__ import annotations

import faulthandler
import os
import random
import sys
import threading
import time
import warnings

import torch
from _args import above, at_least, interruptible, parser
from torch.utils.data import Dataset

import adlrec.loader.resizable as resizable
from adlrec.loader import ResizableLoader


class Indices(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(i)


def trial(seed: int, timeout_s: float) -> str | None:
    """One trial; its description, or ``None`` if it hung or failed (after printing why)."""
    rng = random.Random(seed)
    n, workers = rng.randint(20, 80), rng.randint(0, 4)
    fork_server, handover = rng.choice([True, None, False]), rng.choice([None, 0, 2])
    persistent = rng.random() < 0.3
    loader = ResizableLoader(
        Indices(n),
        1,
        num_workers=workers,
        multiprocessing_context="fork",
        fork_server=fork_server,
        handover=handover,
        persistent_workers=persistent,
    )
    resizes: list[tuple[int, int, int]] = []  # (epoch, batch, count)
    errors: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            for epoch in range(rng.randint(1, 2)):
                early = rng.random() < 0.2
                stop_at = rng.randint(0, n) if early else n
                got = []
                for i, batch in enumerate(loader):
                    got.append(int(batch.item()))
                    if rng.random() < 0.25:
                        for _ in range(rng.choice([1, 1, 2, 3])):
                            count = rng.randint(0, 5)
                            resizes.append((epoch, i, count))
                            loader.resize(count)
                            if rng.random() < 0.5:
                                time.sleep(rng.choice([0.0, 0.05, 0.2]))
                    if rng.random() < 0.1:
                        time.sleep(0.05)  # a slow step
                    if len(got) >= stop_at:
                        break
                if not early and got != list(range(n)):
                    raise AssertionError(f"epoch {epoch} yielded {got}")
            if rng.random() < 0.5:
                loader.close()
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    described = (
        f"trial {seed}: {n} batches, {workers} workers, fork_server={fork_server}, handover={handover}, "
        f"persistent={persistent}"
    )
    if not done.wait(timeout_s):
        print(f"{described}: HANG after resizes {resizes}", flush=True)
        faulthandler.dump_traceback(all_threads=True)
        return None
    loader.close()
    if errors:
        print(f"{described}: FAILED after resizes {resizes}: {errors[0]!r}", flush=True)
        return None
    return f"{described}, {len(resizes)} resizes: ok"


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0, help="the first trial's seed; trial k uses seed + k")
    ap.add_argument("--timeout-s", type=float, default=60.0)
    args = ap.parse_args()
    at_least(ap, args, trials=1)
    above(ap, args, timeout_s=0)
    # up to 5 workers on however few cores: the loader's warning would come at every resize, between the trials' lines
    warnings.filterwarnings("ignore", message=".*DataLoader workers on the .* cores.*")
    resizable.AUTO_ZYGOTE_GB = 0.0  # fork_server=None: the default as in a large training process
    for seed in range(args.seed, args.seed + args.trials):
        line = trial(seed, args.timeout_s)
        if line is None:
            os._exit(1)  # a hung trial's threads cannot be joined
        print(line, flush=True)
    print(f"all {args.trials} trials passed")
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
