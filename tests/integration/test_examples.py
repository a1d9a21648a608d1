"""The bundled example jobs (examples/*.py) against the job contract, with small parameters.

Each example generates its data on first use under ``data_dir``; these tests check it builds,
loads through real DataLoader worker processes, trains one step, caches its data and augments.
"""

from __future__ import annotations

import hashlib
import math
import pickle
import threading
from pathlib import Path
from typing import NamedTuple

import pytest
import torch
from torch.utils.data import DataLoader

from adlrec.job import Job, load_job

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


class Case(NamedTuple):
    overrides: dict[str, str]  # small sizes, as strings as from the command line
    length: int  # expected len(dataset)
    shape: tuple[int, ...]  # expected shape of one sample's input
    dtype: torch.dtype
    random_aug: bool  # does the same index give a different input on each call?


_AUDIO = {"clip_seconds": "0.25", "sample_rate": "8000", "n_fft": "128"}  # 2000 samples, F = 65, hop 32
CASES = {
    "image": Case(
        overrides={
            "batch_size": "4",
            "image_size": "32",
            "crop_size": "24",
            "num_images": "20",
            "aug": "heavy",
            "width": "4",
        },
        length=20,
        shape=(3, 24, 24),
        dtype=torch.float32,
        random_aug=True,
    ),
    "text": Case(
        overrides={"batch_size": "4", "seq_len": "32", "num_docs": "30", "d_model": "16", "layers": "1"},
        length=30,
        shape=(32,),
        dtype=torch.int64,
        random_aug=False,
    ),
    "audio": Case(
        overrides={"batch_size": "4", "num_clips": "12", "width": "4", **_AUDIO},
        length=12,
        shape=(1, 65, 1 + 2000 // 32),
        dtype=torch.float32,
        random_aug=True,
    ),
}


def _load(name: str, data_dir: Path, seed: int = 0) -> Job:
    return load_job(EXAMPLES / f"{name}.py", overrides=CASES[name].overrides, data_dir=data_dir, seed=seed)


def _files(name: str, data_dir: Path, seed: int = 0) -> list[Path]:
    job = _load(name, data_dir, seed)
    return job.files(job.dataset())


def _digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


@pytest.fixture(params=sorted(CASES))
def name(request: pytest.FixtureRequest) -> str:
    return request.param


def test_dataset_loader_and_training_step(name: str, tmp_path: Path) -> None:
    length, shape, dtype = CASES[name].length, CASES[name].shape, CASES[name].dtype
    job = _load(name, tmp_path)
    ds = job.dataset()
    assert len(ds) == length

    loader = DataLoader(ds, batch_size=job.batch_size, shuffle=True, num_workers=2, collate_fn=job.collate_fn)
    inputs, target = next(iter(loader))
    assert tuple(inputs.shape) == (job.batch_size, *shape)
    assert inputs.dtype == dtype
    assert target.shape == (job.batch_size,) and target.dtype == torch.int64

    torch.manual_seed(0)
    model = job.model()
    opt = job.optimizer(model)
    loss = job.loss_fn(model(inputs), target)
    assert loss.dim() == 0 and math.isfinite(loss.item())
    loss.backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)
    opt.step()


def test_raw_files_exist(name: str, tmp_path: Path) -> None:
    job = _load(name, tmp_path)
    files = job.files(job.dataset())
    assert files and all(f.is_file() and f.stat().st_size > 0 for f in files)
    assert all(tmp_path in f.parents for f in files)


def test_data_is_cached_and_reused(name: str, tmp_path: Path) -> None:
    files = _files(name, tmp_path)
    folder = files[0].parent
    before = {f: f.stat().st_mtime_ns for f in folder.iterdir()}
    again = _files(name, tmp_path)
    assert again == files
    assert {f: f.stat().st_mtime_ns for f in folder.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]  # no temp folders left behind


def test_concurrent_generation_is_safe(name: str, tmp_path: Path) -> None:
    job = _load(name, tmp_path)
    barrier = threading.Barrier(3)
    results: list[list[Path]] = []
    errors: list[BaseException] = []

    def build() -> None:
        try:
            barrier.wait()
            results.append(job.files(job.dataset()))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 3 and results[0] == results[1] == results[2]
    assert len(list(tmp_path.iterdir())) == 1


def test_generation_is_deterministic(name: str, tmp_path: Path) -> None:
    a = _files(name, tmp_path / "a")
    b = _files(name, tmp_path / "b")
    c = _files(name, tmp_path / "c", seed=1)
    assert [f.name for f in a] == [f.name for f in b]
    assert _digest(a) == _digest(b)
    assert _digest(a) != _digest(c)


def test_augmentation_and_pickling(name: str, tmp_path: Path) -> None:
    random_aug = CASES[name].random_aug
    ds = _load(name, tmp_path).dataset()
    torch.manual_seed(0)
    x1, y1 = ds[1]
    x2, y2 = ds[1]
    assert y1 == y2
    assert (not torch.equal(x1, x2)) if random_aug else torch.equal(x1, x2)
    torch.manual_seed(0)
    assert torch.equal(ds[1][0], x1)  # randomness comes from torch's RNG, so workers' seeding applies

    clone = pickle.loads(pickle.dumps(ds))
    assert len(clone) == len(ds)
    torch.manual_seed(0)
    assert torch.equal(clone[1][0], x1)
