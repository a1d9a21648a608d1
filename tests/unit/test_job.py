"""The job contract: every way a model.py can be wrong gets one line naming what is wrong."""

import os
import sys
import textwrap

import pytest

from adlrec.errors import JobContractError
from adlrec.job import check_job_file, load_job, parse_param_overrides

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


def test_len_error_names_the_call_once(tmp_path):
    bad_len = GOOD.replace(
        "return [(torch.zeros(cfg.size), 0)] * 10",
        "class D(torch.utils.data.Dataset):\n        def __len__(self): return 'ten'\n"
        "        def __getitem__(self, i): return i\n    return D()",
    )
    with pytest.raises(JobContractError) as err:
        load_job(write(tmp_path, bad_len)).dataset()
    assert "model.py: len(dataset) raised TypeError: " in str(err.value)


# MLflow's own check for what adlrec/tracking.py logs ("param.<key>" = str(value)): the verdicts must agree.
def _mlflow_accepts(key: str, value: object) -> bool:
    from mlflow.exceptions import MlflowException
    from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, _validate_param

    try:
        _validate_param(f"param.{key}", str(value))
    except MlflowException:
        return False
    return len(str(value)) <= MAX_PARAM_VAL_LENGTH  # MLflow truncates a longer value: data lost


@pytest.mark.parametrize(
    "key,value,message",
    [
        ("drop%", 0.1, r"PARAMS key 'drop%' cannot be logged to MLflow: a name may only contain letters, digits"),
        ("a/../b", 1, r"PARAMS key 'a/../b' cannot be logged to MLflow: a name must be a plain path"),
        ("dir/", 1, r"PARAMS key 'dir/' cannot be logged to MLflow: a name must be a plain path"),
        ("k" * 245, 1, r"PARAMS key 'kkkk.*is 245 characters; MLflow allows at most 244"),
    ],
)
def test_params_mlflow_would_refuse_are_refused_at_load(tmp_path, key, value, message):
    assert not _mlflow_accepts(key, value)
    text = GOOD.replace('PARAMS = {"batch_size": 4,', f'PARAMS = {{{key!r}: {value!r}, "batch_size": 4,')
    with pytest.raises(JobContractError, match=message) as err:
        load_job(write(tmp_path, text))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("key", ["α", "lr:warm", "a b", "enc/layers", "x.y-z_1", "k" * 244])
def test_params_mlflow_accepts_load(tmp_path, key):
    assert _mlflow_accepts(key, "x" * 6000)
    text = GOOD.replace('PARAMS = {"batch_size": 4,', f'PARAMS = {{{key!r}: "{"x" * 6000}", "batch_size": 4,')
    assert key in load_job(write(tmp_path, text)).params


def test_a_value_longer_than_mlflow_keeps_loads_whole(tmp_path):
    # MLflow keeps 6000 characters of a param; the job gets its value whole (tracking logs it cut)
    assert load_job(write(tmp_path, GOOD), overrides={"mode": "m" * 7000}).params["mode"] == "m" * 7000


def test_overrides_of_list_dict_and_none_defaults_are_json_of_the_same_kind(tmp_path):
    text = GOOD.replace(
        '"mode": "a"}', '"mode": "a", "sizes": [1, 2], "aug": {"p": 0.5}, "extra": None, "shape": (2, 3)}'
    )
    path = write(tmp_path, text)
    job = load_job(path, overrides={"sizes": "[3, 4]", "aug": '{"p": 1}', "extra": '"x"', "shape": "[4, 5]"})
    assert job.params["sizes"] == [3, 4] and job.params["aug"] == {"p": 1}
    assert job.params["extra"] == "x" and job.params["shape"] == (4, 5)
    assert load_job(path, overrides={"extra": "[1, 2.5]"}).params["extra"] == [1, 2.5]
    assert load_job(path, overrides={"extra": "/data/ckpt.pt"}).params["extra"] == "/data/ckpt.pt"  # text
    for key, raw, message in [
        ("sizes", "3", r"parameter sizes='3' is not a JSON list, e.g. \[3, 4\] \(its default is \[1, 2\]\)"),
        ("sizes", "[3", "parameter sizes='\\[3' is not a JSON list"),
        ("aug", "[1]", "parameter aug='\\[1\\]' is not a JSON object"),
        ("sizes", "[NaN]", "parameter sizes='\\[NaN\\]' holds NaN, which is not a finite number"),
        ("extra", "1e400", "parameter extra='1e400' holds 1e400, which is not a finite number"),
    ]:
        with pytest.raises(JobContractError, match=message):
            load_job(path, overrides={key: raw})


@pytest.mark.parametrize("raw", ["nan", "inf", "-inf", "1e400"])
def test_non_finite_float_overrides_are_refused(tmp_path, raw):
    with pytest.raises(JobContractError, match=rf"model.py: parameter scale='{raw}' is not a finite number"):
        load_job(write(tmp_path, GOOD), overrides={"scale": raw})


@pytest.mark.parametrize(
    "body,message",
    [
        ("return 5", r"raw_files\(dataset\) returned int, expected a list of file paths \(str or Path\)"),
        ("return 'data.bin'", r"raw_files\(dataset\) returned str, expected a list of file paths"),
        ("return [5]", r"raw_files\(dataset\) returned a list holding int 5, expected a list of file paths"),
        ("return [None]", r"raw_files\(dataset\) returned a list holding NoneType None, expected"),
        ("return (1 / 0 for _ in [1])", r"raw_files\(\) raised ZeroDivisionError: division by zero"),
    ],
)
def test_raw_files_of_the_wrong_kind_is_one_line(tmp_path, body, message):
    job = load_job(write(tmp_path, GOOD + f"\ndef raw_files(dataset):\n    {body}\n"))
    with pytest.raises(JobContractError, match="^model.py: " + message):
        job.files(job.dataset())
    ok = load_job(
        write(tmp_path, GOOD + "\ndef raw_files(dataset):\n    return ('a.bin', __import__('pathlib').Path('b'))\n")
    )
    assert [p.name for p in ok.files(ok.dataset())] == ["a.bin", "b"]


def test_a_module_beside_model_py_imports_as_under_python(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))  # the job's folder is left on sys.path: undo it here
    mod = f"helpers_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{mod}.py").write_text("SIZE = 3\n")
    job = load_job(write(tmp_path, f"from {mod} import SIZE\n" + GOOD.replace('"size": 8', '"size": SIZE')))
    assert job.params["size"] == 3
    assert sys.path[0] == str(tmp_path.resolve())
    sys.path.append(sys.path.pop(0))  # loaded again with the folder further down: moved to the front, not added again
    load_job(tmp_path / "model.py")
    assert sys.path[0] == str(tmp_path.resolve()) and sys.path.count(str(tmp_path.resolve())) == 1
    monkeypatch.delitem(sys.modules, mod)


@pytest.mark.parametrize(
    "text,message",
    [
        (GOOD + "\nraw_files = 'data.bin'\n", "model.py: raw_files must be a function, got str"),
        (
            GOOD.replace('"batch_size": 4', '"batch_size": True'),
            "model.py: PARAMS['batch_size'] must be a positive int, got True",
        ),
        (GOOD + "\nNAME = 3\n", "model.py: NAME must be a string, got int"),
        (
            GOOD.replace("def build_model(cfg)", "def build_model()"),
            "model.py: build_model() must accept 1 positional argument",
        ),
        (
            GOOD.replace("def loss_fn(output, target)", "def loss_fn(output)"),
            "model.py: loss_fn(output) must accept 2 positional arguments",
        ),
    ],
)
def test_contract_violations_say_exactly_what_is_wrong(tmp_path, text, message):
    with pytest.raises(JobContractError) as err:
        load_job(write(tmp_path, text))
    assert str(err.value) == message


def test_an_interrupt_while_the_job_imports_is_an_interrupt_not_a_contract_error(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        load_job(write(tmp_path, "raise KeyboardInterrupt\n"))


def test_name_and_seed_reach_the_job(tmp_path):
    job = load_job(write(tmp_path, GOOD + '\nNAME = "resnet-images"\n'), seed=7)
    assert job.name == "resnet-images" and job.config.seed == 7


@pytest.mark.parametrize(
    "raw,value",
    [
        ("1", True),
        ("true", True),
        ("Yes", True),
        ("ON", True),
        ("0", False),
        ("False", False),
        ("no", False),
        ("Off", False),
    ],
)
def test_a_bool_override_takes_the_usual_words_in_any_case(tmp_path, raw, value):
    assert load_job(write(tmp_path, GOOD), overrides={"flag": raw}).params["flag"] is value


def test_an_int_override_with_a_fraction_is_refused_not_cut(tmp_path):
    with pytest.raises(JobContractError, match=r"parameter size='2.5' is not a valid int \(its default is 8\)"):
        load_job(write(tmp_path, GOOD), overrides={"size": "2.5"})


@pytest.mark.parametrize("item", ["=5", " =5"])
def test_an_override_without_a_key_is_refused(item):
    with pytest.raises(JobContractError, match="expected KEY=VALUE"):
        parse_param_overrides([item])


def test_a_folder_named_like_a_python_file_is_refused(tmp_path):
    (tmp_path / "model.py").mkdir()
    with pytest.raises(JobContractError, match="model.py: expected a Python file"):
        load_job(tmp_path / "model.py")


@pytest.mark.skipif(
    not os.path.exists("/proc/self/mem"), reason="needs /proc/self/mem, a file that opens and fails to read"
)
def test_a_model_py_that_cannot_be_read_is_one_line_not_a_traceback(tmp_path):
    # an unreadable file (permissions, an I/O error): read_bytes raised OSError past the contract's checks.  Tests
    # run as root, whom permissions never stop: /proc/self/mem opens and fails to read at offset 0 (EIO)
    (tmp_path / "model.py").symlink_to("/proc/self/mem")
    for check in (check_job_file, load_job):
        with pytest.raises(
            JobContractError, match=r"model.py: cannot be read \(Input/output error\); expected a readable"
        ):
            check(tmp_path / "model.py")


def test_a_dataset_without_getitem_is_refused(tmp_path):
    text = GOOD.replace("return [(torch.zeros(cfg.size), 0)] * 10", "return {1, 2, 3}")
    with pytest.raises(JobContractError, match="build_dataset\\(\\) returned set, expected a map-style torch Dataset"):
        load_job(write(tmp_path, text)).dataset()


def test_the_default_optimizer_is_sgd_at_the_documented_rate(tmp_path):
    job = load_job(write(tmp_path, GOOD))
    opt = job.optimizer(job.model())
    assert type(opt).__name__ == "SGD" and opt.defaults["lr"] == 0.01


def test_a_build_optimizer_that_raises_is_one_line(tmp_path):
    job = load_job(write(tmp_path, GOOD + "\ndef build_optimizer(model, cfg):\n    raise KeyError('lr')\n"))
    with pytest.raises(JobContractError, match=r"^model.py: build_optimizer\(\) raised KeyError: 'lr'$"):
        job.optimizer(job.model())


def test_a_build_dataset_that_fails_leaves_no_partial_data_behind(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "kept.bin").write_text("from before")
    text = GOOD.replace(
        "return [(torch.zeros(cfg.size), 0)] * 10",
        "(cfg.data_dir / 'half.bin').write_text('partial')\n    raise OSError('disk full')",
    )
    with pytest.raises(JobContractError, match=r"build_dataset\(\) raised OSError: disk full"):
        load_job(write(tmp_path, text), data_dir=data).dataset()
    assert [p.name for p in data.iterdir()] == ["kept.bin"]


def test_a_builtin_without_a_signature_is_trusted_as_loss_fn(tmp_path):
    import torch

    # torch.dist is C code: inspect.signature raises ValueError for it; the job still loads and its loss computes
    text = GOOD.replace("def loss_fn(output, target):\n    return output.sum()", "loss_fn = torch.dist")
    assert "def loss_fn" not in text
    job = load_job(write(tmp_path, text))
    assert float(job.loss_fn(torch.ones(2), torch.zeros(2))) == pytest.approx(2**0.5)
