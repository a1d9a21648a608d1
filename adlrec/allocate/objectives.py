"""What an allocation is worth: the three objectives, as pure functions of a job and a worker count.

* ``busy_gpus`` (default): ``gpus_j * T_j(w) / T_j(max)``, the GPUs kept busy; comparable across models
  whose samples/s differ by orders of magnitude.
* ``throughput``: raw ``T_j(w)`` samples/s (favours fast models; offered for homogeneous nodes).
* ``weighted``: ``weight_j * T_j(w) / T_j(max)``, a priority per job.

Every objective is ``factor_j * T_j(w) / T_j(max)`` (``throughput``: ``T_j(w)``), ``factor_j >= 0``, so
a curve's shape carries over. The ratio is taken first: it lies in [0, 1] whatever the curve's scale,
where ``factor_j / T_j(max)`` overflowed to infinity for a subnormal peak (and made the optimum NaN).
A job whose curve is all zero is worth nothing under the normalised objectives.
"""

from __future__ import annotations

from collections.abc import Mapping

from adlrec.schemas import AllocationRequest, JobDemand

__all__ = ["full_value", "job_values", "objective_value"]


def _factor(job: JobDemand, objective: str) -> float | None:
    """What a normalised objective weighs the job's share of its peak by; None: raw samples/s."""
    if objective == "throughput":
        return None
    if objective == "busy_gpus":
        return float(job.gpus)
    if objective == "weighted":
        return job.weight
    raise ValueError(f"unknown objective {objective!r}")


def _value(factor: float | None, peak: float, t: float) -> float:
    """``t`` samples/s in objective units, for a job of this factor and peak."""
    if factor is None:
        return t
    return factor * (t / peak) if peak > 0 else 0.0


def job_values(job: JobDemand, objective: str) -> list[float]:
    """The job's objective value at every worker count of its curve (index = workers)."""
    factor, peak = _factor(job, objective), job.peak
    return [_value(factor, peak, t) for t in job.curve]


def full_value(job: JobDemand, objective: str) -> float:
    """The job's value at its peak: what a hysteresis threshold is a fraction of."""
    return _value(_factor(job, objective), job.peak, job.peak)


def objective_value(request: AllocationRequest, workers: Mapping[str, int]) -> float:
    """The request's objective for a worker count per job id."""
    obj = request.objective
    return sum(_value(_factor(j, obj), j.peak, j.curve[workers[j.job_id]]) for j in request.jobs)
