"""The adapters check their arguments at construction, as the service would: no job trains on unregistered."""

import pytest
import torch

from adlrec.callbacks import ADLLoop
from tests.factories import Indices
from tests.service_helpers import PROBE

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
        # a tensor of two numbers is no number: said as such, not torch's own RuntimeError
        ({"weight": torch.ones(2)}, ValueError, "ADLLoop: the registration must be plain numbers, strings and lists"),
        (
            {"interval_s": "5"},
            ValueError,
            "interval_s must be a finite number of seconds > 0 (at most 9223372036), got '5'",
        ),
        # Event.wait(inf) raises OverflowError in the heartbeat thread, which then never beats
        ({"interval_s": float("inf")}, ValueError, "ADLLoop: interval_s must be a finite number of seconds > 0"),
        ({"interval_s": float("nan")}, ValueError, "interval_s must be a finite number of seconds > 0"),
        # a bool is no number of seconds (Python counts True as 1: it would pass as a 1 s interval)
        (
            {"interval_s": True},
            ValueError,
            "interval_s must be a finite number of seconds > 0 (at most 9223372036), got True",
        ),
        ({"interval_s": 1e300}, ValueError, "(at most 9223372036), got 1e+300"),
        ({"url": "127.0.0.1:8470"}, ValueError, "url must be the service's http(s) address"),
        ({"url": "htp://127.0.0.1:8470"}, ValueError, "got 'htp://127.0.0.1:8470'"),
        ({"url": ""}, ValueError, "url must be the service's http(s) address"),
        ({"url": "http://:8470"}, ValueError, "url must be the service's http(s) address"),  # no host
        ({"url": "//127.0.0.1:8470"}, ValueError, "url must be the service's http(s) address"),  # no scheme
        # a port given as the url: the message naming it, not urlsplit's AttributeError
        ({"url": 8470}, ValueError, "url must be the service's http(s) address, e.g. http://127.0.0.1:8470, got 8470"),
        ({"url": "http://h:abc"}, ValueError, "ADLLoop: url must have a port from 1 to 65535 (or none)"),
        ({"url": "http://h:99999"}, ValueError, "url must have a port from 1 to 65535 (or none), e.g. "),
        ({"url": "http://h:0"}, ValueError, "got 'http://h:0'"),
        ({"token": 5}, TypeError, "ADLLoop: token must be a string (the service's token), got a int"),
        ({"node": ""}, ValueError, "ADLLoop: node must be the node's name at the service"),
        ({"node": "  "}, ValueError, "or None for this host's name, got '  '"),
        # a name the service would refuse at registration, while the job trained on unplanned
        ({"node": "gpu 01"}, ValueError, "ADLLoop: node: String should match pattern"),
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
        # a field the service does not know inside the probe: the probe's, not a keyword argument of the adapter's
        ({"probe": PROBE | {"bogus": 1}}, "ADLLoop: probe.bogus: Extra inputs are not permitted, got 1"),
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
    with pytest.raises(ValueError, match="interval_s must be a finite number of seconds > 0 .*, got 0"):
        ADLLoop(Indices(8), curve=CURVE, interval_s=0)


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"curves": CURVE}, "ADLLoop() got an unexpected keyword argument 'curves'; did you mean 'curve'?"),
        ({"probes": PROBE}, "ADLLoop() got an unexpected keyword argument 'probes'; did you mean 'probe'?"),
        ({"interval": 0.3}, "unexpected keyword argument 'interval'; did you mean 'interval_s'?"),
    ],
)
def test_a_typo_is_named_before_the_missing_curve_or_probe_it_causes(kwargs, says):
    """`curves=[...]` said 'give exactly one of probe= or curve=', which hid the typo."""
    with pytest.raises(TypeError) as exc:
        ADLLoop(Indices(8), **kwargs)
    assert says in str(exc.value)


def test_a_controller_refuses_an_interval_its_heartbeat_thread_cannot_wait():
    from adlrec.callbacks import Controller

    with pytest.raises(ValueError, match="Controller: interval_s must be a finite number of seconds > 0"):
        Controller(object(), "n", interval_s=float("inf"))


def test_urls_with_a_good_port_or_none_are_taken():
    for url in ("http://h:1", "http://h:65535", "https://h", "http://[::1]:8470/"):
        assert ADLLoop(Indices(8), curve=CURVE, url=url).controller.client.url == url


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("http://h:abc", "ADLLoop: the environment's ADLREC_SERVICE_URL (url= not given) must have a port from 1"),
        ("http://h:99999", "ADLREC_SERVICE_URL (url= not given) must have a port from 1 to 65535 (or none)"),
        ("", "ADLLoop: the environment's ADLREC_SERVICE_URL (url= not given) must be the service's http(s) address"),
    ],
)
def test_a_bad_url_from_the_environment_names_the_variable(monkeypatch, value, says):
    monkeypatch.setenv("ADLREC_SERVICE_URL", value)
    with pytest.raises(ValueError) as exc:
        ADLLoop(Indices(8), curve=CURVE)
    assert says in str(exc.value)
    with pytest.raises(ValueError, match="ADLLoop: url must"):  # given as url=, it is named so
        ADLLoop(Indices(8), curve=CURVE, url=value)


def test_the_environment_gives_the_url_and_the_token_when_the_arguments_do_not(monkeypatch):
    monkeypatch.setenv("ADLREC_SERVICE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("ADLREC_SERVICE_TOKEN", "s3cret")
    client = ADLLoop(Indices(8), curve=CURVE).controller.client
    assert client.url == "http://127.0.0.1:9" and client._http.headers["Authorization"] == "Bearer s3cret"
    # given, they win over the environment's
    given = ADLLoop(Indices(8), curve=CURVE, url="http://127.0.0.1:10", token="mine").controller.client
    assert given.url == "http://127.0.0.1:10" and given._http.headers["Authorization"] == "Bearer mine"


@pytest.mark.parametrize("loader", ["notaloader", b"bytes", 5, None])
def test_a_loader_that_yields_no_batches_is_refused_naming_it(loader):
    with pytest.raises(TypeError, match=r"ADLLoop: loader must be the training loop's loader, an iterable of batches"):
        ADLLoop(loader, curve=CURVE)


def test_iterate_outside_the_with_block_says_how_to_use_it():
    adl = ADLLoop(Indices(8), curve=CURVE, url="http://127.0.0.1:9")
    with pytest.raises(RuntimeError, match="outside `with ADLLoop"):
        next(adl.iterate())
    with adl:
        pass
    with pytest.raises(RuntimeError, match="outside `with ADLLoop"):  # after it: the job was reported finished
        next(adl.iterate())


def test_none_means_the_services_default_and_a_one_shot_curve_is_sent_whole():
    adl = ADLLoop(Indices(8), curve=map(float, [1, 2, 3]), url="http://127.0.0.1:9", min_workers=None, gpus=None)
    assert adl.controller.registration == {"curve": [1.0, 2.0, 3.0]}


def test_a_probe_given_as_any_mapping_is_sent_as_its_fields():
    from types import MappingProxyType

    adl = ADLLoop(Indices(8), probe=MappingProxyType(PROBE), url="http://127.0.0.1:9")
    assert adl.controller.registration == {"probe": PROBE}


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
        # named as typed: they said num_workers and ADLLoop's interval_s
        (["{tiny}", "--workers", "-1"], "--workers must be a whole number >= 0, got -1"),
        # 0 trained nothing and said 0 samples/s; under Lightning -1 trained without end
        (["{tiny}", "--epochs", "0"], "--epochs must be a whole number >= 1, got 0"),
        (["{tiny}", "--epochs", "-1"], "--epochs must be a whole number >= 1, got -1"),
        # the service refused the registration (422) after the probe, and the job trained unplanned
        (["{tiny}", "--workers", "257"], "--workers must be at most 256, the most the service plans for a loader"),
        (["{tiny}", "--interval", "0"], "--interval must be a number of seconds > 0, got 0.0"),
        (["{tiny}", "--interval", "nan"], "--interval must be a number of seconds > 0, got nan"),
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


@pytest.mark.parametrize("script", ["train_loop.py", "train_lightning.py"])
def test_the_example_scripts_say_a_bad_setting_in_one_line(tmp_path, tiny_job_path, script):
    """A bad ADLREC_* variable printed pydantic's four lines and its web link."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "examples" / script
    env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path), "ADLREC_POINT_BUDGET_S": "-1"}
    done = subprocess.run([sys.executable, str(path), str(tiny_job_path)], capture_output=True, text=True, env=env)
    assert done.returncode == 2, done.stderr
    says = f"{script}: error: setting point_budget_s: Input should be greater than 0 (from ADLREC_POINT_BUDGET_S)\n"
    assert done.stderr.endswith(says) and "validation error" not in done.stderr, done.stderr


@pytest.mark.parametrize("script", ["train_loop.py", "train_lightning.py"])
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--interval", "inf"], "interval_s must be a finite number of seconds > 0"),
        (["--url", "http://h:abc"], "url must have a port from 1 to 65535"),
        (["--node", ""], "node must be the node's name at the service"),
    ],
)
def test_the_example_scripts_check_their_arguments_before_they_probe(tmp_path, tiny_job_path, script, args, says):
    """The probe takes seconds: a mistake in an argument is reported before it, not after."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    marked = tmp_path / "marked_job.py"  # the tiny job, leaving a mark when a sample is loaded (as a probe does)
    text = tiny_job_path.read_text()
    hook = "    def __getitem__(self, i: int):\n"
    assert hook in text
    marked.write_text(
        text.replace(hook, hook + '        Path(os.environ["TINY_MARK"]).touch()\n').replace(
            "from pathlib import Path\n", "import os\nfrom pathlib import Path\n", 1
        )
    )
    mark = tmp_path / "probed"
    path = Path(__file__).resolve().parents[3] / "examples" / script
    env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path), "MLFLOW_DISABLE_TELEMETRY": "true", "TINY_MARK": str(mark)}
    done = subprocess.run(
        [sys.executable, str(path), str(marked), *args], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines()[-1].startswith(f"{script}: error: ") and says in done.stderr
    assert "Traceback" not in done.stderr
    assert not mark.exists(), "the script probed the job before it checked its arguments"


def test_ctrl_c_stops_the_training_loop_example_in_one_line(tmp_path, tiny_job_path):
    """Ctrl-C mid-training (SIGINT to the group: the loop and its loader's workers) was a KeyboardInterrupt
    traceback from wherever the loop was waiting."""
    import os
    import signal
    import sys
    from pathlib import Path

    from tests.terminal import own_group

    path = Path(__file__).resolve().parents[3] / "examples" / "train_loop.py"
    env = os.environ | {"ADLREC_DATA_DIR": str(tmp_path), "MLFLOW_DISABLE_TELEMETRY": "true"}
    # a service that refuses connections: its first heartbeat's warning says the loop is training
    argv = [str(tiny_job_path), "--device", "emulate:5", "--epochs", "100000", "--url", "http://127.0.0.1:9"]
    with own_group([sys.executable, str(path), *argv, "--interval", "0.2"], env=env) as proc:
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if "unreachable" in line:
                break
        assert "unreachable" in seen[-1], "".join(seen)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert err.splitlines()[-1] == "train_loop.py: interrupted" and "Traceback" not in err, err[-2000:]
    assert out == ""  # no line of what it trained: it did not finish
