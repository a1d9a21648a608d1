"""The controller's own rules, with a service that answers as scripted (tests/integration/test_callbacks.py
has them against a real one): what it reports, which plans it applies, and that nothing it calls reaches
the training loop."""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np
import pytest
import torch

from adlrec.callbacks.controller import Controller
from adlrec.client import Assignment
from adlrec.loader import ResizableLoader
from tests.factories import Indices


class Service:
    """A ServiceLike that records what it is told and answers heartbeats and reads from ``answers`` in
    order (None once they run out); ``broken``: every call raises, as a client with a bug would."""

    def __init__(self, answers: list[Assignment | None] | None = None, broken: bool = False) -> None:
        self.answers = list(answers or [])
        self.broken = broken
        self.registered: list[dict[str, Any]] = []
        self.beats: list[dict[str, Any]] = []
        self.follows: list[tuple[str, bool]] = []
        self.finished = 0

    def _answer(self) -> Assignment | None:
        if self.broken:
            raise RuntimeError("the client broke")
        return self.answers.pop(0) if self.answers else None

    def register(self, node: str, **fields: Any) -> str:
        self.registered.append(fields)
        if self.broken:
            raise RuntimeError("the client broke")
        return "job"

    def heartbeat(self, *, throughput: float | None, workers: int | None, data_wait: float | None) -> Any:
        self.beats.append({"throughput": throughput, "workers": workers, "data_wait": data_wait})
        return self._answer()

    def finish(self) -> bool:
        self.finished += 1
        if self.broken:
            raise RuntimeError("the client broke")
        return True

    def follow(self, job_id: str, *, first: bool = False) -> Any:
        self.follows.append((job_id, first))
        return self._answer()


def loader(workers: int = 2) -> ResizableLoader:
    """A real resizable loader, never iterated: no worker process starts."""
    return ResizableLoader(Indices(16), batch_size=8, num_workers=workers, multiprocessing_context="fork")


def heartbeat_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "adlrec-heartbeat"]


def steps(c: Controller, now: list[float], k: int) -> None:
    """``k`` steps of 0.1 s each on the controller's injected clock, the first 0.02 s of each waiting for
    its batch of 8 samples."""
    for _ in range(k):
        now[0] += 0.02
        c.batch_fetched()
        now[0] += 0.08
        c.batch_done(8)


@pytest.mark.parametrize(
    "settings, needed",
    [
        ({"window": 10, "min_steps": 3}, 3),
        ({}, 10),  # by default a fifth of the window of 50 steps
    ],
    ids=["min_steps=3", "default"],
)
def test_throughput_is_reported_once_min_steps_were_measured_and_not_before(settings, needed):
    now = [0.0]
    service = Service()
    c = Controller(service, "n", interval_s=3600, clock=lambda: now[0], **settings)
    c.loader = torch.utils.data.DataLoader(Indices(16), batch_size=8, num_workers=2)  # never iterated
    steps(c, now, needed)  # the origin and needed - 1 measured steps
    c.beat()
    steps(c, now, 1)  # needed measured steps
    c.beat()
    assert service.beats == [
        {"throughput": None, "workers": 2, "data_wait": None},
        {"throughput": pytest.approx(80.0), "workers": 2, "data_wait": pytest.approx(0.2)},
    ]


def test_a_loaders_count_given_as_a_numpy_integer_is_registered_and_reported():
    # np.int64(2) was read as no count: the job registered as asking for 8 and never reported a throughput
    now = [0.0]
    service = Service()
    c = Controller(service, "n", interval_s=3600, clock=lambda: now[0], window=10, min_steps=3, stop_wait_s=10)
    c.start(torch.utils.data.DataLoader(Indices(16), batch_size=8, num_workers=np.int64(2)))  # never iterated
    c.stop()
    assert service.registered[0]["requested_workers"] == 2 and type(service.registered[0]["requested_workers"]) is int
    steps(c, now, 4)
    c.beat()
    assert service.beats[-1] == {"throughput": pytest.approx(80.0), "workers": 2, "data_wait": pytest.approx(0.2)}
    assert type(service.beats[-1]["workers"]) is int


def test_a_loader_that_does_not_say_its_workers_reports_no_throughput():
    """The service refuses a throughput without the count it was measured at (422): the job would never
    be planned."""
    now = [0.0]
    service = Service()
    c = Controller(service, "n", interval_s=3600, clock=lambda: now[0], window=10)
    c.loader = [1, 2, 3]  # any iterable of batches
    steps(c, now, 10)
    c.beat()
    assert service.beats == [{"throughput": None, "workers": None, "data_wait": None}]


def test_each_plan_is_asked_of_the_loader_once_and_a_stale_or_old_answer_never():
    plans = [
        Assignment(1, 1, "active", new=True),
        Assignment(1, 1, "active", new=False),  # the same plan, heard again
        Assignment(1, 1, "active", new=False, stale=True),  # the service away: the last answer
        Assignment(2, 2, "active", new=True),
        None,  # no answer at all
    ]
    asked: list[int] = []
    ld = loader()
    request = ld.request_resize
    ld.request_resize = lambda n: (asked.append(n), request(n))  # type: ignore[method-assign]
    c = Controller(Service(plans), "n", interval_s=3600)
    c.loader = ld
    for _ in plans:
        c.beat()
    assert c.applied == [(1, 1), (2, 2)] and asked == [1, 2] and ld.num_workers == 2


def test_a_second_start_while_running_starts_no_second_heartbeat_thread():
    service = Service()
    c = Controller(service, "n", interval_s=3600, stop_wait_s=10)
    c.start(loader())
    c.start(loader())  # a second on_train_start, or a with block inside another
    c.stop()
    assert heartbeat_threads() == []  # a second thread would have been left heartbeating
    assert len(service.registered) == 1 and service.finished == 1


def test_each_run_registers_and_finishes_and_measures_afresh():
    """A second fit with the same callback: the job registers again (the service forgets what it measured),
    and the first run's steps are no measurement of the second's."""
    now = [0.0]
    service = Service()
    c = Controller(service, "n", interval_s=3600, clock=lambda: now[0], window=10, stop_wait_s=10)
    c.start(loader())
    steps(c, now, 6)
    c.stop()
    c.start(loader())
    c.beat()
    c.stop()
    assert len(service.registered) == 2 and service.finished == 2
    assert service.beats == [{"throughput": None, "workers": 2, "data_wait": None}]


def test_the_loaders_count_is_registered_unless_requested_workers_is_given():
    service = Service()
    for registration in ({}, {"requested_workers": 5}):
        c = Controller(service, "n", interval_s=3600, registration=registration, stop_wait_s=10)
        c.start(loader(workers=2))
        c.stop()
    assert [r["requested_workers"] for r in service.registered] == [2, 5]


def test_a_client_that_raises_never_reaches_the_loop_and_is_logged_once_per_kind(caplog):
    service = Service(broken=True)
    c = Controller(service, "n", interval_s=3600, stop_wait_s=10)
    with caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        c.start(loader())
        for _ in range(3):
            c.beat()
        c.stop()
    assert len(service.registered) == 1 and len(service.beats) == 3
    assert service.finished == 1  # the thread went on to report the job finished
    said = [r.getMessage() for r in caplog.records]
    assert sorted(m.split(" failed")[0] for m in said) == ["adlrec finish", "adlrec heartbeat", "adlrec register"]
    assert all("(RuntimeError: the client broke); training continues" in m for m in said)
    # what reaches the guard is a bug, not a service that is down (the client logs those): its traceback
    # is kept, once per kind, naming where it was raised
    assert all(r.exc_info and r.exc_info[0] is RuntimeError for r in caplog.records)
    assert caplog.text.count("Traceback") == 3 and "in register" in caplog.text


def test_a_fault_in_measuring_never_ends_the_heartbeat_thread(caplog):
    """The thread logs it and goes on: it still reports the job finished (it ended, with a traceback on
    stderr only, and the service expired the job a TTL later)."""
    import time

    service = Service()
    c = Controller(service, "n", interval_s=0.01, stop_wait_s=10)
    with caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        c.start(loader())
        c.meter.stats = lambda: 1 / 0  # a bug in the meter, met at every beat
        deadline = time.monotonic() + 60  # a bound on waiting for the thread's first beats, not a timing check
        while "adlrec heartbeat failed (ZeroDivisionError" not in caplog.text:
            assert time.monotonic() < deadline, "no beat failed"
            time.sleep(0.01)
        alive = heartbeat_threads()[0].is_alive()
        c.stop()
    assert alive and len(service.registered) == 1 and service.finished == 1
    assert caplog.text.count("heartbeat failed") == 1  # once per kind


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_a_loader_at_the_services_bound_registers_as_it_is_and_one_past_it_at_the_bound(caplog):
    service = Service()
    with caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        for workers in (256, 257):
            c = Controller(service, "n", interval_s=3600, stop_wait_s=10)
            c.start(torch.utils.data.DataLoader(Indices(16), batch_size=8, num_workers=workers))  # never iterated
            c.stop()
    assert [r["requested_workers"] for r in service.registered] == [256, 256]
    said = [r.getMessage() for r in caplog.records if "the service plans at most" in r.getMessage()]
    assert len(said) == 1 and "the loader has 257 workers; the service plans at most 256" in said[0]


def test_a_second_runs_first_plan_is_said_as_the_change_from_its_own_loaders_count(caplog):
    """The first run asked for 1 worker; the second run's fresh loader has 2 and its plan says 1 again: the
    log says the change (2 -> 1), not 'no change' from the count the first run asked of its loader."""
    service = Service([Assignment(1, 1, "active", new=True), Assignment(1, 1, "active", new=True)])
    c = Controller(service, "n", interval_s=3600, stop_wait_s=10)
    with caplog.at_level(logging.INFO, logger="adlrec.callbacks"):
        for _ in range(2):
            c.start(loader(workers=2))
            c.beat()
            c.stop()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("plan ")]
    assert said == ["plan 1: 2 -> 1 DataLoader workers"] * 2
    assert c.applied == [(1, 1), (1, 1)]
