"""The callbacks against a real service on port 0, with real DataLoader workers resized mid-run."""

from __future__ import annotations

import logging
import multiprocessing
import socket
import threading
import time

import httpx
import pytest
import torch

from adlrec.callbacks import ADLCallback, ADLLoop
from adlrec.callbacks.controller import Controller
from adlrec.client import Assignment, ServiceClient
from adlrec.loader import ResizableLoader
from adlrec.service import create_app
from tests.factories import Indices
from tests.service_helpers import LiveServer, service_settings

AUTH = {"Authorization": "Bearer s3cret"}
STEEP = [10.0, 50.0, 90.0, 100.0, 100.0, 100.0]  # the plan on 8 cores: 3 workers (the fewest at the peak)


def loader(n: int = 160, workers: int = 1) -> ResizableLoader:
    return ResizableLoader(
        Indices(n), batch_size=8, shuffle=True, seed=0, num_workers=workers, multiprocessing_context="fork", handover=0
    )


def test_plain_loop_changes_workers_when_the_plan_changes_and_loses_no_sample(tmp_path):
    settings = service_settings(tmp_path, service_debounce_s=0.05)
    ld = loader()
    with LiveServer(create_app(settings)) as srv, ld:
        with ADLLoop(ld, url=srv.url, token="s3cret", node="n1", curve=STEEP, interval_s=0.1, job_id="loop-a") as adl:
            epochs = []
            for _ in range(3):
                seen = []
                for batch in adl.iterate():
                    seen += batch.tolist()
                    time.sleep(0.01)
                epochs.append(seen)
        job = httpx.get(f"{srv.url}/jobs/loop-a", timeout=10).json()
    assert all(sorted(e) == list(range(160)) for e in epochs)  # every sample once per epoch
    assert adl.controller.applied and adl.controller.applied[0][1] == 3
    assert ld.num_workers == 3
    assert job["status"] == "finished"


def test_plain_loop_finishes_when_the_service_stops_mid_run(tmp_path, caplog):
    settings = service_settings(tmp_path, service_debounce_s=0.05)
    ld = loader(n=240)
    server = LiveServer(create_app(settings)).__enter__()
    seen = []
    with caplog.at_level(logging.WARNING), ld:
        with ADLLoop(ld, url=server.url, token="s3cret", node="n2", curve=STEEP, interval_s=0.05) as adl:
            for i, batch in enumerate(adl.iterate()):
                seen += batch.tolist()
                if i == 5:
                    server.__exit__(None, None, None)  # the service goes away mid-epoch
                time.sleep(0.01)
    assert sorted(seen) == list(range(240))
    assert any("unreachable" in r.getMessage() for r in caplog.records)


def test_a_service_that_never_answers_holds_up_neither_the_first_batch_nor_the_end(caplog):
    # a real socket that accepts connections and never answers: each call waits out the client's timeouts
    silent = socket.create_server(("127.0.0.1", 0), backlog=16)
    url = f"http://127.0.0.1:{silent.getsockname()[1]}"
    held: list[socket.socket] = []  # connections accepted and never answered

    def accept() -> None:
        while True:
            try:
                held.append(silent.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    ld = loader(n=64)
    try:
        with caplog.at_level(logging.WARNING, logger="adlrec.callbacks"), ld:
            with ADLLoop(ld, url=url, node="n9", curve=STEEP, interval_s=0.05) as adl:
                adl.controller.stop_wait_s = 0.2
                seen = []
                for batch in adl.iterate():
                    if not seen:  # the first batch comes while the registration's first try still waits
                        assert len(held) <= 1 and adl.controller.client.job_id is None
                    seen += batch.tolist()
        assert sorted(seen) == list(range(64))
        assert any("did not answer within" in r.getMessage() for r in caplog.records)
    finally:
        silent.close()
        for conn in held:
            conn.close()


def test_a_stop_that_timed_out_leaves_no_second_heartbeat_thread_after_a_restart():
    # a silent socket: registration waits out its (short) timeout, longer than stop waits
    silent = socket.create_server(("127.0.0.1", 0), backlog=16)
    client = ServiceClient(f"http://127.0.0.1:{silent.getsockname()[1]}", timeout_s=0.3, retries=0)
    controller = Controller(client, "n10", interval_s=0.05, registration={"curve": STEEP}, stop_wait_s=0.01)
    beating = lambda: [t for t in threading.enumerate() if t.name == "adlrec-heartbeat"]  # noqa: E731
    try:
        controller.start(None)
        controller.stop()  # gives up at once: the first thread is still registering
        controller.start(None)  # a second fit or with block on the same callback
        deadline = time.monotonic() + 15
        while len(beating()) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(beating()) == 1, "the first thread, stopped, went on heartbeating beside the second"
    finally:
        controller.stop_wait_s = 5.0
        controller.stop()
        silent.close()
        client.close()


def test_a_plain_dataloader_is_measured_and_reported_at_its_count_but_never_resized(tmp_path, caplog):
    settings = service_settings(tmp_path, service_debounce_s=0.05)
    plain = torch.utils.data.DataLoader(Indices(160), batch_size=8, num_workers=1, multiprocessing_context="fork")
    with LiveServer(create_app(settings)) as srv, caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        adl = ADLLoop(plain, url=srv.url, token="s3cret", node="n5", curve=STEEP, interval_s=0.05, job_id="plain")
        with adl:
            for _ in range(3):
                for _batch in adl.iterate():
                    time.sleep(0.01)
        plans = httpx.get(f"{srv.url}/plans", params={"node": "n5"}, timeout=10).json()["plans"]
        job = httpx.get(f"{srv.url}/jobs/plain", timeout=10).json()
    # the service planned another count (its finish made a later plan, without the job) ...
    assert [p["workers"]["plain"] for p in plans if "plain" in p["workers"]] == [3]
    assert adl.controller.applied == [] and plain.num_workers == 1  # ... which nothing claimed to apply
    assert {p["workers"] for p in job["measured"]} == {1}  # its pace is a point at the count it ran with
    assert job["requested_workers"] == 1 and job["status"] == "finished"
    assert any("DataLoader, which cannot change workers" in r.getMessage() for r in caplog.records)


@pytest.mark.filterwarnings("ignore:This DataLoader will create:UserWarning")
def test_a_loader_of_more_workers_than_the_service_plans_registers_at_its_bound(tmp_path, caplog):
    """300 workers asked of a loader (none started: nothing iterates it): the registration says 256, the most
    the service plans for a loader, instead of being refused (422) and the job going unplanned."""
    settings = service_settings(tmp_path, service_debounce_s=0.05, service_token=None)
    many = torch.utils.data.DataLoader(Indices(16), batch_size=8, num_workers=300)
    with LiveServer(create_app(settings)) as srv, caplog.at_level(logging.WARNING, logger="adlrec.callbacks"):
        client = ServiceClient(srv.url)
        controller = Controller(client, "n6", interval_s=0.05, registration={"curve": STEEP, "job_id": "many"})
        try:
            controller.start(many)
            deadline = time.monotonic() + 30
            while httpx.get(f"{srv.url}/jobs/many", timeout=10).status_code == 404 and time.monotonic() < deadline:
                time.sleep(0.05)
            job = httpx.get(f"{srv.url}/jobs/many", timeout=10).json()
        finally:
            controller.stop()
            client.close()
    assert job["requested_workers"] == 256
    assert any("the loader has 300 workers; the service plans at most 256" in r.getMessage() for r in caplog.records)


class Pairs(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 96

    def __getitem__(self, i: int):
        return torch.full((4,), float(i)), i


def _tiny_module(on_step=None):
    import lightning as L

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)
            self.seen: list[list[int]] = [[] for _ in range(3)]

        def training_step(self, batch, batch_idx):
            x, idx = batch
            self.seen[self.current_epoch] += idx.tolist()
            if on_step is not None:
                on_step(self.current_epoch, batch_idx)
            time.sleep(0.01)
            return self.layer(x).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    return Tiny()


def _trainer(tmp_path, cb, **kw):
    import lightning as L

    return L.Trainer(
        **{
            "max_epochs": 3,
            "accelerator": "cpu",
            "callbacks": [cb],
            "logger": False,
            "enable_checkpointing": False,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "default_root_dir": tmp_path,
        }
        | kw
    )


def test_under_lightning_each_epoch_has_its_own_order_and_the_iterable_check_starts_no_worker(tmp_path):
    import lightning as L

    def order(loader, epoch):
        loader.set_epoch(epoch)
        return [i for _, idx in loader for i in idx.tolist()]

    with ResizableLoader(Pairs(), batch_size=8, shuffle=True, seed=4) as ref:
        expected = [order(ref, e) for e in range(3)]
    assert expected[0] != expected[1]
    ld = ResizableLoader(Pairs(), batch_size=8, shuffle=True, seed=4, num_workers=2, multiprocessing_context="fork")
    before = len(multiprocessing.active_children())
    iter(ld)  # what Lightning's setup does once, to check that the loader is iterable
    assert len(multiprocessing.active_children()) == before
    model = _tiny_module()
    trainer = L.Trainer(
        max_epochs=3,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=tmp_path,
    )
    with ld:
        trainer.fit(model, train_dataloaders=ld)
    assert model.seen == expected


def test_lightning_trainer_with_adlcallback_resizes_and_sees_every_sample(tmp_path):
    settings = service_settings(tmp_path, service_debounce_s=0.05)
    ld = ResizableLoader(
        Pairs(), batch_size=8, shuffle=True, seed=1, num_workers=1, multiprocessing_context="fork", handover=0
    )
    with LiveServer(create_app(settings)) as srv, ld:
        cb = ADLCallback(url=srv.url, token="s3cret", node="n3", curve=STEEP, interval_s=0.05, job_id="pl-a")
        model = _tiny_module()
        _trainer(tmp_path, cb).fit(model, train_dataloaders=ld)
        job = httpx.get(f"{srv.url}/jobs/pl-a", timeout=10).json()
    assert all(sorted(s) == list(range(96)) for s in model.seen)
    assert cb.controller.applied and cb.controller.applied[0][1] == 3 and ld.num_workers == 3
    assert job["status"] == "finished"


def test_lightning_training_completes_when_the_service_stops_mid_run(tmp_path):
    settings = service_settings(tmp_path, service_debounce_s=0.05)
    server = LiveServer(create_app(settings)).__enter__()

    def stop_service(epoch, batch_idx):
        if epoch == 0 and batch_idx == 3:
            server.__exit__(None, None, None)

    ld = ResizableLoader(Pairs(), batch_size=8, shuffle=True, seed=2, num_workers=1, multiprocessing_context="fork")
    cb = ADLCallback(url=server.url, token="s3cret", node="n4", curve=STEEP, interval_s=0.05)
    model = _tiny_module(stop_service)
    with ld:
        _trainer(tmp_path, cb).fit(model, train_dataloaders=ld)
    assert all(sorted(s) == list(range(96)) for s in model.seen)


def test_the_runnable_plain_loop_script_trains_a_model_py_under_the_service(tmp_path, tiny_job_path):
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "examples" / "train_loop.py"
    odd = tmp_path / "odd_job.py"  # 60 samples in batches of 8: each epoch ends on a batch of 4
    text = tiny_job_path.read_text()
    assert '"samples": 64' in text
    odd.write_text(text.replace('"samples": 64', '"samples": 60'))
    settings = service_settings(tmp_path, service_debounce_s=0.05, service_token=None)
    env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path / "d"), "MLFLOW_DISABLE_TELEMETRY": "true"}
    with LiveServer(create_app(settings)) as srv:
        done = subprocess.run(
            [
                sys.executable,
                str(script),
                str(odd),
                "--device",
                "emulate:5",
                "--epochs",
                "4",
                "--workers",
                "0",
                "--url",
                srv.url,
                "--interval",
                "0.1",
                "--job-id",
                "script-a",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        job = httpx.get(f"{srv.url}/jobs/script-a", timeout=10).json()
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["samples"] == 4 * 60 and out["job"] == "tiny"  # not 4 * 64: batches are counted as they are
    assert job["status"] == "finished"


def test_throughput_is_reported_only_for_the_worker_count_that_measured_it(tmp_path):
    """Right after a resize the old pool serves a few more batches: their pace is no point of the new
    count's curve.  An injected clock makes each step 0.1 s at 1 worker and 0.05 s at 3."""
    from adlrec.callbacks import Controller
    from adlrec.client import ServiceClient

    settings = service_settings(tmp_path, service_debounce_s=30)  # no plan interferes: only ours
    now = [0.0]
    ld = loader(n=400, workers=1)
    with LiveServer(create_app(settings)) as srv, ld:
        client = ServiceClient(srv.url, token="s3cret")
        reg = {"curve": STEEP, "job_id": "measured"}
        c = Controller(client, "n9", interval_s=3600, registration=reg, clock=lambda: now[0], window=10)
        c.start(ld)
        it = iter(ld)

        def steps(k: int, dt: float) -> None:
            for _ in range(k):
                batch = next(it)
                c.batch_fetched()
                now[0] += dt
                c.batch_done(len(batch))

        def points() -> dict[int, float]:
            job = httpx.get(f"{srv.url}/jobs/measured", timeout=10).json()
            return {p["workers"]: p["throughput"] for p in job["measured"]}

        steps(5, 0.1)
        c.beat()
        assert points() == {1: 80.0}
        ld.resize(3)  # what the heartbeat thread asks for when a plan says 3
        steps(1, 0.1)  # still served by the pool of 1
        assert ld.serving_workers == 1
        c.beat()  # workers=3 now, but every measured step ran at 1: no throughput sent
        assert points() == {1: 80.0}
        while ld.serving_workers != 3:
            steps(1, 0.1)
        steps(3, 0.05)
        c.beat()
        assert points() == pytest.approx({1: 80.0, 3: 160.0})  # only steps served by 3 workers
        c.stop()


class ScriptedService:
    """A service that answers the heartbeats it is given, in order: what a real one cannot be made to
    do on cue (two plans between two batches of the loop)."""

    def __init__(self, answers: list[Assignment]) -> None:
        self.answers = list(answers)

    def register(self, node: str, **fields: object) -> str:
        return "scripted"

    def heartbeat(self, *, throughput: float | None, workers: int | None, data_wait: float | None) -> Assignment:
        return self.answers.pop(0)

    def finish(self) -> bool:
        return True


def test_a_plan_is_not_undone_by_an_earlier_one_still_pending(caplog):
    """Plan 1 says 1 worker; before the loop takes its next batch (which applies a request), plan 2 says 2
    again.  ``num_workers`` still reads 2 (the count applied), but the request for 1 is pending: plan 2
    must overwrite it, or the loop applies 1 and keeps it.  The log says each change from the count last
    asked for, not from the one the loader still runs."""
    plans = [Assignment(1, 1, "active", new=True), Assignment(2, 2, "active", new=True)]
    ld = loader(n=96, workers=2)
    c = Controller(ScriptedService(plans), "n12", interval_s=3600, registration={"curve": STEEP})
    with ld, caplog.at_level(logging.INFO, logger="adlrec.callbacks"):
        it = iter(ld)
        seen = next(it).tolist()
        c.start(ld)
        c.beat()  # plan 1: request_resize(1), pending until the next batch
        assert ld.num_workers == 2
        c.beat()  # plan 2
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("plan ")]
        assert said == ["plan 1: 2 -> 1 DataLoader workers", "plan 2: 1 -> 2 DataLoader workers"]
        seen += [i for batch in it for i in batch.tolist()]
        c.stop()
        assert ld.num_workers == 2 and ld.serving_workers == 2
    assert c.applied == [(1, 1), (2, 2)]
    assert sorted(seen) == list(range(96))


def test_a_callback_used_for_a_second_fit_applies_the_plan_again(tmp_path):
    """The second fit registers the job again and gets the plan the first one applied (same id, as the
    service made no other): its fresh loader, at 1 worker, must still be resized to the plan's 3."""
    settings = service_settings(tmp_path)  # no recompute but the one asked for below
    with LiveServer(create_app(settings)) as srv:
        cb = ADLCallback(url=srv.url, token="s3cret", node="n13", curve=STEEP, interval_s=0.05, job_id="twice")

        def plan_once(epoch: int, batch_idx: int) -> None:
            if epoch == 0 and batch_idx == 0:
                deadline = time.monotonic() + 30
                while cb.controller.client.job_id is None and time.monotonic() < deadline:
                    time.sleep(0.01)
                httpx.post(f"{srv.url}/plans/recompute", headers=AUTH, timeout=10).raise_for_status()

        loaders = []
        for on_step in (plan_once, None):
            ld = ResizableLoader(
                Pairs(), batch_size=8, shuffle=True, seed=5, num_workers=1, multiprocessing_context="fork", handover=0
            )
            loaders.append(ld)
            model = _tiny_module(on_step)
            with ld:
                _trainer(tmp_path, cb).fit(model, train_dataloaders=ld)
            assert all(sorted(s) == list(range(96)) for s in model.seen)
        plans = httpx.get(f"{srv.url}/plans", params={"node": "n13"}, timeout=10).json()["plans"]
    (plan,) = [p for p in plans if "twice" in p["workers"]]
    assert cb.controller.applied == [(plan["plan_id"], 3), (plan["plan_id"], 3)]
    assert [ld.num_workers for ld in loaders] == [3, 3]


def test_two_adlcallbacks_in_one_trainer_are_refused_before_either_registers(tmp_path):
    settings = service_settings(tmp_path)
    ld = ResizableLoader(Pairs(), batch_size=8, num_workers=1, multiprocessing_context="fork")
    with LiveServer(create_app(settings)) as srv, ld:
        one, two = (ADLCallback(url=srv.url, token="s3cret", node="n14", curve=STEEP) for _ in range(2))
        trainer = _trainer(tmp_path, one)
        trainer.callbacks.append(two)
        with pytest.raises(
            ValueError, match=r"ADLCallback: this Trainer has 2 ADLCallbacks in callbacks=; give it one"
        ):
            trainer.fit(_tiny_module(), train_dataloaders=ld)
        jobs = httpx.get(f"{srv.url}/jobs", timeout=10).json()
    assert jobs == [] and one.controller._thread is None and two.controller._thread is None


def test_two_adlcallbacks_do_not_stop_a_validate_run_which_trains_nothing(tmp_path):
    """Only ``fit`` trains: a ``validate`` with the same Trainer's callbacks starts neither, and runs."""
    model = _tiny_module()
    model.validation_step = lambda batch, batch_idx: None
    one, two = (ADLCallback(url="http://127.0.0.1:9", node="n22", curve=STEEP, interval_s=3600) for _ in range(2))
    trainer = _trainer(tmp_path, one)
    trainer.callbacks.append(two)
    trainer.validate(model, dataloaders=torch.utils.data.DataLoader(Pairs(), batch_size=48))
    assert one.controller._thread is None and two.controller._thread is None


def test_under_lightning_validation_and_epoch_ends_are_not_counted_as_waits_for_data(tmp_path):
    """Each epoch ends with 1 s of validation, while its 12 steps take about 0.2 s: counted as the wait
    before the next epoch's first batch, it made the data-wait share about 0.8."""

    model = _tiny_module()

    def validation_step(batch, batch_idx):
        time.sleep(0.25)

    model.validation_step = validation_step
    val = torch.utils.data.DataLoader(Pairs(), batch_size=24)  # 4 batches
    ld = ResizableLoader(Pairs(), batch_size=8, shuffle=True, seed=3, num_workers=1, multiprocessing_context="fork")
    cb = ADLCallback(url="http://127.0.0.1:9", node="n15", curve=STEEP, interval_s=3600)  # nothing to reach
    trainer = _trainer(tmp_path, cb, num_sanity_val_steps=0)
    with ld:
        trainer.fit(model, train_dataloaders=ld, val_dataloaders=val)
    stats = cb.controller.meter.stats()
    assert stats.steps == 3 * 12 - 3  # each epoch's first step left out: it follows a stop
    assert stats.data_wait < 0.5
    assert stats.throughput > 8 / 0.05  # steps of about 15 ms, 8 samples each


@pytest.mark.parametrize("stop", ["validation", "checkpoint", "epoch end"])
def test_under_lightning_a_stop_between_steps_leaves_the_step_after_it_out(tmp_path, stop):
    """Half a second of validation at mid-epoch (``val_check_interval``), of a checkpoint every 6 steps
    (``every_n_train_steps``) or of an epoch's own end, against steps of about 15 ms: the step after it
    is left out, as each epoch's first is, instead of being measured as one 0.5 s step."""
    import lightning as L

    model = _tiny_module()
    ld = ResizableLoader(Pairs(), batch_size=8, shuffle=True, seed=3, num_workers=1, multiprocessing_context="fork")
    cb = ADLCallback(url="http://127.0.0.1:9", node="n19", curve=STEEP, interval_s=3600)  # nothing to reach
    kw: dict = {"max_epochs": 1}
    fit: dict = {}
    if stop == "validation":  # at steps 6 and 12: the one after the last step ends the fit
        model.validation_step = lambda batch, batch_idx: time.sleep(0.25)
        kw |= {"val_check_interval": 0.5, "num_sanity_val_steps": 0}
        fit = {"val_dataloaders": torch.utils.data.DataLoader(Pairs(), batch_size=48)}  # 2 batches
    elif stop == "checkpoint":  # at steps 6 and 12, as validation
        model.on_save_checkpoint = lambda checkpoint: time.sleep(0.5)
        every = L.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=6, save_top_k=-1)
        kw |= {"enable_checkpointing": True, "callbacks": [cb, every]}
    else:  # two epochs, the first ending with its own work
        model.on_train_epoch_end = lambda: time.sleep(0.5)
        kw |= {"max_epochs": 2}
    with ld:
        _trainer(tmp_path, cb, **kw).fit(model, train_dataloaders=ld, **fit)
    stats = cb.controller.meter.stats()
    assert stats.steps == (2 * 12 - 2 if stop == "epoch end" else 12 - 1 - 1)
    assert stats.throughput > 8 / 0.05  # steps of about 15 ms, 8 samples each


def test_under_lightning_a_plain_dataloader_that_keeps_the_loop_waiting_shows_it(tmp_path):
    """A DataLoader keeps no waiting total of its own: the wait is the time from a step's end to its next
    batch's start (40 ms of loading in-process against a 10 ms step)."""
    plain = torch.utils.data.DataLoader(SlowPairs(), batch_size=8)
    cb = ADLCallback(url="http://127.0.0.1:9", node="n20", curve=STEEP, interval_s=3600)  # nothing to reach
    _trainer(tmp_path, cb, max_epochs=1).fit(_tiny_module(), train_dataloaders=plain)
    stats = cb.controller.meter.stats()
    assert stats.steps == 12 - 1 and stats.data_wait > 0.5


def test_a_lightning_fit_that_raises_reports_its_job_finished(tmp_path):
    """A training step that raises ends the fit: the job is reported finished, not left heartbeating (and
    planned for) while nothing trains."""

    def fail(epoch: int, batch_idx: int) -> None:
        if batch_idx == 3:
            raise RuntimeError("the step failed")

    settings = service_settings(tmp_path)
    ld = ResizableLoader(Pairs(), batch_size=8, num_workers=1, multiprocessing_context="fork")
    with LiveServer(create_app(settings)) as srv, ld:
        cb = ADLCallback(url=srv.url, token="s3cret", node="n21", curve=STEEP, interval_s=0.05, job_id="failed")
        with pytest.raises(RuntimeError, match="the step failed"):
            _trainer(tmp_path, cb).fit(_tiny_module(fail), train_dataloaders=ld)
        job = httpx.get(f"{srv.url}/jobs/failed", timeout=10).json()
    assert job["status"] == "finished"


class SlowPairs(Pairs):
    def __getitem__(self, i: int):
        time.sleep(0.005)  # 8 samples a batch: 40 ms of loading in-process against a 10 ms step
        return super().__getitem__(i)


@pytest.mark.parametrize("slow_loader", [False, True])
def test_under_lightning_time_between_steps_that_is_not_the_loaders_is_no_wait_for_data(tmp_path, slow_loader):
    """Another callback works 30 ms after each 10 ms step: timed as the gap between a step's end and
    the next batch, that made the data-wait share about 0.7 with a loader that never kept the loop
    waiting.  A ResizableLoader's own waits (``waited_s``) are what is reported; a loader that does keep
    the loop waiting still shows it."""
    import lightning as L

    class Busy(L.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            time.sleep(0.03)

    workers = 0 if slow_loader else 1
    ld = ResizableLoader(
        SlowPairs() if slow_loader else Pairs(), batch_size=8, num_workers=workers, multiprocessing_context="fork"
    )
    cb = ADLCallback(url="http://127.0.0.1:9", node="n17", curve=STEEP, interval_s=3600)  # nothing to reach
    trainer = _trainer(tmp_path, cb, max_epochs=1)
    trainer.callbacks.append(Busy())  # after ADLCallback's: its work lies between the steps ADLCallback times
    with ld:
        trainer.fit(_tiny_module(), train_dataloaders=ld)
    stats = cb.controller.meter.stats()
    assert stats.steps == 12 - 1
    if slow_loader:
        assert stats.data_wait > 0.25  # about 40 of every 80 ms
    else:
        assert stats.data_wait < 0.2
    assert 0 < ld.waited_s


def test_in_a_plain_loop_the_time_between_epochs_and_a_paused_step_are_not_measured():
    ld = loader(n=96, workers=1)
    with ld, ADLLoop(ld, url="http://127.0.0.1:9", node="n16", curve=STEEP, interval_s=3600) as adl:
        for epoch in range(3):
            for i, _batch in enumerate(adl.iterate()):
                time.sleep(0.01)
                if epoch == 1 and i == 5:
                    time.sleep(1.0)  # validation within the epoch
                    adl.pause()
            time.sleep(1.0)  # validation after the epoch
        stats = adl.controller.meter.stats()
    assert stats.steps == 3 * 12 - 3 - 1  # each epoch's first step, and the paused one, left out
    assert stats.data_wait < 0.5
    assert stats.throughput > 8 / 0.05


@pytest.mark.parametrize("slow", ["loader", "step"])
def test_in_a_plain_loop_a_plain_dataloaders_wait_is_the_time_to_its_next_batch(slow):
    """A DataLoader keeps no waiting total of its own: the wait is the time from a step's end to its next
    batch, which ``iterate`` times as it hands the batch over.  40 ms of loading against a step of none
    is mostly waiting; a 40 ms step against loading of none is not."""
    plain = torch.utils.data.DataLoader(SlowPairs() if slow == "loader" else Pairs(), batch_size=8)
    with ADLLoop(plain, url="http://127.0.0.1:9", node="n18", curve=STEEP, interval_s=3600) as adl:
        for _batch in adl.iterate():
            if slow == "step":
                time.sleep(0.04)
        stats = adl.controller.meter.stats()
    assert stats.steps == 12 - 1
    assert stats.data_wait > 0.5 if slow == "loader" else stats.data_wait < 0.5
