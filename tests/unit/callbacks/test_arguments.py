"""The adapters check their arguments at construction, as the service would: no job trains on unregistered."""

import pytest

from adlrec.callbacks import ADLLoop
from tests.factories import Indices

CURVE = [10.0, 50.0, 90.0]


@pytest.mark.parametrize(
    "kwargs,error,message",
    [
        ({"interval": 0.3}, TypeError, "unexpected keyword argument 'interval'; did you mean 'interval_s'?"),
        ({"min_worker": 1}, TypeError, "did you mean 'min_workers'?"),
        ({"min_workers": -1}, ValueError, "ADLLoop: min_workers: Input should be greater than or equal to 0, got -1"),
        ({"gpus": 1.5}, ValueError, "ADLLoop: gpus:"),
        ({"gpus": True}, ValueError, "ADLLoop: gpus: Input should be a valid integer, got True"),
        ({"gpus": "2"}, ValueError, "ADLLoop: gpus: Input should be a valid integer, got '2'"),
        ({"weight": object()}, ValueError, "ADLLoop: the registration must be plain numbers, strings and lists"),
        ({"interval_s": "5"}, ValueError, "interval_s must be a number of seconds > 0, got '5'"),
        ({"url": "127.0.0.1:8470"}, ValueError, "url must be the service's http(s) address"),
        ({"url": "htp://127.0.0.1:8470"}, ValueError, "got 'htp://127.0.0.1:8470'"),
        ({"url": ""}, ValueError, "url must be the service's http(s) address"),
    ],
)
def test_a_typo_or_a_bad_value_is_refused_at_construction_naming_it(kwargs, error, message):
    with pytest.raises(error) as exc:
        ADLLoop(Indices(8), curve=CURVE, **kwargs)
    assert message in str(exc.value)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"curve": 5}, "ADLLoop: curve: Input should be a valid list, got 5"),
        ({"curve": [1.0, -2.0]}, "ADLLoop: curve.1:"),
        ({"curve": [1.0, True]}, "ADLLoop: curve.1: Input should be a valid number, got True"),
        ({"curve": ["1", 2.0]}, "ADLLoop: curve.0: Input should be a valid number, got '1'"),
        ({"probe": {"bogus": 1}}, "ADLLoop: probe."),
        ({"probe": [1, 2]}, "ADLLoop: probe:"),
        # a check across fields names them itself: no empty field, no pydantic prefix
        ({"curve": [1.0, 2.0], "max_workers": 5}, "ADLLoop: max_workers (5) is past the curve's last point (1 worker)"),
    ],
)
def test_a_bad_curve_or_probe_is_refused_naming_the_field(kwargs, message):
    with pytest.raises(ValueError) as exc:
        ADLLoop(Indices(8), **kwargs)
    assert message in str(exc.value)


def test_a_job_must_say_what_its_curve_is_and_poll_at_a_positive_interval():
    with pytest.raises(ValueError, match="exactly one of probe= .* or curve="):
        ADLLoop(Indices(8))
    with pytest.raises(ValueError, match="exactly one of probe= .* or curve="):
        ADLLoop(Indices(8), curve=CURVE, probe={"ceiling": 1.0})
    with pytest.raises(ValueError, match="interval_s must be a number of seconds > 0, got 0"):
        ADLLoop(Indices(8), curve=CURVE, interval_s=0)


def test_iterate_outside_the_with_block_says_how_to_use_it():
    adl = ADLLoop(Indices(8), curve=CURVE, url="http://127.0.0.1:9")
    with pytest.raises(RuntimeError, match="outside `with ADLLoop"):
        next(adl.iterate())


def test_none_means_the_services_default_and_a_one_shot_curve_is_sent_whole():
    adl = ADLLoop(Indices(8), curve=map(float, [1, 2, 3]), url="http://127.0.0.1:9", min_workers=None, gpus=None)
    assert adl.controller.registration == {"curve": [1.0, 2.0, 3.0]}


def test_numpy_and_torch_numbers_are_sent_as_the_numbers_they_hold():
    import numpy as np
    import torch

    adl = ADLLoop(
        Indices(8),
        curve=torch.tensor([1.0, 2.0, 4.0]),
        gpus=np.int64(2),
        weight=np.float32(0.5),
        url="http://127.0.0.1:9",
    )
    assert adl.controller.registration == {"curve": [1.0, 2.0, 4.0], "gpus": 2, "weight": 0.5}
    assert type(adl.controller.registration["gpus"]) is int


@pytest.mark.parametrize(
    ("host", "node"),
    [
        ("gpu_01", "gpu_01"),
        ("lab host", "lab-host"),
        ("-lab/01", "lab-01"),
        ("___", "localhost"),
        ("h" * 200, "h" * 128),
    ],
)
def test_the_default_node_is_the_host_name_made_a_valid_node_name(monkeypatch, host, node):
    import socket

    from adlrec.callbacks._build import default_node
    from adlrec.service.api import JobRegistration

    monkeypatch.setattr(socket, "gethostname", lambda: host)
    assert default_node() == node
    JobRegistration.model_validate({"node": default_node(), "curve": CURVE})  # the service takes it
    assert ADLLoop(Indices(8), curve=CURVE).controller.node == node


@pytest.mark.parametrize("script", ["train_loop.py", "train_lightning.py"])
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["nonexist.py"], "nonexist.py: no such file"),
        (["{tiny}", "--workers", "-1"], "num_workers must be a whole number >= 0, got -1"),
        (["{tiny}", "--interval", "0"], "interval_s must be a number of seconds > 0, got 0.0"),
    ],
)
def test_the_example_scripts_say_a_mistake_in_one_line(tmp_path, tiny_job_path, script, args, says):
    import os
    import subprocess
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "examples" / script
    argv = [a.replace("{tiny}", str(tiny_job_path)) for a in args]
    env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path), "MLFLOW_DISABLE_TELEMETRY": "true"}
    done = subprocess.run([sys.executable, str(path), *argv], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 2, done.stderr
    assert done.stderr.endswith("\n") and done.stderr.splitlines()[-1].startswith(f"{script}: error: ")
    assert says in done.stderr and "Traceback" not in done.stderr
