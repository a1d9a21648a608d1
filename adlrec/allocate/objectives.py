"""What an allocation is worth: the three objectives, as pure functions of a job and a worker count.

* ``busy_gpus`` (default): ``gpus_j * T_j(w) / T_j(max)``, the GPUs kept busy; comparable across models
  whose samples/s differ by orders of magnitude.
* ``throughput``: raw ``T_j(w)`` samples/s (favours fast models; offered for homogeneous nodes).
* ``weighted``: ``weight_j * T_j(w) / T_j(max)``, a priority per job.

Every objective is ``scale_j * T_j(w)`` with a per-job ``scale_j >= 0``, so a curve's shape carries over.
A job whose curve is all zero is worth nothing under the normalised objectives.
"""

from __future__ import annotations

from collections.abc import Mapping

from adlrec.schemas import AllocationRequest, JobDemand

__all__ = ["full_value", "job_scale", "job_values", "objective_value"]


def job_scale(job: JobDemand, objective: str) -> float:
    """The factor that turns the job's samples/s into objective units."""
    if objective == "throughput":
        return 1.0
    peak = job.peak
    if peak <= 0:
        return 0.0
    if objective == "busy_gpus":
        return job.gpus / peak
    if objective == "weighted":
        return job.weight / peak
    raise ValueError(f"unknown objective {objective!r}")


def job_values(job: JobDemand, objective: str) -> list[float]:
    """The job's objective value at every worker count of its curve (index = workers)."""
    s = job_scale(job, objective)
    return [s * t for t in job.curve]


def full_value(job: JobDemand, objective: str) -> float:
    """The job's value at its peak: what a hysteresis threshold is a fraction of."""
    return job_scale(job, objective) * job.peak


def objective_value(request: AllocationRequest, workers: Mapping[str, int]) -> float:
    """The request's objective for a worker count per job id."""
    return sum(job_scale(j, request.objective) * j.curve[workers[j.job_id]] for j in request.jobs)
