import pytest

from adlrec.errors import JobContractError, UsageError
from adlrec.job import load_job
from adlrec.profile.device import EmulatedStep, make_step, parse_device, to_device
from adlrec.schemas import DeviceSpec


@pytest.mark.parametrize(
    "text,kind,ms",
    [("cpu", "cpu", None), ("CPU", "cpu", None), ("emulate:20", "emulate", 20.0), ("emulate:0.5", "emulate", 0.5)],
)
def test_parse_device(text, kind, ms):
    d = parse_device(text, cuda_available=False)
    assert (d.kind, d.step_ms) == (kind, ms)


def test_auto_follows_cuda_availability():
    assert parse_device("auto", cuda_available=True).kind == "cuda"
    assert parse_device("auto", cuda_available=False).kind == "cpu"


def test_emulated_device_is_labelled_as_such():
    d = parse_device("emulate:12.5", cuda_available=False)
    assert d.emulated
    assert d.label == "emulate:12.5"
    assert "EMULATED" in d.title


@pytest.mark.parametrize("text", ["gpu", "emulate", "emulate:", "emulate:abc", "emulate:-3", "emulate:0", "tpu:1"])
def test_bad_device_names_what_is_expected(text):
    with pytest.raises(UsageError, match="expected"):
        parse_device(text, cuda_available=False)


def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(UsageError, match="no CUDA device"):
        parse_device("cuda", cuda_available=False)


def test_emulated_step_waits_the_step_time_through_the_injected_sleep():
    slept = []
    step = EmulatedStep(25.0, sleep=slept.append)
    step(object())
    step(object())
    assert slept == [0.025, 0.025]


def test_to_device_keeps_namedtuples_and_nesting():
    """A collate_fn returning a namedtuple (``Batch(images, masks)``) is a valid batch: torch's own loader and
    pin_memory keep it; rebuilding it from a generator raised TypeError, a traceback before the first point."""
    from collections import namedtuple

    import torch

    Inputs = namedtuple("Inputs", ["a", "b"])
    x = torch.zeros(2)
    moved = to_device(({"in": Inputs(x, [x, (x, 3)])}, x), torch.device("cpu"))
    inputs, target = moved
    assert isinstance(inputs["in"], Inputs) and inputs["in"].a is x
    assert isinstance(inputs["in"].b, list) and isinstance(inputs["in"].b[1], tuple) and inputs["in"].b[1][1] == 3
    assert target is x


@pytest.mark.parametrize("text", ["emulate:60000", "emulate:1e9", "emulate:inf", "emulate:nan"])
def test_an_emulated_step_of_a_minute_or_more_is_refused(text):
    with pytest.raises(UsageError, match="0 < MS < 60000"):
        parse_device(text, cuda_available=False)


def test_a_device_name_with_spaces_around_it_is_read():
    assert parse_device("  emulate:20 ", cuda_available=False).step_ms == 20.0
    assert parse_device(" cpu\n", cuda_available=False).kind == "cpu"


def test_to_device_moves_every_tensor_inside_dicts_lists_and_tuples():
    import torch

    x = torch.zeros(2)
    moved = to_device({"a": [x, (x, 3)], "b": {"c": x}}, torch.device("meta"))  # a device with no data: no GPU needed
    assert [moved["a"][0].device.type, moved["a"][1][0].device.type, moved["b"]["c"].device.type] == ["meta"] * 3
    assert moved["a"][1][1] == 3


@pytest.mark.parametrize("batch,what", [((1, 2, 3), "tuple of length 3"), ([1], "list of length 1"), (7, "int")])
def test_a_batch_that_is_not_an_input_target_pair_is_named(tiny_job_path, tmp_path, batch, what):
    job = load_job(tiny_job_path, data_dir=tmp_path)
    step = make_step(job, DeviceSpec("cpu"))
    with pytest.raises(JobContractError, match=f"^tiny_job.py: batches must be \\(input, target\\) pairs; got {what}$"):
        step(batch)


@pytest.mark.parametrize("text", ["emulate", "emulate:", "emulate:abc", "emulate20"])
def test_an_emulated_device_without_a_step_time_says_how_to_write_one(text):
    with pytest.raises(UsageError) as info:
        parse_device(text, cuda_available=False)
    assert str(info.value) == (
        f"--device '{text}': expected emulate:MS with MS a step time in milliseconds, 0 < MS < 60000, e.g. emulate:20"
    )


MODEL_IN_EVAL = """
import torch
PARAMS = {"batch_size": 4}
def build_dataset(cfg): return torch.utils.data.TensorDataset(torch.rand(8, 3), torch.zeros(8, dtype=torch.long))
def build_model(cfg): return torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Dropout(0.5)).eval()
def loss_fn(o, t): return torch.nn.functional.cross_entropy(o, t)
"""


def test_the_step_trains_a_model_built_in_eval_mode(tmp_path):
    # a build_model that returns a pretrained model put in eval mode: the profiled step is a training step
    (tmp_path / "model.py").write_text(MODEL_IN_EVAL)
    step = make_step(load_job(tmp_path / "model.py", data_dir=tmp_path), DeviceSpec("cpu"))
    assert step.model.training and all(m.training for m in step.model.modules())


def test_each_step_starts_from_zero_gradients(tiny_job_path, tmp_path):
    """Two steps on one batch: the second's gradients are those of one backward pass at the weights it started
    from, not the sum of both passes'."""
    import copy

    import torch

    job = load_job(tiny_job_path, data_dir=tmp_path)
    step = make_step(job, DeviceSpec("cpu"))
    batch = (torch.rand(8, 16), torch.randint(0, 2, (8,)))
    step(batch)
    before = copy.deepcopy(step.model)  # the weights the second step starts from
    step(batch)
    job.loss_fn(before(batch[0]), batch[1]).backward()
    for got, expected in zip(step.model.parameters(), before.parameters(), strict=True):
        assert torch.allclose(got.grad, expected.grad)
