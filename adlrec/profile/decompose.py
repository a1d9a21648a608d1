"""The differential decomposition of step time (after DS-Analyzer), as a pure function.

Measured elsewhere, once per profile: the compute ceiling ``C`` (training steps on one batch
already on the device, no loader) and the extra seconds per sample that cold storage adds over
cached reads ``f``.  Measured per worker count ``w``: the training throughput ``T(w)`` with the
page cache warm and the loader-alone rate ``P(w)``.

Per sample, in seconds:

* compute:     ``t_c = 1/C``
* warm step:   ``t_w = 1/T(w)``; its excess over compute is the preprocessing stall
  ``s_p = max(0, t_w - t_c)`` (with data cached, the loader's only cost is preprocessing);
* cold step:   the loader's time per sample grows by ``f`` spread over ``max(1, w)`` readers;
  with workers the loader overlaps training, so ``t_cold = max(t_w, t_l + f/w)``, where
  ``t_l = min(1/P(w), t_w)`` is the warm loader's time per sample: training with the loader reached
  ``T(w)``, so the loader delivered at least that fast, and a loader-alone rate below it is noise,
  not fetch; in-process (``w = 0``) nothing overlaps, so ``t_cold = t_w + f``.  The fetch stall is
  ``s_f = t_cold - t_w``, never more than ``f`` (or ``f/w``), and 0 when ``f`` is 0.

Shares are of the cold step time, so ``compute + prep + fetch = 1``.  The fetch share is an
estimate from measured read costs, not a cold training run; docs/profiling.md says why.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Shares", "decompose"]


@dataclass(frozen=True)
class Shares:
    stall_fraction: float  # 1 - T(w)/C, clipped to [0, 1]: the share of GPU time lost (warm data)
    compute_share: float
    prep_share: float
    fetch_share: float


def decompose(throughput: float, ceiling: float, prep_rate: float, fetch_extra_s: float, workers: int) -> Shares:
    if throughput <= 0 or ceiling <= 0:
        raise ValueError(f"throughput ({throughput}) and ceiling ({ceiling}) must be > 0")
    if prep_rate <= 0:
        raise ValueError(f"prep_rate must be > 0, got {prep_rate}")
    if fetch_extra_s < 0 or workers < 0:
        raise ValueError("fetch_extra_s and workers must be >= 0")
    t_c = 1.0 / ceiling
    t_w = 1.0 / throughput
    s_p = max(0.0, t_w - t_c)
    if workers == 0:
        t_cold = t_w + fetch_extra_s
    else:
        t_cold = max(t_w, min(1.0 / prep_rate, t_w) + fetch_extra_s / workers)
    s_f = t_cold - t_w
    stall = min(1.0, max(0.0, 1.0 - throughput / ceiling))
    return Shares(
        stall_fraction=stall,
        compute_share=(t_w - s_p) / t_cold,
        prep_share=s_p / t_cold,
        fetch_share=s_f / t_cold,
    )
