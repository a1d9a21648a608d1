"""`adlrec status`: what a running allocation service holds now, read from its JSON API.

For a terminal on the node, where the web UI is a browser away: each node with active jobs, its
current plan, and per job what the plan gives it, what it runs with and measured, and why.  It only
reads (``GET /nodes``, ``/plans/current``, ``/jobs``), so it needs no token.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from adlrec.errors import AdlrecError, UsageError
from adlrec.words import count

__all__ = ["add_commands", "fetch_status", "status_text"]


class ServiceError(AdlrecError):
    """The service did not answer, or answered with an error: not the user's input (exit code 1)."""

    exit_code = 1


def add_commands(sub) -> None:
    st = sub.add_parser(
        "status",
        help="show a running service's nodes, plans and active jobs",
        description="Read the allocation service's nodes, current plans and active jobs and print them per node: "
        "each job's planned workers, what it runs with and measured, and the plan's reason. Reads only.",
    )
    st.add_argument(
        "--url",
        default=None,
        help="the service's address (default: $ADLREC_SERVICE_URL, else the callbacks' default, http://127.0.0.1:8470)",
    )
    st.add_argument("--node", default=None, help="only this node")
    st.add_argument("--json", action="store_true", help="print the nodes, plans and active jobs as one JSON object")
    st.set_defaults(handler=_cmd_status)


def _cmd_status(args: argparse.Namespace) -> int:
    from adlrec.callbacks._build import DEFAULT_URL, URL_VARIABLE, check_url  # the address the callbacks use

    url = args.url if args.url is not None else os.environ.get(URL_VARIABLE, DEFAULT_URL)
    try:
        check_url("adlrec status", url, "--url" if args.url is not None else f"{URL_VARIABLE} (--url not given)")
    except ValueError as exc:
        raise UsageError(str(exc).removeprefix("adlrec status: ")) from None
    state = fetch_status(url, args.node)
    if args.json:
        print(json.dumps(state, indent=2))
    else:
        from adlrec.cli.common import stdout

        stdout().print(status_text(state, now=time.time()))
    return 0


def fetch_status(url: str, node: str | None = None, timeout_s: float = 10.0) -> dict[str, Any]:
    """``{"url", "nodes", "plans", "jobs"}`` as the service answers them (active jobs; one node's with ``node``)."""
    import httpx

    base = url.rstrip("/")
    with httpx.Client(base_url=base, timeout=timeout_s) as http:
        nodes = _get(http, base, "/nodes", keys=_NODE_KEYS)
        if node is not None and node not in {n["name"] for n in nodes}:
            known = ", ".join(sorted(n["name"] for n in nodes)) or "none yet"
            raise UsageError(f"--node: the service at {base} knows no node {node!r} (known: {known})")
        plans = _get(http, base, "/plans/current", keys=_PLAN_KEYS)
        params = {"status": "active"} | ({"node": node} if node is not None else {})
        jobs = _get(http, base, "/jobs", params, keys=_JOB_KEYS)
    if node is not None:
        nodes = [n for n in nodes if n["name"] == node]
        plans = [p for p in plans if p["node"] == node]
    return {"url": base, "nodes": nodes, "plans": plans, "jobs": jobs}


# what status_text reads of each answer: another program's JSON (a wrong --url) is said so, not a traceback
_NODE_KEYS = frozenset({"name", "cores", "memory_mb", "active_jobs"})
_PLAN_KEYS = frozenset({"node", "plan_id", "policy", "cores_used", "workers", "throughput", "reasons"})
_JOB_KEYS = frozenset(
    {
        "job_id",
        "node",
        "gpus",
        "assignment",
        "curve",
        "last_seen",
        "reported_workers",
        "reported_throughput",
        "data_wait",
    }
)


def _get(
    http: Any, base: str, path: str, params: dict[str, str] | None = None, *, keys: frozenset[str]
) -> list[dict[str, Any]]:
    """The answer to ``GET path``: a list of objects, each with ``keys`` (else a :class:`ServiceError`)."""
    import httpx

    try:
        r = http.get(path, params=params)
    except (httpx.ReadTimeout, httpx.WriteTimeout) as exc:
        # it took the connection, so a service is there: it is busy or stuck, and `adlrec serve` is no advice
        raise ServiceError(
            f"the service at {base} took the connection but did not answer GET {path} within "
            f"{http.timeout.read:g} s ({type(exc).__name__}); it may be busy: try again, or see its log"
        ) from None
    except httpx.TransportError as exc:
        raise ServiceError(
            f"no adlrec service answers at {base} ({type(exc).__name__}: {exc}); start one with `adlrec serve`, "
            "or give --url or ADLREC_SERVICE_URL"
        ) from None
    if r.status_code != 200:
        try:
            body = r.json()
        except ValueError:
            body = None
        detail = body.get("detail") if isinstance(body, dict) else None
        if not isinstance(detail, str):  # another program's page (a web server's HTML 404), or its JSON
            detail = f"not an adlrec service's answer ({_opening(r.text)}): is --url its address?"
        one_line = " ".join(detail.split())
        raise ServiceError(f"the service at {base} answered GET {path} with {r.status_code}: {one_line[:300]}")
    try:
        data = r.json()
    except ValueError:
        raise ServiceError(
            f"{base} answered GET {path} with something that is not JSON: is it an adlrec service?"
        ) from None
    if not isinstance(data, list) or not all(isinstance(x, dict) and keys <= x.keys() for x in data):
        raise ServiceError(
            f"{base} answered GET {path} with JSON that is not an adlrec service's answer "
            f"(a list of objects with {', '.join(sorted(keys))}): is it an adlrec service?"
        )
    return data


def status_text(state: dict[str, Any], now: float) -> Any:
    """A rich renderable of ``state`` (:func:`fetch_status`): a table per node with active jobs, then the idle nodes."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    plans = {p["node"]: p for p in state["plans"]}
    jobs: dict[str, list[dict[str, Any]]] = {}
    for j in state["jobs"]:
        jobs.setdefault(j["node"], []).append(j)
    parts: list[Any] = []
    busy = [n for n in state["nodes"] if jobs.get(n["name"])]
    idle = [n for n in state["nodes"] if not jobs.get(n["name"])]
    if not state["nodes"]:
        parts.append(Text(f"the service at {state['url']} knows no node yet: a job's registration names its node"))
    for n in busy:
        plan = plans.get(n["name"])
        table = Table(title=_node_line(n, plan), title_justify="left")
        for col in (
            "job",
            "GPUs",
            "workers: plan",
            "running with",
            "samples/s",
            "expected",
            "of peak",
            "data wait",
            "heard",
            "why",
        ):
            # an id is never cut short (rich's default for a column too narrow is "…"): it wraps, as in the web UI
            table.add_column(
                col,
                justify="left" if col in ("job", "why") else "right",
                overflow="fold" if col == "job" else "ellipsis",
            )
        for j in jobs[n["name"]]:
            table.add_row(*_job_row(j, plan, now))
        parts.append(table)
        if n.get("problem"):
            parts.append(Text(f"  no plan fits now: {n['problem']}"))
    if idle:
        listed = ", ".join(f"{n['name']} ({count(n['cores'], 'core')})" for n in idle)
        parts.append(Text(f"nodes without an active job: {listed}"))
    return Group(*parts)


def _node_line(n: dict[str, Any], plan: dict[str, Any] | None) -> str:
    head = f"{n['name']}: {count(n['cores'], 'core')}, {n['memory_mb'] / 1024:.1f} GB for workers, {n['active_jobs']} active"
    if plan is None:
        return head + " · no plan yet"
    return f"{head} · plan #{plan['plan_id']} by {plan['policy']}, {plan['cores_used']} of {n['cores']} cores used"


def _job_row(j: dict[str, Any], plan: dict[str, Any] | None, now: float) -> list[str]:
    """One job's cells; a job of several ranks shows the plan's whole-job figures and each rank's as ``r × n``."""
    r = j.get("ranks", 1)
    each = (lambda v: f"{r} × {v}") if r > 1 else str  # noqa: E731 (a per-rank figure, as the web UI shows it)
    a = j["assignment"]
    planned = plan is not None and j["job_id"] in plan["workers"]
    workers = plan["workers"][j["job_id"]] if planned else r * a["workers"]
    expected = plan["throughput"][j["job_id"]] if planned else r * j["curve"][min(a["workers"], len(j["curve"]) - 1)]
    peak = r * max(j["curve"])
    why = plan["reasons"].get(j["job_id"], "") if planned else "not in a plan yet"
    return [
        j["job_id"],
        f"{j['gpus']} ({r} ranks)" if r > 1 else str(j["gpus"]),
        f"{workers} ({r} × {workers // r})" if r > 1 else str(workers),
        "–" if j["reported_workers"] is None else each(j["reported_workers"]),
        "–" if j["reported_throughput"] is None else each(f"{j['reported_throughput']:,.1f}"),
        f"{expected:,.1f}",
        f"{expected / peak:.0%}" if peak > 0 else "–",
        "–" if j["data_wait"] is None else f"{j['data_wait']:.0%}",
        f"{max(0.0, now - j['last_seen']):,.0f} s ago",
        why,
    ]


def _opening(text: str, width: int = 80) -> str:
    """The first non-blank line of an answer, quoted, with "..." only where more of it was left out."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "an empty body"
    first = lines[0]
    more = len(first) > width or len(lines) > 1
    return f"{first[:width]!r}{'...' if more else ''}"
