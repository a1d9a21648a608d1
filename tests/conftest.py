"""Shared fixtures: a real SQLite MLflow store in a temp dir, and the tiny test job."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent
CACHES = {".hypothesis", ".pytest_cache", ".ruff_cache", "__pycache__"}


@pytest.fixture
def tiny_job_path() -> Path:
    return FIXTURES / "tiny_job.py"


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    """A fresh embedded MLflow store: its tracking URI and data dir, as CLI flags use them."""
    data = tmp_path / "data"
    return {"uri": f"sqlite:///{tmp_path / 'mlflow.db'}", "data_dir": str(data)}


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests choose their store and settings explicitly: an MLFLOW_TRACKING_URI or an ADLREC_ setting
    from the shell (a budget, a warm-up, an rse target) must not leak in."""
    from adlrec.config import Settings

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    for name in Settings.model_fields:
        monkeypatch.delenv(f"ADLREC_{name.upper()}", raising=False)


@pytest.fixture(autouse=True)
def _small_training_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loaders that leave ``fork_server`` unset fork their own workers, however large pytest has grown.

    The default picks the zygote from ``AUTO_ZYGOTE_GB`` of resident memory, which a whole-suite run
    crosses (about 0.55 GB) and a run of one file does not: tests that want the zygote, or the default's
    choice, say so (``fork_server=True``, or the threshold set around their own size).
    """
    monkeypatch.setattr("adlrec.loader.resizable.AUTO_ZYGOTE_GB", float("inf"))


@pytest.fixture(autouse=True)
def _nothing_left_in_the_repository():
    """A test writes under its own temp folder: a store, its artifacts (MLflow's default ``./mlruns``) or a
    data dir left in the checkout would be read by the next command a user runs there."""
    before = set(os.listdir(ROOT))
    yield
    left = set(os.listdir(ROOT)) - before - CACHES
    assert not left, f"the test left {sorted(left)} in {ROOT}"
