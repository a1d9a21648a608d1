"""The job contract: what a ``model.py`` must define so adlrec can profile it, and its loader.

A ``model.py`` defines, at module level::

    PARAMS = {"batch_size": 32, ...}          # required; "batch_size" is required, other keys are yours
    def build_dataset(cfg): ...               # required; a map-style torch Dataset (len + getitem)
    def build_model(cfg): ...                 # required; a torch.nn.Module
    def loss_fn(output, target): ...          # required; a scalar loss tensor
    def build_optimizer(model, cfg): ...      # optional; default SGD(lr=0.01)
    def collate_fn(samples): ...              # optional; default torch's default_collate
    def raw_files(dataset): ...               # optional; paths of the raw files the dataset reads,
                                              # used to measure fetch cost (cold vs cached reads)
    NAME = "resnet-images"                    # optional; default: the file's stem

Batches are ``(input, target)`` pairs: adlrec calls ``loss_fn(model(input), target)``.
``cfg`` is a :class:`JobConfig`: the parameters as attributes (``cfg.batch_size``), plus
``cfg.data_dir``, a folder the job may use to cache data it generates, and ``cfg.seed``.
Every failure to meet the contract raises :class:`~adlrec.errors.JobContractError` with one line.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import math
import os
import posixpath
import re
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from adlrec.errors import JobContractError, first_line
from adlrec.folders import undone_on_failure

__all__ = ["Job", "JobConfig", "check_job_file", "load_job", "param_key_problem", "parse_param_overrides"]

_REQUIRED_CALLABLES = ("build_dataset", "build_model", "loss_fn")
_OPTIONAL_CALLABLES = ("build_optimizer", "collate_fn", "raw_files")

# MLflow's rule for a param, from mlflow/utils/validation.py (validate_param_and_metric_name,
# path_not_unique, MAX_ENTITY_KEY_LENGTH).  adlrec/tracking.py logs each PARAMS entry as
# "param.<key>" = str(value); a key MLflow refuses would fail only after the whole sweep.  A value
# longer than MLflow keeps is logged cut, with a warning (profile.json keeps it whole).
PARAM_PREFIX = "param."
_MLFLOW_NAME = re.compile(r"^[/\w.\- ]*$" if os.name == "nt" else r"^[/\w.\- :]*$")
_MLFLOW_NAME_CHARS = "letters, digits, spaces and _ - . /" + ("" if os.name == "nt" else " :")
_MLFLOW_KEY_MAX = 250


@dataclass(frozen=True)
class JobConfig:
    """What a job's builders receive: its parameters as attributes, a data folder and a seed."""

    params: Mapping[str, Any]
    data_dir: Path
    seed: int = 0

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails, i.e. for parameter names.
        params = object.__getattribute__(self, "params")
        try:
            return params[name]
        except KeyError:
            known = ", ".join(sorted(params))
            raise AttributeError(f"no parameter {name!r} (PARAMS has: {known})") from None

    @property
    def batch_size(self) -> int:
        return int(self.params["batch_size"])


@dataclass(frozen=True)
class Job:
    """A loaded, validated ``model.py`` with its resolved parameters."""

    name: str
    path: Path
    source_hash: str  # sha256 of the file's bytes, first 16 hex digits
    config: JobConfig
    build_dataset: Callable[[JobConfig], Any]
    build_model: Callable[[JobConfig], Any]
    loss_fn: Callable[[Any, Any], Any]
    build_optimizer: Callable[[Any, JobConfig], Any] | None = None
    collate_fn: Callable[[list[Any]], Any] | None = None
    raw_files: Callable[[Any], Sequence[str | Path]] | None = None

    @property
    def batch_size(self) -> int:
        return self.config.batch_size

    @property
    def params(self) -> Mapping[str, Any]:
        return self.config.params

    def dataset(self) -> Any:
        """Build the dataset and check it is a non-empty map-style dataset.  A ``build_dataset`` that raises
        (or is interrupted) leaves nothing new in ``cfg.data_dir``: no partial data a later run would reuse."""
        with undone_on_failure(self.config.data_dir):
            ds = self._call("build_dataset", self.build_dataset, self.config)
        from torch.utils.data import IterableDataset

        if isinstance(ds, IterableDataset):
            raise JobContractError(
                f"{self.path.name}: build_dataset() returned an IterableDataset; adlrec needs a "
                "map-style dataset (with __len__ and __getitem__) so it can split and resume epochs"
            )
        if not (hasattr(ds, "__getitem__") and hasattr(ds, "__len__")):
            raise JobContractError(
                f"{self.path.name}: build_dataset() returned {type(ds).__name__}, expected a "
                "map-style torch Dataset with __len__ and __getitem__"
            )
        n = self._call("len(dataset)", len, ds)
        if n <= 0:
            raise JobContractError(f"{self.path.name}: build_dataset() returned an empty dataset")
        return ds

    def model(self) -> Any:
        import torch

        m = self._call("build_model", self.build_model, self.config)
        if not isinstance(m, torch.nn.Module):
            raise JobContractError(
                f"{self.path.name}: build_model() returned {type(m).__name__}, expected a torch.nn.Module"
            )
        return m

    def optimizer(self, model: Any) -> Any:
        import torch

        if self.build_optimizer is None:
            params = list(model.parameters())
            if not params:  # SGD raises a bare ValueError on an empty list
                raise JobContractError(
                    f"{self.path.name}: build_model() returned a module with no parameters ({type(model).__name__}), "
                    "and the default optimizer (SGD) needs some to train; give the model parameters, or define "
                    "build_optimizer(model, cfg)"
                )
            return torch.optim.SGD(params, lr=0.01)
        return self._call("build_optimizer", self.build_optimizer, model, self.config)

    def files(self, dataset: Any) -> list[Path]:
        """Raw files behind the dataset, or an empty list when ``raw_files`` is not defined."""
        if self.raw_files is None:
            return []
        files = self._call("raw_files", self.raw_files, dataset)
        expected = "expected a list of file paths (str or Path)"
        if isinstance(files, (str, bytes, os.PathLike)) or not isinstance(files, Iterable):
            raise JobContractError(f"{self.path.name}: raw_files(dataset) returned {type(files).__name__}, {expected}")
        items = self._call("raw_files", list, files)  # a generator runs the user's code here
        for f in items:
            if not isinstance(f, (str, os.PathLike)):
                held = f"{type(f).__name__} {f!r:.60}"
                raise JobContractError(
                    f"{self.path.name}: raw_files(dataset) returned a list holding {held}, {expected}"
                )
        return [Path(f) for f in items]

    def _call(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except JobContractError:
            raise
        except (Exception, SystemExit) as exc:  # the user's code failed (sys.exit() too): one line, not a traceback
            call = what if what.endswith(")") else f"{what}()"
            raise JobContractError(f"{self.path.name}: {call} raised {type(exc).__name__}: {_first_line(exc)}") from exc


def parse_param_overrides(items: Sequence[str]) -> dict[str, str]:
    """Turn ``["image_size=64", "aug=heavy"]`` into a dict of raw strings."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise JobContractError(f"--param {item!r}: expected KEY=VALUE, e.g. --param batch_size=64")
        out[key.strip()] = value.strip()
    return out


def check_job_file(path: str | Path) -> Path:
    """``path`` as a Path if it names a Python file, else a :class:`JobContractError`; checked before
    anything is created for the job."""
    return _checked_source(path)[0]


def _checked_source(path: str | Path) -> tuple[Path, bytes]:
    """``path`` as a Path and its bytes if it names a readable Python file, else a :class:`JobContractError`
    (one line: permissions or an I/O error too)."""
    path = Path(path)
    if not path.exists():
        raise JobContractError(f"{path}: no such file; expected a model.py that defines the adlrec job contract")
    if not path.is_file() or path.suffix != ".py":
        raise JobContractError(f"{path}: expected a Python file (model.py)")
    try:
        return path, path.read_bytes()
    except OSError as exc:
        raise JobContractError(
            f"{path}: cannot be read ({exc.strerror or exc}); expected a readable model.py"
        ) from None


def load_job(
    path: str | Path,
    *,
    overrides: Mapping[str, str] | None = None,
    data_dir: str | Path = ".adlrec/datasets",
    seed: int = 0,
) -> Job:
    """Import ``path`` and validate it against the job contract.

    ``overrides`` maps parameter names to strings from the command line; each is converted to the
    type of its default in ``PARAMS``.
    """
    path, source = _checked_source(path)
    module = _import(path)

    for name in _REQUIRED_CALLABLES:
        obj = getattr(module, name, None)
        if obj is None:
            raise JobContractError(
                f"{path.name}: missing {name}(); the contract needs build_dataset(cfg), build_model(cfg), "
                "loss_fn(output, target) and PARAMS with batch_size"
            )
        if not callable(obj):
            raise JobContractError(f"{path.name}: {name} must be a function, got {type(obj).__name__}")
    for name in _OPTIONAL_CALLABLES:
        obj = getattr(module, name, None)
        if obj is not None and not callable(obj):
            raise JobContractError(f"{path.name}: {name} must be a function, got {type(obj).__name__}")

    defaults = getattr(module, "PARAMS", None)
    if not isinstance(defaults, Mapping):
        raise JobContractError(
            f"{path.name}: missing PARAMS; expected a dict of parameters with at least batch_size, "
            'e.g. PARAMS = {"batch_size": 32}'
        )
    params = dict(defaults)
    for key, raw in (overrides or {}).items():
        if key not in params:
            known = ", ".join(sorted(params))
            raise JobContractError(f"{path.name}: unknown parameter {key!r} (PARAMS has: {known})")
        params[key] = _convert(path.name, key, raw, params[key])
    for key in params:
        _check_loggable(path.name, str(key))
    batch = params.get("batch_size")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch <= 0:
        raise JobContractError(f"{path.name}: PARAMS['batch_size'] must be a positive int, got {batch!r}")

    name = getattr(module, "NAME", None) or path.stem
    if not isinstance(name, str):
        raise JobContractError(f"{path.name}: NAME must be a string, got {type(name).__name__}")

    _check_arity(path.name, module, "build_dataset", 1)
    _check_arity(path.name, module, "build_model", 1)
    _check_arity(path.name, module, "loss_fn", 2)
    if getattr(module, "build_optimizer", None) is not None:
        _check_arity(path.name, module, "build_optimizer", 2)

    return Job(
        name=name,
        path=path.resolve(),
        source_hash=hashlib.sha256(source).hexdigest()[:16],
        config=JobConfig(params=params, data_dir=Path(data_dir), seed=seed),
        build_dataset=module.build_dataset,
        build_model=module.build_model,
        loss_fn=module.loss_fn,
        build_optimizer=getattr(module, "build_optimizer", None),
        collate_fn=getattr(module, "collate_fn", None),
        raw_files=getattr(module, "raw_files", None),
    )


def _import(path: Path) -> ModuleType:
    """Import ``path`` as ``python path`` would run it: with its folder first on ``sys.path``.

    The folder stays on ``sys.path`` afterwards (moved to the front if it was there already): a job
    may import its helper modules lazily, in its functions or in DataLoader workers, and forked
    workers inherit ``sys.path`` and ``sys.modules`` from this process.
    """
    folder = str(path.resolve().parent)
    if folder in sys.path:
        sys.path.remove(folder)
    sys.path.insert(0, folder)
    mod_name = f"adlrec_job_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:10]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise JobContractError(f"{path}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    # Registered so that pickle finds the job's classes by module name in this process (and in
    # forked DataLoader workers, which inherit it); spawned workers could not import it.
    sys.modules[mod_name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        sys.modules.pop(mod_name, None)
        raise JobContractError(f"{path.name}: does not import: SyntaxError at line {exc.lineno}: {exc.msg}") from exc
    except BaseException as exc:  # SystemExit or anything the module raises at import
        sys.modules.pop(mod_name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise JobContractError(f"{path.name}: does not import: {type(exc).__name__}: {_first_line(exc)}") from exc
    return module


def param_key_problem(key: str) -> str:
    """Why MLflow would refuse ``key`` as a profile's parameter (logged as ``param.<key>``), or ``""``: the key
    named and the rule (see ``_MLFLOW_NAME``)."""
    name = PARAM_PREFIX + key
    if not _MLFLOW_NAME.match(name):
        return f"{key!r} cannot be logged to MLflow: a name may only contain {_MLFLOW_NAME_CHARS}"
    if posixpath.normpath(name) != name:
        return (
            f"{key!r} cannot be logged to MLflow: a name must be a plain path "
            "(no empty, '.' or '..' parts, no trailing '/')"
        )
    if len(name) > _MLFLOW_KEY_MAX:
        return f"{key[:40]!r}... is {len(key)} characters; MLflow allows at most {_MLFLOW_KEY_MAX - len(PARAM_PREFIX)}"
    return ""


def _check_loggable(file: str, key: str) -> None:
    """Refuse a parameter name MLflow would refuse to log, naming it and the rule."""
    problem = param_key_problem(key)
    if problem:
        raise JobContractError(f"{file}: PARAMS key {problem}")


def _convert(file: str, key: str, raw: str, default: Any) -> Any:
    """``raw`` as the type of ``default``: bool, int, float (finite), str; JSON for list, dict and None."""
    if default is None or isinstance(default, (list, tuple, dict)):
        return _convert_json(file, key, raw, default)
    try:
        if isinstance(default, bool):
            low = raw.lower()
            if low in ("1", "true", "yes", "on"):
                return True
            if low in ("0", "false", "no", "off"):
                return False
            raise ValueError(raw)
        if isinstance(default, int):
            return int(raw)
        if isinstance(default, float):
            value = float(raw)
            if not math.isfinite(value):
                raise JobContractError(f"{file}: parameter {key}={raw!r} is not a finite number")
            return value
    except ValueError:
        raise JobContractError(
            f"{file}: parameter {key}={raw!r} is not a valid {type(default).__name__} (its default is {default!r})"
        ) from None
    return raw


def _convert_json(file: str, key: str, raw: str, default: Any) -> Any:
    """``raw`` parsed as JSON, of the default's kind (list or tuple: a list; dict: an object; None: any
    JSON value, else the text as given)."""

    def refuse(text: str) -> Any:
        raise JobContractError(f"{file}: parameter {key}={raw!r} holds {text}, which is not a finite number")

    def number(text: str) -> float:
        return float(text) if math.isfinite(float(text)) else refuse(text)

    if isinstance(default, (list, tuple)):
        kind, what = list, "a JSON list, e.g. [3, 4]"
    elif isinstance(default, dict):
        kind, what = dict, 'a JSON object, e.g. {"a": 1}'
    else:
        kind, what = object, "JSON or text"
    try:
        value = json.loads(raw, parse_float=number, parse_constant=refuse)
    except ValueError:  # not JSON at all: under a None default, the text itself (a path, a name)
        value = raw if kind is object else ...
    if value is ... or not isinstance(value, kind):
        raise JobContractError(f"{file}: parameter {key}={raw!r} is not {what} (its default is {default!r})")
    return tuple(value) if isinstance(default, tuple) else value


def _check_arity(file: str, module: ModuleType, name: str, n: int) -> None:
    fn = getattr(module, name)
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # builtins and C functions: trust them
    try:
        sig.bind(*([None] * n))
    except TypeError:
        raise JobContractError(
            f"{file}: {name}{sig} must accept {n} positional argument{'s' if n > 1 else ''}"
        ) from None


def _first_line(exc: BaseException) -> str:
    return first_line(exc, "(no message)")
