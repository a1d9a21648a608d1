"""All of adlrec's settings, in one typed place.

Every field can be set by an environment variable with the ``ADLREC_`` prefix (``ADLREC_DATA_DIR``)
and, where the CLI has a flag for it, by the flag, which wins.  The tracking URI also honours
MLflow's own ``MLFLOW_TRACKING_URI``.  Settings are built by :func:`load_settings`, never at import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from adlrec.schemas import MAX_WORKERS

__all__ = ["Settings", "load_settings", "settings_problem", "sqlite_file"]


# The MLflow experiment `adlrec simulate --log-mlflow` logs to, unless --experiment names another.
SIMULATION_EXPERIMENT = "adlrec-simulations"


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
    # Seconds a profiling DataLoader waits for a worker's batch before the sweep stops with an error:
    # generous for a slow real dataset (a remote read, a large decode), but a worker that never answers
    # must not hang the sweep forever.
    worker_timeout_s: float = Field(default=120.0, gt=0)

    # -- the allocation service (`adlrec serve`, docs/service.md) ------------------------------
    # Interface the service binds; anything but loopback needs service_token.
    service_host: str = "127.0.0.1"
    # TCP port the service listens on (0: any free port).
    service_port: int = Field(default=8470, ge=0, le=65535)
    # Bearer token every write must carry; unset: writes are open and the service binds loopback only.
    service_token: SecretStr | None = None
    # SQLAlchemy URL of the job store; empty means SQLite at data_dir/service.db.
    service_store_url: str = ""
    # Allocation policy the service runs (a name in adlrec.allocate.POLICIES).
    service_policy: Literal["even", "fixed", "greedy", "maxmin", "optimal", "proportional"] = "optimal"
    # What the policy maximises: busy_gpus | throughput | weighted.
    service_objective: Literal["busy_gpus", "throughput", "weighted"] = "busy_gpus"
    # Hysteresis: a job's worker count changes only if that gains this share of its full-speed value.
    service_threshold: float = Field(default=0.05, ge=0, le=1)
    # Seconds between periodic recomputes of every node's plan.
    service_interval_s: float = Field(default=30.0, gt=0)
    # Seconds a recompute waits after a job registers or finishes, so a burst triggers one.
    service_debounce_s: float = Field(default=1.0, ge=0)
    # Compute plans in a process of their own (spawned at start), so a recompute of many jobs does not
    # hold the service's GIL while requests wait; false: in the scheduler's thread.
    service_recompute_process: bool = True
    # Answer well-formed heartbeats before FastAPI's router (adlrec/service/fastpath.py); false: every
    # heartbeat goes through the router (same answers, more CPU per heartbeat).
    service_fast_heartbeat: bool = True
    # Seconds without a heartbeat after which a job expires and releases its workers.
    service_ttl_s: float = Field(default=120.0, gt=0)
    # Largest request body accepted, in bytes.
    service_max_body_bytes: int = Field(default=65536, ge=1024)
    # Logical cores of a node that registers without saying; 0: this machine's.
    service_node_cores: int = Field(default=0, ge=0)
    # Memory (MB) for loader workers on a node that registers without saying; 0: this machine's total.
    service_node_memory_mb: int = Field(default=0, ge=0)
    # Most loader workers any job (each rank of a job of several) may be given: the length of every curve the
    # service predicts.
    service_max_workers: int = Field(default=32, ge=1, le=MAX_WORKERS)
    # Weight of a new heartbeat in the running mean of a measured point (1: the latest replaces it).
    service_measure_alpha: float = Field(default=0.5, gt=0, le=1)
    # Registry alias of the throughput model the service predicts with.
    service_model_alias: str = "champion"
    # Log each job's heartbeats to an MLflow run of its own (experiment adlrec-live): every interval, one
    # point per metric, the mean of the heartbeats since the last one (and their number, `heartbeats`).
    service_live_runs: bool = True
    # Folder of the web UI's static files, served at /ui/; empty: the copy a wheel installs, else the checkout's webapp/.
    service_webapp_dir: Path | None = None

    @field_validator("data_dir", mode="before")
    @classmethod
    def _data_dir(cls, v: Any) -> Any:
        """An empty folder (``ADLREC_DATA_DIR=$(cat missing-file)``, ``ADLREC_DATA_DIR=``) read as the current
        one: the stores, artifacts and datasets went wherever the command ran."""
        if isinstance(v, str) and not v.strip():
            raise ValueError("is empty; expected a folder, or unset it for the default, .adlrec")
        return v

    @field_validator("service_token")
    @classmethod
    def _token(cls, v: SecretStr | None) -> SecretStr | None:
        """A token read from a file keeps its newline: not part of the token. An empty one (a failed
        ``$(...)``) is kept as empty, not unset: `adlrec serve` refuses it (see `check_bind`), while
        commands that never use the token are not stopped by it."""
        if v is None:
            return None
        return SecretStr(v.get_secret_value().strip())

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

    @property
    def resolved_webapp_dir(self) -> Path:
        """The web UI's folder: ``service_webapp_dir``, else the copy a wheel installs in the package
        (setup.py puts it there), else ``webapp/`` of the checkout the package runs from."""
        if self.service_webapp_dir:
            return self.service_webapp_dir
        package = Path(__file__).resolve().parent
        installed = package / "webapp"
        return installed if installed.is_dir() else package.parent / "webapp"

    @property
    def resolved_store_url(self) -> str:
        """The service's job store: ``service_store_url``, else SQLite in the data dir."""
        if self.service_store_url:
            return self.service_store_url
        return f"sqlite:///{(self.data_dir / 'service.db').resolve()}"


def load_settings(**overrides: Any) -> Settings:
    """Settings from the environment, with explicit overrides (e.g. CLI flags) on top.

    ``None`` values in ``overrides`` mean "not given" and are ignored.
    """
    given = {k: v for k, v in overrides.items() if v is not None}
    return Settings(**given)


def settings_problem(exc: ValidationError, flags: bool = True) -> str:
    """The first setting :func:`load_settings` refused, in one line naming it and its variable (and, for a
    command with flags, that a flag may have set it), instead of pydantic's lines and link."""
    err = exc.errors()[0]
    field = ".".join(str(x) for x in err["loc"]) or "settings"
    msg = err["msg"].removeprefix("Value error, ")  # pydantic's prefix for a validator's ValueError
    return f"setting {field}: {msg} (from ADLREC_{field.upper()}{' or its flag' if flags else ''})"


def sqlite_file(uri: str) -> Path | None:
    """The database file a ``sqlite:///`` tracking URI names (relative to the current folder unless the
    path after the three slashes is absolute; without SQLAlchemy's ``?options``), else None."""
    return Path(uri.removeprefix("sqlite:///").partition("?")[0]) if uri.startswith("sqlite:///") else None
