"""The framework-neutral heart of ``ADLCallback``: register, measure, heartbeat, apply plans.

The training loop only records timestamps (:class:`LoopMeter`), which costs nothing, each step
tagged with the worker count that served it (``loader.serving_workers``, when the loader says).  A
heartbeat reports throughput only when its window ran entirely at the count the job now asks for,
over at least ``min_steps`` steps: right after a resize the old pool still serves for a few batches,
and its pace must not become a point of the new count's curve.  A named daemon
thread heartbeats every ``interval_s`` (``while not stop.wait(interval)``), so a slow or absent
service never blocks a step; when the service answers with a plan the job has not applied yet, the
thread asks the loader for its count (``request_resize``, applied by the loop at its next batch),
even a count the loader already reports: ``num_workers`` is the count applied, and a request of an
earlier plan may still be pending, which only a new request overwrites.  The adapters call
:meth:`Controller.pause` where training stops between steps (validation, a checkpoint, an epoch's
end): the next step is then left out of the figures, so that time is counted neither as a step's
nor as a wait for data.  The
same thread registers the job first and reports it finished last, so the loop never waits on the
service, even one that accepts connections and never answers.  No failure of the service or the
client reaches the training loop: it is logged, once per kind.  In a distributed run the ranks on a
node are one job (:mod:`adlrec.callbacks.team`): the leading rank's thread does all of the above, the
others' only read the job's assignment and apply it.
"""

from __future__ import annotations

import logging
import math
import numbers
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from adlrec.callbacks.meter import LoopMeter
from adlrec.callbacks.team import MAX_ID, Team, form_team
from adlrec.schemas import MAX_WORKERS

__all__ = ["Controller", "Resizable", "ServiceLike", "check_interval", "distributed_rank"]

log = logging.getLogger("adlrec.callbacks")


class ServiceLike(Protocol):
    """What the controller needs of a client (``adlrec.client.ServiceClient`` is one)."""

    def register(self, node: str, **fields: Any) -> str | None: ...

    def heartbeat(self, *, throughput: float | None, workers: int | None, data_wait: float | None) -> Any: ...

    def finish(self) -> bool: ...

    def follow(self, job_id: str, *, first: bool = False) -> Any: ...  # a follower rank's read of its job


class Resizable(Protocol):  # what the controller resizes; any other loader is measured and reported only
    @property
    def num_workers(self) -> int: ...  # the count asked for (``serving_workers``, if present: in use)

    def request_resize(self, num_workers: int) -> None: ...


def check_interval(who: str, interval_s: Any) -> float:
    """``interval_s`` if the heartbeat thread can wait it: ``Event.wait`` raises OverflowError past
    ``threading.TIMEOUT_MAX`` (inf included), in the thread, where it would end the heartbeats silently."""
    if (
        isinstance(interval_s, bool)
        or not isinstance(interval_s, (int, float))
        or not math.isfinite(interval_s)
        or not 0 < interval_s <= threading.TIMEOUT_MAX
    ):
        raise ValueError(
            f"{who}: interval_s must be a finite number of seconds > 0 (at most {threading.TIMEOUT_MAX:.0f}), "
            f"got {interval_s!r}"
        )
    return float(interval_s)


def distributed_rank() -> tuple[int, int]:
    """``(rank, world size)`` of this process in a distributed run: from ``torch.distributed`` once its process
    group is up, else from the ``RANK``/``WORLD_SIZE`` variables a launcher (torchrun, Lightning) sets; ``(0, 1)``
    outside one."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # a half-made process group: read the launcher's variables instead
        pass
    rank, world = os.environ.get("RANK", "0"), os.environ.get("WORLD_SIZE", "1")
    return (int(rank), int(world)) if rank.isdigit() and world.isdigit() else (0, 1)


class Controller:
    def __init__(
        self,
        client: ServiceLike,
        node: str,
        *,
        interval_s: float = 5.0,
        registration: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        window: int = 50,
        min_steps: int | None = None,
        stop_wait_s: float = 5.0,
    ) -> None:
        self.client = client
        self.node = node
        self.interval_s = check_interval("Controller", interval_s)
        self.registration = dict(registration or {})
        self.clock = clock
        self.window = window
        self.meter = LoopMeter(window)
        self.min_steps = max(1, window // 5) if min_steps is None else min_steps
        self.stop_wait_s = stop_wait_s
        self.loader: Any = None  # a Resizable, or any loader (measured and reported, never resized)
        self.applied: list[tuple[int | None, int]] = []  # (plan id, workers) applied, in order, over every run
        self._asked: int | None = None  # the count last asked of this run's loader
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failed: set[str] = set()
        self.team: Team | None = None  # this rank's team in a distributed run, from the last start

    # -- called by the adapters ---------------------------------------------------------------------
    def start(self, loader: Any) -> None:
        """Start the heartbeat thread, which registers the job first (idempotent; returns at once)."""
        if self._thread is not None:
            return
        if loader is not None and not hasattr(loader, "request_resize"):
            log.warning(
                "adlrec: the loader is a %s, which cannot change workers mid-epoch; the job is measured and "
                "reported, but the service's plans are not applied. Train with an adlrec.loader.ResizableLoader "
                "(with Lightning: hand it to trainer.fit as it is)",
                type(loader).__name__,
            )
        self.team = form_team(self.node, self.registration.get("job_id"))
        self.loader = loader
        self._asked = None
        self.meter = LoopMeter(self.window)  # a new registration: the service forgets what it measured, so do we
        fields = dict(self.registration)
        workers = workers_of(loader)
        if workers is not None and "requested_workers" not in fields:
            if workers > MAX_WORKERS:  # the service would refuse the registration, and the job go unplanned
                log.warning(
                    "adlrec: the loader has %d workers; the service plans at most %d for a loader, so the job "
                    "registers as having asked for %d",
                    workers,
                    MAX_WORKERS,
                    MAX_WORKERS,
                )
            fields["requested_workers"] = min(workers, MAX_WORKERS)
        fields = self._as_rank(fields)
        target = self._follow if self.team is not None and not self.team.leader else self._run
        self._stop = threading.Event()  # its own: a thread left behind by a stop that timed out stays stopped
        self._thread = threading.Thread(target=target, args=(fields, self._stop), name="adlrec-heartbeat", daemon=True)
        self._thread.start()

    def _as_rank(self, fields: dict[str, Any]) -> dict[str, Any]:
        """The registration of this rank's job in a distributed run: its team's (the team's id and size), or,
        with no team, a job of one rank of its own (said in the log; a ``job_id=`` given every rank made apart)."""
        rank, world = distributed_rank()
        t = self.team
        if t is None:
            if world == 1:
                return fields
            log.warning(
                "adlrec: rank %d of %d of a distributed run registers as a job of its own, with its own loader, as "
                "its process group is not up yet; the service does not know that the ranks step together, so they "
                "may get different worker counts, and a rank's workers beyond the slowest rank's then wait "
                "(docs/training.md, Distributed training)",
                rank,
                world,
            )
            if fields.get("job_id") is not None:  # every rank's job_id= would make them one job, re-registered by each
                suffix = f"-rank{rank}"
                fields["job_id"] = str(fields["job_id"])[: MAX_ID - len(suffix)] + suffix
            if fields.get("ranks", 1) != 1:  # ranks=k from each would count the run's processes k times over
                log.warning(
                    "adlrec: ranks=%s was given, but rank %d registers as a job of its own: ranks=1",
                    fields["ranks"],
                    rank,
                )
                fields["ranks"] = 1
            return fields
        given = fields.get("ranks")
        if t.leader:
            log.info("adlrec: rank %d leads the %d ranks on node %s as job %s", t.rank, t.ranks, self.node, t.job_id)
            if given is not None and given != t.ranks:
                log.warning(
                    "adlrec: ranks=%s was given, but there are %d ranks of this run on node %s, each with its "
                    "adapter: the job registers ranks=%d (docs/training.md, Distributed training)",
                    given,
                    t.ranks,
                    self.node,
                    t.ranks,
                )
        return fields | {"job_id": t.job_id, "ranks": t.ranks}

    def batch_fetched(self) -> None:
        self.meter.fetched(self.clock())

    def batch_done(self, samples: int) -> None:
        waited = getattr(self.loader, "waited_s", None)  # a ResizableLoader times its own waits
        self.meter.done(
            self.clock(),
            samples,
            getattr(self.loader, "serving_workers", None),
            waited if isinstance(waited, float) else None,
        )

    def pause(self) -> None:
        """Training stops between steps here (validation, a checkpoint, an epoch's end): leave the next
        step out of the figures, so that this time counts neither as a step nor as a wait for data."""
        self.meter.pause()

    def stop(self) -> None:
        """Stop heartbeating; the thread tells the service the job finished.  Never raises, and waits at
        most ``stop_wait_s`` for a service that does not answer (it then expires the job after its TTL)."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout=self.stop_wait_s)
        if self._thread.is_alive():
            log.warning(
                "adlrec service did not answer within %.0f s; not waiting to report the job finished "
                "(the service expires it when its heartbeats stop)",
                self.stop_wait_s,
            )
        self._thread = None

    # -- the heartbeat thread -------------------------------------------------------------------------
    def _run(self, fields: dict[str, Any], stop: threading.Event) -> None:
        """Register, heartbeat every ``interval_s`` until stopped, then report the job finished: all here,
        so that a slow or hung service never holds up the training loop's start, steps or end."""
        self._safe("register", lambda: self.client.register(self.node, **fields))
        while not stop.wait(self.interval_s):
            self._safe("heartbeat", self.beat)  # a fault in measuring must not end the thread: beats, finish go on
        self._safe("finish", self.client.finish)

    def _follow(self, fields: dict[str, Any], stop: threading.Event) -> None:
        """A follower rank: read the job its leader registered every ``interval_s``, apply each new plan,
        report nothing (the leader reports one rank's figures for all, and the job's end)."""
        job_id, beats = fields["job_id"], 0
        while not stop.wait(self.interval_s):
            first, beats = beats == 0, beats + 1
            self._safe("follow", lambda: self._follow_once(job_id, first))  # noqa: B023 (called here)

    def _follow_once(self, job_id: str, first: bool) -> None:
        """One read and apply of a follower (its caller guards it: a failed read is logged as ``follow``)."""
        self._apply(self.client.follow(job_id, first=first), workers_of(self.loader))

    def beat(self) -> None:
        """One heartbeat; apply the answer if it carries a plan not applied yet."""
        stats = self.meter.stats()
        workers = workers_of(self.loader)  # None: a loader that does not say; its pace cannot be a curve's point
        if stats is not None and (workers is None or stats.steps < self.min_steps or stats.tag not in (None, workers)):
            stats = None  # too few steps yet, or measured at the count before a resize
        answer = self._safe(
            "heartbeat",
            lambda: self.client.heartbeat(
                throughput=stats.throughput if stats else None,  # None: nothing measured yet
                workers=workers,
                data_wait=stats.data_wait if stats else None,
            ),
        )
        self._apply(answer, workers)

    def _apply(self, answer: Any, workers: int | None) -> None:
        """Ask the loader for the answer's count if it carries a plan not applied yet."""
        if answer is None or not getattr(answer, "new", False) or not hasattr(self.loader, "request_resize"):
            return  # nothing new, or a loader that cannot resize (the adapter warned): nothing applied
        self.applied.append((answer.plan_id, answer.workers))
        before = workers if self._asked is None else self._asked
        if answer.workers != before:
            log.info("plan %s: %s -> %d DataLoader workers", answer.plan_id, before, answer.workers)
        # asked even when the loader already reports this count: an earlier plan's request may be pending
        self._asked = answer.workers
        self._safe("resize", lambda: self.loader.request_resize(answer.workers))

    def _safe(self, what: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn``; log what it raised (once per kind) instead of raising.

        The client logs a service that is down or refuses and returns None, so what reaches here is a
        bug (adlrec's, or a loader's or client's of the user's): the log keeps its traceback, once.
        """
        try:
            return fn()
        except Exception as exc:  # the training job must never die because of adlrec
            if what not in self._failed:
                self._failed.add(what)
                log.warning(
                    "adlrec %s failed (%s: %s); training continues", what, type(exc).__name__, exc, exc_info=exc
                )
            return None


def workers_of(loader: Any) -> int | None:
    """The loader's ``num_workers`` as an int, or None where it says none.  A numpy integer (a count from a
    config computed with numpy; DataLoader takes one) is a count too: read as none, the job registered as
    asking for 8 and never reported its throughput, with nothing logged."""
    workers = getattr(loader, "num_workers", None)
    if isinstance(workers, numbers.Integral) and not isinstance(workers, bool):
        return int(workers)
    return None
