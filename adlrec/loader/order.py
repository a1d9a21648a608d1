"""The order of an epoch: which indices, in which sequence, cut into which batches.

An epoch's order must be a pure function of (seed, epoch) so that a resize can continue it and a
saved state can replay it at another worker count.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sized

import torch
from torch.utils.data import Sampler

__all__ = ["EpochSampler", "batches_of", "draw_seed"]


def draw_seed() -> int:
    """A seed from torch's global RNG, as ``DataLoader`` draws one when given no generator."""
    return int(torch.empty((), dtype=torch.int64).random_().item())


class EpochSampler(Sampler[int]):
    """The indices of one epoch, set by :meth:`set_epoch` like ``DistributedSampler``.

    With ``shuffle`` it replays what ``DataLoader(shuffle=True, generator=Generator().manual_seed(seed))``
    draws from its generator each epoch (the iterator's base seed, then the permutation, then the
    empty tail permutation of a fully consumed ``RandomSampler``), so epoch ``e`` has the same order
    as that loader's ``e``-th full pass.  Consecutive epochs cost one step of replay; a jump back
    replays from the seed.  With a ``sampler`` its own order is used, and ``set_epoch`` is forwarded
    to it when it has one (``DistributedSampler`` shards per rank this way).
    """

    def __init__(self, n: int, *, shuffle: bool, seed: int, sampler: Iterable[int] | None = None) -> None:
        if sampler is not None and shuffle:
            raise ValueError("pass either sampler or shuffle=True, not both (as with DataLoader)")
        self.n = n
        self.shuffle = shuffle
        self.seed = seed
        self.sampler = sampler
        self.epoch = 0
        self.epoch_set = False  # set_epoch was called since the loader last started an epoch
        self._gen: torch.Generator | None = None
        self._gen_epoch = 0  # the epoch whose permutation self._gen draws next
        self._gen_seed = seed
        self._told = self._own_epoch()  # the sampler's own epoch as this one last left it

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch
        self.epoch_set = True
        forward = getattr(self.sampler, "set_epoch", None)
        if callable(forward):
            forward(epoch)
        self._told = self._own_epoch()

    def _own_epoch(self) -> int | None:
        epoch = getattr(self.sampler, "epoch", None)
        return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None

    def adopt_own_epoch(self) -> None:
        """Take an epoch set on the sampler itself since this one last told it one, as if set here.

        The DDP idiom calls ``set_epoch(e)`` on the caller's own ``DistributedSampler``, which a
        ``DataLoader`` then iterates as set; without this the loader's own count overrode it (a run resumed
        at epoch 5 got epoch 0's order).  An ``e`` equal to the epoch the loader last told it cannot be told
        apart from no call: ``set_epoch`` on the loader repeats an epoch.
        """
        own = self._own_epoch()
        if own is not None and own != self._told:
            self.set_epoch(own)

    def __len__(self) -> int:
        if self.sampler is not None and isinstance(self.sampler, Sized):
            return len(self.sampler)
        return self.n

    def __iter__(self) -> Iterator[int]:
        return iter(self.order())

    def order(self) -> list[int]:
        """This epoch's indices (computed once per call; callers keep the list)."""
        if self.sampler is not None:
            return [int(i) for i in self.sampler]
        if not self.shuffle:
            return list(range(self.n))
        if self._gen is None or self._gen_epoch > self.epoch or self._gen_seed != self.seed:
            self._gen_seed = self.seed
            self._gen = torch.Generator().manual_seed(self.seed)
            self._gen_epoch = 0
        while True:
            state = self._gen.get_state()
            torch.empty((), dtype=torch.int64).random_(generator=self._gen)  # the iterator's base seed
            perm = torch.randperm(self.n, generator=self._gen).tolist()
            torch.randperm(self.n, generator=self._gen)  # RandomSampler's empty tail draw
            if self._gen_epoch == self.epoch:
                self._gen.set_state(state)  # so asking for the same epoch again replays nothing
                return perm
            self._gen_epoch += 1


def batches_of(order: list[int], batch_size: int, drop_last: bool) -> list[list[int]]:
    """``order`` cut into batches exactly as ``BatchSampler`` cuts it."""
    end = len(order) - len(order) % batch_size if drop_last else len(order)
    return [order[i : i + batch_size] for i in range(0, end, batch_size)]
