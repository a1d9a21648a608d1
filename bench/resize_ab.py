"""One resize row of bench/resize.py, under two checkouts of adlrec, alternated: is a change to the loader
measurable?

    python bench/resize_ab.py BEFORE AFTER [--change 2:4:2] [--sample-ms 1.5] [--rounds 12] [--repeats 3]

BEFORE and AFTER are folders holding an adlrec checkout (``git worktree add /tmp/before <commit>``).  Each round
runs each checkout in a fresh process (``PYTHONPATH`` at it, its own ``bench/resize.py``), the order alternating
between rounds, and each process measures the make-before-break change ``--repeats`` times, as bench/resize.py's
"mbb longest" column does (in batch times).  A 2-core machine's noise is as large as the effects sought, so one
run of bench/resize.py cannot tell a change from the noise; this prints every measurement, their medians, how
many meet the goal (<= 1 batch time), and a two-sided Mann-Whitney U test of the two samples.  Asserts nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from _args import above, at_least, interruptible, parser, worker_changes


def child(checkout: str, change: str, sample_ms: float, repeats: int, batch_size: int, step_ms: float) -> None:
    """In a fresh process whose ``adlrec`` is ``checkout``'s: the row ``repeats`` times, as JSON on stdout."""
    import warnings

    here = str(Path(__file__).resolve().parent)
    sys.path[:] = [
        p for p in sys.path if str(Path(p or ".").resolve()) != here
    ]  # the checkout's own bench, not this one

    sys.path.insert(0, str(Path(checkout) / "bench"))
    import resize  # that checkout's bench, with its Busy samples and measurement

    warnings.filterwarnings("ignore", message=".*worker processes in total.*")
    warnings.filterwarnings("ignore", message=".*DataLoader workers on the .* cores.*")
    path = tuple(int(x) for x in change.split(":"))
    size = (resize.SETUP_BATCHES * len(path) + 10 + 30 + 400) * batch_size
    ds = resize.Busy(size, resize.calibrate(sample_ms))
    out = [resize.make_before_break(ds, batch_size, path, 30, step_ms / 1e3)[0].longest for _ in range(repeats)]
    print(json.dumps(out))


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--change", default="2:4:2", help="a:b or a chain a:c:b, as bench/resize.py's --changes")
    ap.add_argument("--sample-ms", type=float, default=1.5, help="CPU ms per sample")
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--step-ms", type=float, default=3.0)
    if sys.argv[1:2] == ["--child"]:  # one side's process (below)
        spec = json.loads(sys.argv[2])
        child(**spec)
        return 0
    args = ap.parse_args()
    at_least(ap, args, rounds=1, repeats=1, batch_size=1, step_ms=0)
    above(ap, args, sample_ms=0)
    worker_changes(ap, args.change, name="--change")
    for folder in (args.before, args.after):
        if not (folder / "adlrec" / "loader").is_dir() or not (folder / "bench" / "resize.py").is_file():
            ap.error(f"{folder}: expected an adlrec checkout (adlrec/loader/ and bench/resize.py)")
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    got: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(args.rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            checkout = str(sides[name])
            env = os.environ | {"PYTHONPATH": checkout}
            spec = {"checkout": checkout, "change": args.change, "sample_ms": args.sample_ms}
            spec |= {"repeats": args.repeats, "batch_size": args.batch_size, "step_ms": args.step_ms}
            done = subprocess.run(
                [sys.executable, __file__, "--child", json.dumps(spec)], capture_output=True, text=True, env=env
            )
            if done.returncode:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            got[name] += json.loads(done.stdout.strip().splitlines()[-1])
    print(
        f"change {args.change.replace(':', ' -> ')}, {args.sample_ms} ms samples, batch {args.batch_size}, "
        f"step {args.step_ms} ms; {args.rounds} rounds x {args.repeats}; mbb longest, in batch times"
    )
    for name, values in got.items():
        print(
            f"{name:>6} ({sides[name]}): median {statistics.median(values):.2f}, <= 1 in "
            f"{sum(v <= 1 for v in values)} of {len(values)}: " + " ".join(f"{v:.2f}" for v in sorted(values))
        )
    from scipy.stats import mannwhitneyu

    p = mannwhitneyu(got["before"], got["after"], alternative="two-sided").pvalue
    print(f"Mann-Whitney U, two-sided: p = {p:.3f} ({'a difference' if p < 0.05 else 'no difference'} at 5%)")
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
