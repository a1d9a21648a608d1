"""Three real jobs on this machine, once with an even split of workers and once under the service.

    python bench/live.py [--device emulate:10] [--epochs 15] [--main-cores 0]

Each job is `examples/train_loop.py` over a bundled example (image, text, audio) with an emulated
accelerator step (a timed wait) and real data loading in real worker processes.  Phase 1: every job
gets the even split of the node's worker cores (`adlrec.allocate.even`'s answer for the same node),
fixed.  Phase 2: an `adlrec serve` process plans the node and each job applies its plans through
`ADLLoop`, resizing its loader mid-epoch.  Both phases probe every job first (the same start-up
cost).  Prints per-job samples/s and workers, aggregate throughput (all samples / makespan) and
makespan, and the ratio of phase 2 to phase 1, measured in this one run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from _args import at_least, interruptible, parser
from rich.console import Console
from rich.table import Table

from adlrec.errors import UsageError
from adlrec.profile.device import parse_device

ROOT = Path(__file__).resolve().parents[1]
JOBS = ("image", "text", "audio")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_jobs(extra: list[str], env: dict[str, str], args: argparse.Namespace, named: bool = False) -> list[dict]:
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "examples" / "train_loop.py"),
                str(ROOT / "examples" / f"{name}.py"),
                "--device",
                args.device,
                "--epochs",
                str(args.epochs),
                "--main-cores",
                str(args.main_cores),
                *extra,
                *(["--job-id", name] if named else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for name in JOBS
    ]
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=1800)
        if p.returncode != 0:
            raise SystemExit(f"a job failed:\n{stderr[-2000:]}")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def summary(results: list[dict]) -> tuple[float, float]:
    makespan = max(r["ended_at"] for r in results) - min(r["started_at"] for r in results)
    return sum(r["samples"] for r in results) / makespan, makespan


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--device", default="emulate:10")
    ap.add_argument(
        "--epochs", type=int, default=15, help="each job's epochs (3 make runs of ~6 s, which start-up dominates)"
    )
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="the node's cores, as the service sees them")
    ap.add_argument(
        "--main-cores", type=int, default=0, help="cores each training process needs (0: an emulated step sleeps)"
    )
    args = ap.parse_args()
    at_least(ap, args, epochs=1, cores=1, main_cores=0)
    try:  # train_loop.py would say so too, but only once the first phase has started
        parse_device(args.device)
    except UsageError as exc:
        ap.error(str(exc))

    even_workers = max(0, args.cores - len(JOBS) * args.main_cores) // len(JOBS)
    with tempfile.TemporaryDirectory(prefix="adlrec-live-") as tmp:
        env = os.environ | {"ADLREC_DATA_DIR": str(Path(tmp) / "data"), "MLFLOW_DISABLE_TELEMETRY": "true"}
        baseline = run_jobs(["--no-service", "--workers", str(even_workers)], env, args)

        port = free_port()
        senv = env | {
            "ADLREC_SERVICE_NODE_CORES": str(args.cores),
            "ADLREC_SERVICE_DEBOUNCE_S": "0.2",
            "ADLREC_SERVICE_INTERVAL_S": "2",
            "ADLREC_SERVICE_THRESHOLD": "0.02",
        }
        server = subprocess.Popen(
            [sys.executable, "-m", "adlrec.cli", "serve", "--port", str(port)],
            env=senv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd=tmp,
        )
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit("the service did not start")
                time.sleep(0.2)
            managed = run_jobs(
                ["--workers", str(even_workers), "--url", url, "--interval", "0.5"], env, args, named=True
            )
            plans = httpx.get(f"{url}/plans", params={"limit": 500}, timeout=10).json()["plans"][::-1]
            jobs = httpx.get(f"{url}/jobs", timeout=10).json()
        finally:
            server.terminate()
            server.wait(timeout=30)

    table = Table(
        title=f"3 jobs on {args.cores} cores, {args.device}, {args.epochs} epochs each "
        f"(main process counted as {args.main_cores} core)"
    )
    for col in ("job", "even: samples/s", "even: workers", "service: samples/s", "service: workers"):
        table.add_column(col, justify="left" if col == "job" else "right")
    for b, m in zip(baseline, managed, strict=True):
        table.add_row(
            b["job"],
            f"{b['samples_per_s']:,.1f}",
            " -> ".join(map(str, b["workers"])),
            f"{m['samples_per_s']:,.1f}",
            " -> ".join(map(str, m["workers"])),
        )
    (tb, mb), (tm, mm) = summary(baseline), summary(managed)
    table.add_section()
    table.add_row("aggregate samples/s", f"{tb:,.1f}", "", f"{tm:,.1f}", f"x{tm / tb:.2f}")
    table.add_row("makespan", f"{mb:.1f} s", "", f"{mm:.1f} s", f"x{mb / mm:.2f} faster")
    console = Console(width=140)
    console.print(table)
    console.print(service_view(plans, jobs))
    return 0


def service_view(plans: list[dict], jobs: list[dict]) -> Table:
    """What the service saw: each job's predicted and measured curve, and its counts over the plans."""
    table = Table(title=f"under the service: {len(plans)} plans", title_justify="left")
    for col in ("job", "predicted samples/s (w = 0, 1, 2, ...)", "measured (w: samples/s x beats)", "planned workers"):
        table.add_column(col, justify="left")
    for j in jobs:
        counts = [p["workers"][j["job_id"]] for p in plans if j["job_id"] in p["workers"]]
        moves = [c for i, c in enumerate(counts) if i == 0 or c != counts[i - 1]]
        table.add_row(
            j["job_id"],
            ", ".join(f"{t:,.0f}" for t in j["predicted"]),
            ", ".join(f"{m['workers']}: {m['throughput']:,.0f} x{m['samples']}" for m in j["measured"]),
            " -> ".join(map(str, moves)),
        )
    return table


if __name__ == "__main__":
    sys.exit(interruptible(main))
