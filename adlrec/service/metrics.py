"""The service's counters, written in Prometheus' text exposition format (version 0.0.4).

Small and dependency-free: counters and gauges keyed by label tuples, and a latency histogram per route.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping

__all__ = ["Metrics"]

BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, math.inf)

HELP = {
    "adlrec_http_requests_total": ("counter", "HTTP requests by method, route and status code"),
    "adlrec_http_request_seconds": ("histogram", "HTTP request latency in seconds in the service, by route"),
    "adlrec_heartbeats_total": ("counter", "heartbeats received"),
    "adlrec_registrations_total": ("counter", "job registrations"),
    "adlrec_recomputes_total": ("counter", "recomputes run, by trigger"),
    "adlrec_recomputes_skipped_total": ("counter", "recomputes skipped, by trigger, since the last still ran"),
    "adlrec_recompute_failures_total": ("counter", "recomputes that raised (logged with their traceback)"),
    "adlrec_recompute_process_failures_total": (
        "counter",
        "deaths of the recompute process (logged; that recompute ran in the service's process, a new one started)",
    ),
    "adlrec_recompute_seconds_last": ("gauge", "duration of the last recompute in seconds"),
    "adlrec_plans_stored_total": ("counter", "plans stored (one per node whose allocation changed)"),
    "adlrec_infeasible_total": ("counter", "node recomputes that found no feasible plan"),
    "adlrec_jobs_expired_total": ("counter", "jobs expired for silence"),
    "adlrec_live_metrics_logged_total": ("counter", "heartbeat metric values logged to the jobs' MLflow runs"),
    "adlrec_live_log_failures_total": ("counter", "flushes of live metrics to MLflow that failed (logged)"),
    "adlrec_live_samples_dropped_total": ("counter", "live samples dropped because a buffer was full"),
    "adlrec_store_flushes_total": ("counter", "write-behind flushes of heartbeats to the store"),
    "adlrec_store_flushed_jobs_total": ("counter", "job rows written by those flushes"),
    "adlrec_store_flush_failures_total": ("counter", "flushes that failed (logged; retried by the next one)"),
    "adlrec_store_flush_seconds_last": ("gauge", "duration of the last flush in seconds"),
    "adlrec_jobs": ("gauge", "jobs by status (while the store is down: the open ones only)"),
    "adlrec_plans": ("gauge", "plans in the history (absent while the store is down)"),
    "adlrec_store_up": ("gauge", "1 when the job store answered this scrape, 0 when it did not"),
}


class Metrics:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
        self._hist: dict[str, list[float]] = {}  # route -> bucket counts, then sum and count

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            series = self._values.setdefault(name, {})
            series[key] = series.get(key, 0.0) + amount

    def set(self, name: str, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self._lock:
            self._values.setdefault(name, {})[key] = value

    def observe(self, seconds: float, route: str = "") -> None:
        with self._lock:
            h = self._hist.get(route)
            if h is None:
                h = self._hist[route] = [0.0] * (len(BUCKETS) + 2)
            for i, b in enumerate(BUCKETS):
                if seconds <= b:
                    h[i] += 1
                    break
            h[-2] += seconds
            h[-1] += 1

    def value(self, name: str, **labels: str) -> float:
        with self._lock:
            return self._values.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def render(self, gauges: Mapping[str, Mapping[tuple[tuple[str, str], ...], float]] | None = None) -> str:
        """All series as Prometheus text; ``gauges`` adds values read at scrape time."""
        with self._lock:
            values = {k: dict(v) for k, v in self._values.items()}
            hists = {route: list(h) for route, h in sorted(self._hist.items())}
        for name, series in (gauges or {}).items():
            values.setdefault(name, {}).update(series)
        lines = []
        unknown = {n: ("untyped", "(no help text)") for n in sorted(set(values) - set(HELP))}  # served all the same
        for name, (kind, text) in (HELP | unknown).items():
            if kind == "histogram":
                lines += [f"# HELP {name} {text}", f"# TYPE {name} histogram"]
                for route, h in hists.items():
                    r = f'route="{_escape(route)}"'
                    acc = 0
                    for b, n in zip(BUCKETS, h, strict=False):
                        acc += int(n)
                        le = "+Inf" if math.isinf(b) else f"{b:g}"
                        lines.append(f'{name}_bucket{{{r},le="{le}"}} {acc}')
                    lines += [f"{name}_sum{{{r}}} {h[-2]:.6f}", f"{name}_count{{{r}}} {int(h[-1])}"]
                continue
            series = values.get(name)
            if not series:
                continue
            lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
            for key, v in sorted(series.items()):
                labels = ",".join(f'{k}="{_escape(val)}"' for k, val in key)
                lines.append(f"{name}{{{labels}}} {_number(v)}" if labels else f"{name} {_number(v)}")
        return "\n".join(lines) + "\n"


def _number(v: float) -> str:
    """A sample's value, exact: ``{:g}`` kept 6 digits, so a counter past a million stood still between scrapes."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
