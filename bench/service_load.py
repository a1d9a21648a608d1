"""Load on the allocation service: many simulated jobs heartbeating once a second.

    python bench/service_load.py [--jobs 1000] [--seconds 60] [--nodes 10] [--url URL --token T]

Without --url it starts `adlrec serve` (SQLite job store, embedded MLflow store, a token) in a
subprocess on a free loopback port with a fresh data dir, registers the jobs (explicit curves, spread
over the nodes), then runs one asyncio loop in which every job sends a heartbeat each second (random
phase) for --seconds, while a recompute is requested every 5 s.  Prints requests/s, latency
percentiles, errors and recompute times; asserts nothing.  The goal in issue 6: 1,000 jobs, p99
under 50 ms, no error.  The load generator shares the machine's cores with the service, so on a
small machine the figures measure both.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(data_dir: Path, port: int, interval_s: float, live_runs: bool) -> subprocess.Popen:
    env = os.environ | {
        "ADLREC_SERVICE_TOKEN": TOKEN,
        "ADLREC_SERVICE_INTERVAL_S": str(interval_s),
        "ADLREC_SERVICE_DEBOUNCE_S": "1",
        "ADLREC_SERVICE_TTL_S": "120",
        "ADLREC_SERVICE_LIVE_RUNS": "true" if live_runs else "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    cmd = [sys.executable, "-m", "adlrec.cli", "serve", "--port", str(port), "--data-dir", str(data_dir)]
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / "service.log", "w")  # a file, not a pipe nobody reads (a full pipe blocks the service)
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def wait_healthy(url: str, proc: subprocess.Popen | None, limit_s: float = 120) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the service exited with code {proc.returncode}; see its log")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the service at {url} did not answer /health within {limit_s:.0f} s")


def curve(rng: random.Random, n: int = 17) -> list[float]:
    """A saturating curve: rises to a peak at 2-12 workers, then dips a little."""
    peak_w, top = rng.randint(2, 12), rng.uniform(100, 2000)
    return [top * min(1.0, (w + 0.3) / (peak_w + 0.3)) * (1 - 0.01 * max(0, w - peak_w)) for w in range(n)]


async def run(url: str, jobs: int, seconds: float, nodes: int, seed: int) -> dict:
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10, limits=limits) as http:
        for n in range(nodes):
            r = await http.put(f"/nodes/node-{n}", json={"cores": 64, "memory_mb": 256_000})
            r.raise_for_status()
        ids = [f"job-{i}" for i in range(jobs)]
        sem = asyncio.Semaphore(32)

        async def register(i: int, job_id: str) -> None:
            async with sem:
                body = {"job_id": job_id, "node": f"node-{i % nodes}", "curve": curve(rng), "requested_workers": 4}
                (await http.post("/jobs", json=body)).raise_for_status()

        await asyncio.gather(*(register(i, j) for i, j in enumerate(ids)))

        latencies: list[float] = []
        errors: dict[str, int] = {}
        recomputes: list[float] = []
        start = time.perf_counter()
        end = start + seconds

        async def job_loop(job_id: str) -> None:
            workers = 4
            await asyncio.sleep(rng.random())
            while time.perf_counter() < end:
                t0 = time.perf_counter()
                body = {"throughput": rng.uniform(50, 500), "workers": workers, "data_wait": rng.random() * 0.5}
                try:
                    r = await http.post(f"/jobs/{job_id}/heartbeat", json=body)
                    if r.status_code == 200:
                        workers = r.json()["workers"]
                    else:
                        errors[str(r.status_code)] = errors.get(str(r.status_code), 0) + 1
                except httpx.HTTPError as exc:
                    errors[type(exc).__name__] = errors.get(type(exc).__name__, 0) + 1
                dt = time.perf_counter() - t0
                latencies.append(dt)
                await asyncio.sleep(max(0.0, 1.0 - dt))

        async def recompute_loop() -> None:
            while time.perf_counter() < end:
                await asyncio.sleep(5)
                t0 = time.perf_counter()
                r = await http.post("/plans/recompute")
                if r.status_code == 200:
                    recomputes.append(time.perf_counter() - t0)

        await asyncio.gather(recompute_loop(), *(job_loop(j) for j in ids))
        elapsed = time.perf_counter() - start
        metrics = (await http.get("/metrics")).text
    last = next((ln.split()[-1] for ln in metrics.splitlines() if ln.startswith("adlrec_recompute_seconds_last")), "")
    buckets = []
    for ln in metrics.splitlines():
        if ln.startswith("adlrec_http_request_seconds_bucket"):
            le = ln.split('le="')[1].split('"')[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), int(ln.split()[-1])))
    return {
        "buckets": buckets,
        "latencies": latencies,
        "errors": errors,
        "elapsed": elapsed,
        "recomputes": recomputes,
        "server_recompute_s": float(last) if last else float("nan"),
    }


def bucket_pct(buckets: list[tuple[float, int]], q: float) -> float:
    """The upper bound of the histogram bucket that holds quantile q (server-side latency)."""
    total = buckets[-1][1] if buckets else 0
    return next((le for le, n in buckets if n >= q * total), float("nan"))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--url", default=None, help="an already running service (default: start one)")
    ap.add_argument("--token", default=None, help="its token (with --url)")
    ap.add_argument("--no-live-runs", action="store_true", help="start the service without per-job MLflow runs")
    args = ap.parse_args()
    global TOKEN
    proc = None
    with tempfile.TemporaryDirectory(prefix="adlrec-bench-") as tmp:
        if args.url is None:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            proc = start_service(Path(tmp) / "data", port, interval_s=30, live_runs=not args.no_live_runs)
        else:
            url, TOKEN = args.url.rstrip("/"), args.token or ""
        try:
            wait_healthy(url, proc)
            out = asyncio.run(run(url, args.jobs, args.seconds, args.nodes, args.seed))
        finally:
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=120)  # it flushes buffered live metrics to MLflow before exiting
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    lat = out["latencies"]
    n = len(lat)
    print(f"service load: {args.jobs} jobs on {args.nodes} nodes, one heartbeat per job per second, {args.seconds:g} s")
    print(f"machine: {os.cpu_count()} logical cores (load generator and service share them)")
    if args.url is None:
        print(f"live runs in MLflow: {'off' if args.no_live_runs else 'on'}")
    print(f"{'heartbeats':<28}{n:>12,}")
    print(f"{'requests/s':<28}{n / out['elapsed']:>12,.1f}")
    print(f"{'latency p50 (ms)':<28}{1000 * pct(lat, 0.50):>12.1f}")
    print(f"{'latency p99 (ms)':<28}{1000 * pct(lat, 0.99):>12.1f}")
    print(f"{'latency max (ms)':<28}{1000 * max(lat, default=float('nan')):>12.1f}")
    b = out["buckets"]
    print(f"{'server p50 / p99 (ms, <=)':<28}{1000 * bucket_pct(b, 0.5):>12g} / {1000 * bucket_pct(b, 0.99):g}")
    print(f"{'errors':<28}{sum(out['errors'].values()):>12}  {out['errors'] or ''}")
    rc = out["recomputes"]
    if rc:
        print(f"{'recompute, HTTP (ms)':<28}{1000 * statistics.median(rc):>12.1f}  median of {len(rc)}")
    print(f"{'recompute, server (ms)':<28}{1000 * out['server_recompute_s']:>12.1f}  last one")
    return 0


if __name__ == "__main__":
    sys.exit(main())
