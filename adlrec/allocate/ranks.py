"""A job of several ranks that step together, as the allocator sees it: one curve over its total workers.

In synchronous data-parallel training (DDP) every rank runs its own loader and every step waits for
the slowest rank.  With ``W`` workers over ``r`` ranks, the fewest any rank can have is ``W // r``, so
the job runs at ``r * T(W // r)``, ``T`` being one rank's curve: workers past a multiple of ``r`` add
nothing.  A :class:`~adlrec.schemas.JobDemand` with ``ranks`` set is given multiples of them by every
policy: one step at a time, ``greedy`` would stop at the first worker, worth nothing alone, and ``even``
would leave a core idle.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["lockstep_curve"]


def lockstep_curve(rank_curve: Sequence[float], ranks: int) -> tuple[float, ...]:
    """The job's samples/s for ``W = 0 .. ranks * (len(rank_curve) - 1)`` total workers, each rank getting
    ``W // ranks`` of them (a rank's curve ``rank_curve[w]`` for ``w`` workers)."""
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"ranks must be a whole number >= 1, got {ranks!r}")
    if not rank_curve:
        raise ValueError("a rank's curve must have at least the w=0 point")
    top = ranks * (len(rank_curve) - 1)
    return tuple(ranks * float(rank_curve[w // ranks]) for w in range(top + 1))
