"""A small client of the allocation service that never raises into a training loop.

Short timeouts, a few retries with exponential backoff on connection errors and 5xx, then it gives
up for this call and answers with what it knew last: when the service is away a job keeps its last
plan, and the client logs that once (and once more when the service is back).  A job the service
no longer knows (its store was wiped), or has as finished (a run whose registration found the service
away kept its last run's job id), is registered again from the saved registration.

    client = ServiceClient("http://127.0.0.1:8470", token=os.environ.get("ADLREC_SERVICE_TOKEN"))
    client.register(node="gpu-01", probe=features.to_dict(), requested_workers=8)
    for step, batch in enumerate(loader):
        ...
        if step % 50 == 0:
            a = client.heartbeat(throughput=meter.rate, workers=loader.num_workers, data_wait=meter.wait)
            if a is not None and a.new:
                loader.resize(a.workers)          # each plan is applied exactly once
    client.finish()
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any

import httpx

from adlrec.http_deadline import DeadlineBackend, deadline_transport
from adlrec.schemas import MAX_WORKERS
from adlrec.words import count

__all__ = ["Assignment", "ServiceClient", "token_problem"]

log = logging.getLogger("adlrec.client")


@dataclass(frozen=True)
class Assignment:
    """What the job should run with, as last heard from the service."""

    workers: int
    plan_id: int | None  # the plan that decided it; None until the node has one that includes the job
    status: str  # active | expired | finished
    new: bool  # True the first time this plan id is returned: apply it now (and only now)
    stale: bool = False  # True when the service could not be reached and this is the last known answer


def _check_settings(timeout_s: Any, retries: Any, backoff_s: Any) -> None:
    """Refused when the client is built: past it, a bad value raised in every call, which the client logs
    as an unexpected error (with a traceback) and the training loop never hears of."""
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError(f"ServiceClient: retries must be a whole number >= 0, got {retries!r}")
    if not (_finite(timeout_s) and timeout_s > 0):
        raise ValueError(f"ServiceClient: timeout_s must be a finite number of seconds > 0, got {timeout_s!r}")
    if not (_finite(backoff_s) and backoff_s >= 0):
        raise ValueError(f"ServiceClient: backoff_s must be a finite number of seconds >= 0, got {backoff_s!r}")


def _finite(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


class ServiceClient:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout_s: float = 2.0,
        retries: int = 2,
        backoff_s: float = 0.1,
        sleep: Callable[[float], None] = time.sleep,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        _check_settings(timeout_s, retries, backoff_s)
        token = (token or "").strip()  # a token file's newline is not part of it (nor of the service's)
        problem = token_problem(token)
        if problem is not None:  # httpx raised UnicodeEncodeError here, or h11 refused every request later
            raise ValueError(f"ServiceClient: the token {problem}; it is sent in an HTTP header: printable ASCII only")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # each attempt as a whole within a connect and a read, not only each of its network operations
        self._backend: DeadlineBackend | None = None
        if transport is None:
            self._backend = DeadlineBackend()
            transport = deadline_transport(self._backend)
        self.attempt_s = timeout_s + min(timeout_s, 1.0)
        self._http = httpx.Client(
            base_url=url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 1.0)),
            transport=transport,
        )
        self.url = url
        self.retries = retries
        self.backoff_s = backoff_s
        self.sleep = sleep
        self.job_id: str | None = None
        self._registration: dict[str, Any] | None = None
        self._last: Assignment | None = None
        self._seen_plan: int | None = None
        self._followed: tuple[str, Any] | None = None  # (job id, its registration time) a follower last read
        self._away = False
        self._complained: set[str] = set()

    # -- the job's life -----------------------------------------------------------------------
    def register(self, node: str, **fields: Any) -> str | None:
        """Register the job (fields as in POST /jobs: probe= or curve=, bounds); returns its id, or None when
        the service did not take it (away, or refusing it).  An id it had before stays in ``job_id``: the next
        registration (a heartbeat's, once the service is back) asks for the same one.

        A registration starts the job's life again (a second run with the same client, or a service that
        lost the job): the plan the next heartbeat brings is new even if its id was seen before, since the
        loader it is for may have run at another count meanwhile."""
        body = {"node": node, **{k: v for k, v in fields.items() if v is not None}}
        if self.job_id is not None:
            body.setdefault("job_id", self.job_id)
        self._registration = body
        self._seen_plan = None
        data = self._call("POST", "/jobs", body, shape=_is_job)
        if data is None:
            return None
        self.job_id = data["job_id"]
        self._registration = body | {"job_id": self.job_id}
        self._take(data["assignment"], apply=False)  # its plan is new to the next heartbeat, which applies it
        return self.job_id

    def heartbeat(
        self, throughput: float | None = None, workers: int | None = None, data_wait: float | None = None
    ) -> Assignment | None:
        """Report measurements; returns the assignment (the last known one, ``stale``, if the service is away)."""
        if self.job_id is None:
            if self._registration is None or self.register(**self._registration) is None:
                return self._stale()
        body = {"throughput": throughput, "workers": workers, "data_wait": data_wait}
        body = {k: v for k, v in body.items() if v is not None}
        data = self._call("POST", f"/jobs/{self.job_id}/heartbeat", body, unknown_ok=True, shape=_is_assignment)
        if data in ("unknown", "finished") and self._registration is not None:
            held = "no longer knows" if data == "unknown" else "has finished"
            log.warning("service at %s %s job %s; registering it again", self.url, held, self.job_id)
            if self.register(**self._registration) is None:
                return self._stale()
            data = self._call("POST", f"/jobs/{self.job_id}/heartbeat", body, shape=_is_assignment)
        if not isinstance(data, dict):
            return self._stale()
        return self._take(data)

    def follow(self, job_id: str, *, first: bool = False) -> Assignment | None:
        """The assignment of a job another process registered (the leading rank of a distributed run), read
        without registering or reporting anything: ``new`` the first time its plan id is seen (``first``: since
        this call, for a run that starts again).  None while the service knows no such job (its leader has
        not registered yet); the last known answer, ``stale``, while the service is away.

        A registration of the job since the last read (the leader's next run, or the leader registering it
        again with a service that lost it: a fresh store numbers its plans from 1 again) starts its life
        again, as :meth:`register` does the leader's: its plan is new even if its id was seen before."""
        if first:
            self._seen_plan = None
            self._last = None
            self._followed = None
        data = self._call("GET", f"/jobs/{job_id}", unknown_ok=True, shape=_is_job)
        if data == "unknown":
            return None
        if not isinstance(data, dict):
            return self._stale()
        life = (job_id, data.get("registered_at"))
        if life != self._followed:
            self._followed = life
            self._seen_plan = None
        return self._take(data["assignment"])

    def finish(self) -> bool:
        if self.job_id is None:
            return False
        return self._call("POST", f"/jobs/{self.job_id}/finish", {}) is not None

    def plan(self, node: str) -> dict[str, Any] | None:
        """The node's current plan as JSON, or None."""
        return self._call("GET", f"/nodes/{node}/plan")

    @property
    def last(self) -> Assignment | None:
        return self._last

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ServiceClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing -----------------------------------------------------------------------------
    def _take(self, data: dict[str, Any], *, apply: bool = True) -> Assignment:
        """The service's answer as an Assignment; ``apply``: mark its plan seen (``new`` only this once)."""
        plan_id = data.get("plan_id")
        new = apply and plan_id is not None and plan_id != self._seen_plan
        if new:
            self._seen_plan = plan_id
        self._last = Assignment(int(data["workers"]), plan_id, str(data["status"]), new)
        return self._last

    def _stale(self) -> Assignment | None:
        if self._last is None:
            return None
        a = self._last
        return Assignment(a.workers, a.plan_id, a.status, new=False, stale=True)

    def _call(
        self,
        method: str,
        path: str,
        body: dict | None = None,
        unknown_ok: bool = False,
        shape: Callable[[Any], bool] | None = None,
    ) -> Any:
        """The JSON answer; None on any failure (logged); "unknown" for a 404 (no such job) and "finished"
        for a 409 (a job that finished: the service says to register it again) when ``unknown_ok``.

        ``shape``: whether a successful answer is what the service sends for this call (default: a JSON
        object).  One that is not (an HTML page, another program's JSON: a proxy or a wrong URL answering
        200) is not the service: the call fails as while it is away (logged once, the last plan kept),
        rather than raise into the caller or log a traceback per call."""
        try:
            for attempt in range(self.retries + 1):
                try:
                    with self._deadline():
                        r = self._http.request(method, path, json=body if method != "GET" else None)
                except httpx.TransportError as exc:
                    err = f"{type(exc).__name__}: {exc}"
                else:
                    if r.status_code < 500:
                        break
                    err = f"HTTP {r.status_code}"
                if attempt < self.retries:
                    self.sleep(self.backoff_s * 2**attempt)
            else:
                self._went_away(err)
                return None
            if r.status_code >= 400:
                self._came_back()
                if r.status_code == 404 and unknown_ok:
                    return "unknown"
                if r.status_code == 409 and unknown_ok:
                    return "finished"
                self._complain_once(f"{method} {path.split('/')[1]} {r.status_code}", r)
                return None
            try:
                data = r.json()
            except ValueError:  # not JSON (an HTML page)
                data = _NOT_JSON
            if not (shape or _is_object)(data):
                ctype = r.headers.get("content-type", "no content-type")
                self._went_away(f"HTTP {r.status_code} with a {ctype} answer that is not the service's")
                return None
            self._came_back()
            return data
        except Exception:  # a bug here must never stop training
            log.exception("adlrec client: unexpected error calling %s %s; carrying on", method, path)
            return None

    def _deadline(self) -> AbstractContextManager[None]:
        """One attempt's deadline (``attempt_s``); none with an injected transport (a test's)."""
        return nullcontext() if self._backend is None else self._backend.deadline(self.attempt_s)

    def _went_away(self, err: str) -> None:
        if not self._away:
            keep = _keeping(self._last)
            log.warning("adlrec service at %s unreachable (%s); %s until it returns", self.url, err, keep)
        self._away = True

    def _came_back(self) -> None:
        if self._away:
            log.info("adlrec service at %s is back", self.url)
        self._away = False

    def _complain_once(self, key: str, r: httpx.Response) -> None:
        if key in self._complained:
            return
        self._complained.add(key)
        try:
            body = r.json()
        except ValueError:  # not JSON (an HTML page)
            body = None
        # the service's refusals carry a detail; another program's JSON (a list, a string) is said as it is
        detail = body.get("detail", r.text) if isinstance(body, dict) else r.text
        log.error("adlrec service refused %s: %s", key, str(detail)[:300])


def token_problem(token: str) -> str | None:
    """Why ``token`` cannot be sent as a bearer token, or None.  An HTTP header carries printable ASCII: a
    character outside it (a typographic quote pasted with the token, a line break of a two-line file) is
    refused by the HTTP library, or arrives as other bytes than the service compares.  Names its position
    only: the token is a secret."""
    for i, ch in enumerate(token):
        if not " " <= ch <= "~":
            return f"has a character that is not printable ASCII (position {i + 1} of {len(token)})"
    return None


_NOT_JSON = object()  # an answer that did not parse as JSON


def _is_object(d: Any) -> bool:
    return isinstance(d, dict)


def _is_assignment(d: Any) -> bool:
    """Whether ``d`` is an assignment as the service writes it (AssignmentOut): a worker count in range, the plan
    id an integer or null, a status."""
    if not isinstance(d, dict):
        return False
    workers, plan_id = d.get("workers"), d.get("plan_id")
    return (
        type(workers) is int
        and 0 <= workers <= MAX_WORKERS
        and (plan_id is None or type(plan_id) is int)
        and isinstance(d.get("status"), str)
    )


def _is_job(d: Any) -> bool:
    """Whether ``d`` is a job as the service writes it (JobOut), as far as the client reads it."""
    return isinstance(d, dict) and isinstance(d.get("job_id"), str) and _is_assignment(d.get("assignment"))


def _keeping(last: Assignment | None) -> str:
    """What the job goes on with while the service is away, for the log."""
    if last is None:
        return "no plan yet"
    if last.plan_id is None:
        return f"keeping {count(last.workers, 'worker')} (the service has not planned this job yet)"
    return f"keeping {count(last.workers, 'worker')} (plan {last.plan_id})"
