"""Load on the allocation service: many simulated jobs heartbeating once a second.

    python bench/service_load.py [--jobs 1000] [--seconds 60] [--nodes 10] [--fast-heartbeat on|off|on,off]
                                 [--no-live-runs] [--url URL --token T]

Without --url it starts `adlrec serve` (SQLite job store, embedded MLflow store, a token) in a
subprocess on a free loopback port with a fresh data dir, registers the jobs (explicit curves, spread
over the nodes), then runs one asyncio loop in which every job sends a heartbeat each second (random
phase) for --seconds, while a recompute is requested every 5 s.  Prints requests/s, latency
percentiles, errors and recompute times; asserts nothing.  The goal in issue 6: 1,000 jobs, p99
under 50 ms, no error.  The load generator shares the machine's cores with the service, so on a
small machine the figures measure both.  ``--fast-heartbeat on,off`` runs it twice, back to back,
with the service's heartbeat fast path and without it, and prints the two side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
import psutil
from _args import above, at_least, interruptible, parser, service_url

TOKEN = "bench-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_service(data_dir: Path, port: int, interval_s: float, live_runs: bool, fast: bool) -> subprocess.Popen:
    """``adlrec serve`` in a subprocess on its own data dir; ``fast``: the heartbeat fast path."""
    env = os.environ | {
        "ADLREC_SERVICE_TOKEN": TOKEN,
        "ADLREC_SERVICE_INTERVAL_S": str(interval_s),
        "ADLREC_SERVICE_DEBOUNCE_S": "1",
        "ADLREC_SERVICE_TTL_S": "120",
        "ADLREC_SERVICE_LIVE_RUNS": "true" if live_runs else "false",
        "ADLREC_SERVICE_FAST_HEARTBEAT": "true" if fast else "false",
        "MLFLOW_DISABLE_TELEMETRY": "true",
    }
    cmd = [sys.executable, "-m", "adlrec.cli", "serve", "--port", str(port), "--data-dir", str(data_dir)]
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / "service.log", "w")  # a file, not a pipe nobody reads (a full pipe blocks the service)
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def wait_healthy(url: str, proc: subprocess.Popen | None) -> None:
    """Wait for /health: up to 120 s for the service this bench started (its first start imports MLflow),
    10 s for one given with --url, which is running already or not at all (a refused connection: at once)."""
    limit_s = 120 if proc is not None else 10
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise SystemExit(f"the service exited with code {proc.returncode}; see its log")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.ConnectError as exc:
            if proc is None:  # refused, or no such host: nothing is running there
                raise SystemExit(
                    f"service_load.py: nothing answers at {url} ({exc}): is the service running there?"
                ) from None
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    if proc is None:
        raise SystemExit(
            f"service_load.py: nothing answered {url}/health within {limit_s:.0f} s: is the service running there?"
        )
    raise SystemExit(f"the service at {url} did not answer /health within {limit_s:.0f} s")


def curve(rng: random.Random, n: int = 17) -> list[float]:
    """A saturating curve: rises to a peak at 2-12 workers, then dips a little."""
    peak_w, top = rng.randint(2, 12), rng.uniform(100, 2000)
    return [top * min(1.0, (w + 0.3) / (peak_w + 0.3)) * (1 - 0.01 * max(0, w - peak_w)) for w in range(n)]


class _Socket(asyncio.Protocol):
    """One TCP connection's bytes in, one response at a time out (responses carry Content-Length)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = b""
        self.waiter: asyncio.Future | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        end = self.buf.find(b"\r\n\r\n")
        if end < 0 or self.waiter is None:
            return
        head = self.buf[:end].decode("latin-1").split("\r\n")
        length = next((int(h.split(":", 1)[1]) for h in head[1:] if h.lower().startswith("content-length:")), None)
        if length is None:
            self._fail(RuntimeError(f"no Content-Length in {head[0]!r}"))
            return
        if len(self.buf) < end + 4 + length:
            return
        body, self.buf = self.buf[end + 4 : end + 4 + length], self.buf[end + 4 + length :]
        if not self.waiter.done():  # not given up on (timed out) meanwhile
            self.waiter.set_result((int(head[0].split()[1]), body))
        self.waiter = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        self._fail(ConnectionError(f"connection closed ({exc})"))

    def _fail(self, exc: Exception) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(exc)


class Connection:
    """A keep-alive HTTP/1.1 client connection, one request at a time: a lean client, so that on a
    small machine the load generator leaves the cores to the service (httpx's async client costs
    several times more CPU per request)."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.hostport = url.split("://", 1)[1].rstrip("/")
        extra = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        self.head = f"Host: {self.hostport}\r\nContent-Type: application/json\r\n{extra}"
        self.sock: _Socket | None = None
        self.used = 0.0  # when it last sent a request (loop time)

    @classmethod
    async def open(cls, url: str, headers: dict[str, str]) -> Connection:
        conn = cls(url, headers)
        await conn.connect()
        return conn

    async def connect(self) -> None:
        self.close()
        host, port = self.hostport.rsplit(":", 1)
        _, self.sock = await asyncio.get_running_loop().create_connection(_Socket, host, int(port))

    async def request(self, method: str, path: str, body: object = None, timeout: float = 10) -> tuple[int, bytes]:
        now = asyncio.get_running_loop().time()
        s = self.sock
        if s is None or s.transport is None or s.transport.is_closing() or now - self.used > 4.0:
            await self.connect()  # like any keep-alive pool: never reuse one the server may be closing (5 s)
            s = self.sock
        self.used = now
        data = b"" if body is None else json.dumps(body).encode()
        s.waiter = asyncio.get_running_loop().create_future()
        s.transport.write(f"{method} {path} HTTP/1.1\r\n{self.head}Content-Length: {len(data)}\r\n\r\n".encode() + data)
        return await asyncio.wait_for(s.waiter, timeout)

    def close(self) -> None:
        if self.sock is not None and self.sock.transport is not None:
            self.sock.transport.close()
        self.sock = None


async def run(
    url: str, jobs: int, seconds: float, nodes: int, seed: int, server_pid: int | None, recompute_s: float = 5.0
) -> dict:
    rng = random.Random(seed)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    admin = await Connection.open(url, headers)
    for n in range(nodes):
        status, text = await admin.request("PUT", f"/nodes/node-{n}", {"cores": 256, "memory_mb": 1_024_000})
        assert status == 200, text
    ids = [f"job-{i}" for i in range(jobs)]
    conns = [await Connection.open(url, headers) for _ in ids]  # one keep-alive connection per job, like real jobs
    sem = asyncio.Semaphore(32)

    async def register(i: int) -> None:
        async with sem:
            body = {"job_id": ids[i], "node": f"node-{i % nodes}", "curve": curve(rng), "requested_workers": 4}
            status, text = await conns[i].request("POST", "/jobs", body, timeout=60)
            assert status in (200, 201), text

    t0 = time.perf_counter()
    await asyncio.gather(*(register(i) for i in range(jobs)))
    print(f"registered {jobs} jobs in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    latencies: list[float] = []
    late: list[float] = []  # how far behind its schedule each heartbeat was sent
    errors: dict[str, int] = {}
    recomputes: list[float] = []
    loop = asyncio.get_running_loop()
    start = loop.time() + 1.0
    end = start + seconds

    async def job_loop(i: int) -> None:
        workers = 4
        due = start + rng.random()  # each job beats once a second, at its own phase
        while due < end:
            await asyncio.sleep(max(0.0, due - loop.time()))
            body = {"throughput": rng.uniform(50, 500), "workers": workers, "data_wait": rng.random() * 0.5}
            t0 = time.perf_counter()
            late.append(max(0.0, loop.time() - due))
            try:
                status, text = await conns[i].request("POST", f"/jobs/{ids[i]}/heartbeat", body)
                if status == 200:
                    workers = json.loads(text)["workers"]
                else:
                    errors[str(status)] = errors.get(str(status), 0) + 1
            except (OSError, asyncio.TimeoutError, RuntimeError) as exc:
                key = f"{type(exc).__name__}: {str(exc)[:60]}"
                errors[key] = errors.get(key, 0) + 1
                conns[i].close()
            latencies.append(time.perf_counter() - t0)
            due = max(due + 1.0, loop.time())  # a slow answer delays the next beat, never doubles it up

    async def recompute_loop() -> None:
        while recompute_s > 0 and loop.time() + recompute_s < end:
            await asyncio.sleep(recompute_s)
            t0 = time.perf_counter()
            status, _ = await admin.request("POST", "/plans/recompute", timeout=60)
            if status == 200:
                recomputes.append(time.perf_counter() - t0)

    await asyncio.sleep(max(0.0, start - loop.time()))
    server = psutil.Process(server_pid) if server_pid else None
    cpu0, server0 = time.process_time(), server.cpu_times() if server else None
    await asyncio.gather(recompute_loop(), *(job_loop(i) for i in range(jobs)))
    elapsed = loop.time() - start
    cpu = time.process_time() - cpu0
    server_cpu = float("nan")
    if server is not None:
        t = server.cpu_times()
        server_cpu = (t.user + t.system) - (server0.user + server0.system)
    _, metrics_raw = await admin.request("GET", "/metrics")
    for c in [admin, *conns]:
        c.close()
    metrics = metrics_raw.decode()
    last = next((ln.split()[-1] for ln in metrics.splitlines() if ln.startswith("adlrec_recompute_seconds_last")), "")
    buckets = []
    for ln in metrics.splitlines():
        if ln.startswith('adlrec_http_request_seconds_bucket{route="/jobs/{job_id}/heartbeat"'):
            le = ln.split('le="')[1].split('"')[0]
            buckets.append((float("inf") if le == "+Inf" else float(le), int(ln.split()[-1])))
    return {
        "buckets": buckets,
        "latencies": latencies,
        "late": late,
        "errors": errors,
        "elapsed": elapsed,
        "client_cpu_s": cpu,
        "server_cpu_s": server_cpu,
        "recomputes": recomputes,
        "server_recompute_s": float(last) if last else float("nan"),
        "metrics": metrics,
    }


def bucket_pct(buckets: list[tuple[float, int]], q: float) -> float:
    """The upper bound of the histogram bucket that holds quantile q (server-side latency)."""
    total = buckets[-1][1] if buckets else 0
    return next((le for le, n in buckets if n >= q * total), float("nan"))


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


def measure(args: argparse.Namespace, fast: bool) -> tuple[dict, bool]:
    """One load run; returns what :func:`run` measured and whether it started the service itself."""
    global TOKEN
    with tempfile.TemporaryDirectory(prefix="adlrec-bench-") as tmp:
        proc = None
        if args.url is None:
            port = free_port()
            url = f"http://127.0.0.1:{port}"
            proc = start_service(Path(tmp) / "data", port, interval_s=30, live_runs=not args.no_live_runs, fast=fast)
        else:
            url, TOKEN = args.url.rstrip("/"), args.token or ""
        try:
            wait_healthy(url, proc)
            out = asyncio.run(
                run(url, args.jobs, args.seconds, args.nodes, args.seed, proc.pid if proc else None, args.recompute_s)
            )
        finally:
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=300)  # it flushes buffered live metrics to MLflow before exiting
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    return out, proc is not None


def rows(out: dict, started: bool, seconds: float) -> list[tuple[str, str]]:
    """The table's rows for one run: (label, value)."""
    lat, el = out["latencies"], out["elapsed"]
    m = {ln.split()[0]: float(ln.split()[-1]) for ln in out["metrics"].splitlines() if ln and not ln.startswith("#")}
    b, rc = out["buckets"], out["recomputes"]
    flushes = m.get("adlrec_store_flushes_total", 0)
    r = [
        ("heartbeats", f"{len(lat):,}"),
        ("requests/s", f"{len(lat) / el:,.1f}"),
        ("latency p50 (ms)", f"{1000 * pct(lat, 0.50):.2f}"),
        ("latency p99 (ms)", f"{1000 * pct(lat, 0.99):.2f}"),
        ("latency max (ms)", f"{1000 * max(lat, default=float('nan')):.2f}"),
        ("sent late p99 (ms)", f"{1000 * pct(out['late'], 0.99):.2f}"),
        ("server p50 / p99 (ms, <=)", f"{1000 * bucket_pct(b, 0.5):g} / {1000 * bucket_pct(b, 0.99):g}"),
        ("errors", f"{sum(out['errors'].values())}"),
        ("CPU, load generator (cores)", f"{out['client_cpu_s'] / el:.2f}"),
    ]
    if started:
        r.append(("CPU, service (cores)", f"{out['server_cpu_s'] / el:.2f}"))
    if rc:
        r.append(("recompute, HTTP (ms, median; count)", f"{1000 * statistics.median(rc):.1f} ({len(rc)})"))
    r += [
        ("recompute, server (ms, last)", f"{1000 * out['server_recompute_s']:.1f}"),
        ("store flushes (failed)", f"{flushes:,.0f} ({m.get('adlrec_store_flush_failures_total', 0):.0f})"),
        ("store flush, last (ms)", f"{1000 * m.get('adlrec_store_flush_seconds_last', 0):.1f}"),
    ]
    return r


def main() -> int:
    ap = parser(__doc__, whole=True)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--recompute-s", type=float, default=5.0, help="request a recompute this often (0: never)")
    ap.add_argument("--url", default=None, help="an already running service (default: start one)")
    ap.add_argument("--token", default=None, help="its token (with --url)")
    ap.add_argument("--no-live-runs", action="store_true", help="start the service without per-job MLflow runs")
    ap.add_argument(
        "--fast-heartbeat",
        default="on",
        help="the heartbeat fast path of the service it starts: on, off, or on,off (two runs, back to back, "
        "side by side)",
    )
    args = ap.parse_args()
    at_least(ap, args, jobs=1, nodes=1, recompute_s=0)
    above(ap, args, seconds=0)
    if args.url is not None:
        service_url(ap, args.url)
    elif args.token is not None:  # the service it starts has a token of its own
        ap.error("--token: only with --url (the service this bench starts makes its own token)")
    variants = [v.strip() for v in args.fast_heartbeat.split(",")]
    if not variants or any(v not in ("on", "off") for v in variants):
        ap.error(f"--fast-heartbeat: expected on, off or on,off; got {args.fast_heartbeat!r}")
    if args.url is not None:
        variants = ["(as running)"]
    results = []
    for v in variants:
        out, started = measure(args, fast=v == "on")
        results.append(rows(out, started, args.seconds))
        if out["errors"]:
            print(f"errors ({v}): {out['errors']}", file=sys.stderr)
    print(f"service load: {args.jobs} jobs on {args.nodes} nodes, one heartbeat per job per second, {args.seconds:g} s")
    print(f"machine: {os.cpu_count()} logical cores (load generator and service share them)")
    if args.url is None:
        print(f"live runs in MLflow: {'off' if args.no_live_runs else 'on'}")
    head = "heartbeat fast path" if args.url is None else "service"
    print(f"{head:<36}" + "".join(f"{v:>16}" for v in variants))
    labels = dict.fromkeys(label for r in results for label, _ in r)
    for label in labels:
        print(f"{label:<36}" + "".join(f"{dict(r).get(label, ''):>16}" for r in results))
    return 0


if __name__ == "__main__":
    sys.exit(interruptible(main))
