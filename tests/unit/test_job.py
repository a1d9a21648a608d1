"""The job contract: every way a model.py can be wrong gets one line naming what is wrong."""

import textwrap

import pytest

from adlrec.errors import JobContractError
from adlrec.job import load_job, parse_param_overrides

GOOD = """
import torch
PARAMS = {"batch_size": 4, "size": 8, "scale": 1.5, "flag": False, "mode": "a"}
def build_dataset(cfg):
    return [(torch.zeros(cfg.size), 0)] * 10
def build_model(cfg):
    return torch.nn.Linear(cfg.size, 2)
def loss_fn(output, target):
    return output.sum()
"""


def write(tmp_path, text, name="model.py"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_good_job_loads_with_defaults_and_typed_overrides(tmp_path):
    job = load_job(write(tmp_path, GOOD), overrides={"size": "16", "scale": "2", "flag": "yes"}, data_dir=tmp_path)
    assert job.name == "model"
    assert job.batch_size == 4
    assert job.params == {"batch_size": 4, "size": 16, "scale": 2.0, "flag": True, "mode": "a"}
    assert job.config.size == 16 and job.config.data_dir == tmp_path
    assert len(job.dataset()) == 10
    assert job.model().in_features == 16
    assert len(job.source_hash) == 16
    with pytest.raises(AttributeError, match="no parameter 'nope'"):
        _ = job.config.nope


@pytest.mark.parametrize(
    "text,message",
    [
        ("def broken(:\n", "does not import: SyntaxError at line 1"),
        ("import no_such_module_xyz\n", "does not import: ModuleNotFoundError"),
        ("raise RuntimeError('boom')\n", "does not import: RuntimeError: boom"),
        ("import sys\nsys.exit(3)\n", "does not import: SystemExit"),
        (GOOD.replace("def loss_fn", "def other_fn"), "missing loss_fn()"),
        (GOOD.replace('PARAMS = {"batch_size": 4,', "OTHER = {"), "missing PARAMS"),
        (GOOD.replace('"batch_size": 4', '"batch_size": 0'), "batch_size'] must be a positive int"),
        (GOOD.replace('"batch_size": 4', '"batch_size": "4"'), "batch_size'] must be a positive int"),
        (GOOD + "\nbuild_model = 3\n", "build_model must be a function"),
        (GOOD + "\ndef build_optimizer(model):\n    pass\n", "build_optimizer(model) must accept 2 positional"),
        (GOOD.replace("def build_dataset(cfg)", "def build_dataset()"), "build_dataset() must accept 1 positional"),
    ],
)
def test_contract_violations_are_one_line(tmp_path, text, message):
    with pytest.raises(JobContractError) as err:
        load_job(write(tmp_path, text), data_dir=tmp_path)
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("model.py")


def test_missing_and_non_python_files(tmp_path):
    with pytest.raises(JobContractError, match="no such file"):
        load_job(tmp_path / "absent.py")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(JobContractError, match="expected a Python file"):
        load_job(tmp_path / "notes.txt")


def test_bad_overrides(tmp_path):
    path = write(tmp_path, GOOD)
    with pytest.raises(
        JobContractError, match=r"unknown parameter 'sizes' \(PARAMS has: batch_size, flag, mode, scale, size\)"
    ):
        load_job(path, overrides={"sizes": "3"})
    with pytest.raises(JobContractError, match="size='big' is not a valid int"):
        load_job(path, overrides={"size": "big"})
    with pytest.raises(JobContractError, match="flag='maybe' is not a valid bool"):
        load_job(path, overrides={"flag": "maybe"})
    with pytest.raises(JobContractError, match="expected KEY=VALUE"):
        parse_param_overrides(["size"])
    assert parse_param_overrides(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}


def test_dataset_and_model_problems_are_reported_when_built(tmp_path):
    iterable = GOOD.replace(
        "return [(torch.zeros(cfg.size), 0)] * 10",
        "class It(torch.utils.data.IterableDataset):\n        def __iter__(self):\n            yield 1\n    return It()",
    )
    with pytest.raises(JobContractError, match="IterableDataset; adlrec needs a map-style dataset"):
        load_job(write(tmp_path, iterable)).dataset()
    empty = GOOD.replace("* 10", "* 0")
    with pytest.raises(JobContractError, match="empty dataset"):
        load_job(write(tmp_path, empty)).dataset()
    raising = GOOD.replace("return [(torch.zeros(cfg.size), 0)] * 10", "raise OSError('disk gone')")
    with pytest.raises(JobContractError, match=r"build_dataset\(\) raised OSError: disk gone"):
        load_job(write(tmp_path, raising)).dataset()
    not_module = GOOD.replace("return torch.nn.Linear(cfg.size, 2)", "return 'a model'")
    with pytest.raises(JobContractError, match="returned str, expected a torch.nn.Module"):
        load_job(write(tmp_path, not_module)).model()
