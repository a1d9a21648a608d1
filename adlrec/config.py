"""All of adlrec's settings, in one typed place.

Every field can be set by an environment variable with the ``ADLREC_`` prefix (``ADLREC_DATA_DIR``)
and, where the CLI has a flag for it, by the flag, which wins.  The tracking URI also honours
MLflow's own ``MLFLOW_TRACKING_URI``.  Settings are built by :func:`load_settings`, never at import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings", "load_settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ADLREC_", extra="forbid", frozen=True, populate_by_name=True)

    # Folder for the embedded stores (MLflow's SQLite database and artifacts) and generated data.
    data_dir: Path = Path(".adlrec")
    # MLflow tracking URI; empty means the embedded SQLite store in data_dir.
    tracking_uri: str = Field(default="", validation_alias=AliasChoices("ADLREC_TRACKING_URI", "MLFLOW_TRACKING_URI"))
    # MLflow experiment that holds one run per profiled curve.
    experiment: str = "adlrec-profiles"
    # Seconds of measurement per worker count (training); the loader-alone pass gets half.
    point_budget_s: float = Field(default=6.0, gt=0)
    # Stop measuring a point once the throughput's relative standard error is below this.
    rse_target: float = Field(default=0.05, gt=0, lt=1)
    # Warm-up excluded from every measurement: at least this long, and at least a few batches.
    warmup_s: float = Field(default=0.5, ge=0)
    # Fewest batches a measurement window may hold before it can be called stable.
    min_batches: int = Field(default=20, ge=2)
    # Raw files read (cold and cached) to measure fetch cost; spread evenly over the dataset.
    fetch_sample_files: int = Field(default=256, ge=1)
    # Seed for sample order and job randomness.
    seed: int = 0

    @property
    def resolved_tracking_uri(self) -> str:
        if self.tracking_uri:
            return self.tracking_uri
        return f"sqlite:///{(self.data_dir / 'mlflow.db').resolve()}"

    @property
    def artifact_root(self) -> Path:
        """Where artifacts go for experiments adlrec creates in the embedded store."""
        return (self.data_dir / "artifacts").resolve()

    @property
    def datasets_dir(self) -> Path:
        return self.data_dir / "datasets"


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with explicit overrides (e.g. CLI flags) on top.

    ``None`` values in ``overrides`` mean "not given" and are ignored.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**given)
