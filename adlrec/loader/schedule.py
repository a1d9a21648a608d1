"""Which pool serves which batch of an epoch: stretches of batch positions, each woven over its pools.

A loader grown from ``a`` to ``b`` workers keeps its ``a``-worker pool and adds a pool of ``b - a``:
from the cut on, each run of ``b`` consecutive batches gives its first ``a`` to the old pool and the
other ``b - a`` to the new one.  Torch hands a pool's batches to its workers in turn, so every worker
still gets every ``b``-th batch, as in one pool of ``b``.  Each pool takes its own batches in position
order and the loop takes batches in position order, so the order of an epoch never depends on which
pool serves what.

Pure bookkeeping, no processes: :class:`Schedule` is read by every pool's batch sampler (in the
pools' threads) and rewritten by ``resize`` (in the loop's thread), under :attr:`Schedule.lock`.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

__all__ = ["Schedule", "Stretch"]


@dataclass(frozen=True)
class Stretch:
    """Positions from ``start`` on (to the next stretch), woven over ``pools`` by ``weights``.

    Within each period of ``sum(weights)`` positions, the first ``weights[0]`` go to ``pools[0]``, the
    next ``weights[1]`` to ``pools[1]``, and so on.  A stretch of one pool serves every position,
    whatever its weight (an in-process pool has 0 workers).
    """

    start: int
    pools: tuple[int, ...]
    weights: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.pools or len(self.pools) != len(self.weights) or len(set(self.pools)) != len(self.pools):
            raise ValueError(f"a stretch needs distinct pools, one weight each: {self.pools} {self.weights}")
        if len(self.pools) > 1 and min(self.weights) < 1:
            raise ValueError(f"every pool woven with others needs a weight >= 1: {self.weights}")

    @property
    def workers(self) -> int:
        return sum(self.weights)

    def _window(self, pool: int) -> tuple[int, int]:
        i = self.pools.index(pool)
        return sum(self.weights[:i]), self.weights[i]

    def owner(self, position: int) -> int:
        if len(self.pools) == 1:
            return self.pools[0]
        offset = (position - self.start) % self.workers
        for pool, weight in zip(self.pools, self.weights, strict=True):
            if offset < weight:
                return pool
            offset -= weight
        raise AssertionError("unreachable: offset < period")

    def next_for(self, pool: int, position: int, end: int) -> int | None:
        """The first position in ``[max(position, start), end)`` that ``pool`` serves, if any."""
        if pool not in self.pools:
            return None
        position = max(position, self.start)
        if len(self.pools) > 1:
            lo, width = self._window(pool)
            period = self.workers
            offset = (position - self.start) % period
            if offset < lo:
                position += lo - offset
            elif offset >= lo + width:
                position += period - offset + lo
        return position if position < end else None

    def counts(self, end: int) -> tuple[int, ...]:
        """How many positions in ``[start, end)`` each of its pools serves, in order."""
        return tuple(self.count_for(pool, end) for pool in self.pools)

    def count_for(self, pool: int, end: int) -> int:
        """How many positions in ``[start, end)`` ``pool`` serves."""
        if pool not in self.pools or end <= self.start:
            return 0
        n = end - self.start
        if len(self.pools) == 1:
            return n
        lo, width = self._window(pool)
        full, rest = divmod(n, self.workers)
        return full * width + min(width, max(0, rest - lo))


class Schedule:
    """The stretches of one epoch of ``length`` batches, in position order."""

    def __init__(self, length: int, first: Stretch) -> None:
        self.length = length
        self.stretches = [first]
        self.lock = threading.Lock()

    def _at(self, position: int) -> int:
        return max(0, bisect.bisect_right([s.start for s in self.stretches], position) - 1)

    def _end(self, k: int) -> int:
        return min(self.stretches[k + 1].start, self.length) if k + 1 < len(self.stretches) else self.length

    def stretch_at(self, position: int) -> Stretch:
        return self.stretches[self._at(position)]

    @property
    def last(self) -> Stretch:
        return self.stretches[-1]

    def owner(self, position: int) -> int:
        return self.stretch_at(position).owner(position)

    def next_for(self, pool: int, position: int) -> int | None:
        """The first position from ``position`` on that ``pool`` serves; ``None`` when it serves no more."""
        for k in range(self._at(position), len(self.stretches)):
            found = self.stretches[k].next_for(pool, position, self._end(k))
            if found is not None:
                return found
        return None

    def count_for(self, pool: int) -> int:
        """How many positions of the epoch ``pool`` serves."""
        return sum(s.count_for(pool, self._end(k)) for k, s in enumerate(self.stretches))

    def replace(self, pool: int, by: int) -> None:
        """Pool ``by`` serves every position ``pool`` was to serve (a pool that could not start)."""
        self.stretches = [
            Stretch(s.start, tuple(by if p == pool else p for p in s.pools), s.weights) for s in self.stretches
        ]

    def rewrite(self, at: int, pools: tuple[int, ...], weights: tuple[int, ...]) -> None:
        """From ``at`` on, ``pools`` serve every position by ``weights`` (what was planned there is dropped).

        The caller makes sure no pool has handed out a position at or after ``at``.
        """
        stretch = Stretch(at, pools, weights)
        self.stretches = [s for s in self.stretches if s.start < at] + [stretch]
