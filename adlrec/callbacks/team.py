"""The ranks of a distributed run on one node, made one job of the service.

In synchronous data-parallel training (DDP) each rank is a process with its own loader, and every step
waits for the slowest rank.  Registered one by one, the ranks of a run would be planned as strangers:
different worker counts, the extra workers of the faster ranks wasted.  So the ranks that share a
node name form a team: the lowest rank leads (it registers the job with ``ranks``, heartbeats one
rank's figures and applies the plan), the others follow (they read the job's assignment and apply the
same count), and the service plans the job as a whole (:func:`adlrec.allocate.lockstep_curve`).

A team is formed once per start, by one ``all_gather_object`` over a ``gloo`` group of every rank
(made once per process group: an object collective on NCCL needs each rank's CUDA device set, and a
group of our own bounds the wait).  Every rank must start the adapter (Lightning does so on every
rank; a plain loop creates ``ADLLoop`` on every rank, as it runs the same script): a rank that does not
leaves the others waiting ``AGREE_S`` seconds, after which each goes on as a job of its own.  Without a
process group (only a launcher's ``RANK`` and ``WORLD_SIZE``), no team can be agreed on, and each
rank registers as a job of its own.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

__all__ = ["Team", "form_team"]

log = logging.getLogger("adlrec.callbacks")

MAX_ID = 128  # the service's longest job id
AGREE_S = 120.0  # how long a rank waits for the others to start their adapters

_groups: list[tuple[Any, Any]] = []  # (the default process group, our gloo group over it): one per process group


@dataclass(frozen=True)
class Team:
    """This rank's place among the ranks of its run on its node."""

    job_id: str  # the job the team registers as, the same on each of its ranks
    leader: bool  # this rank registers, heartbeats and finishes the job
    ranks: int  # ranks on this node (the team's size)
    rank: int  # this process's global rank
    world: int  # ranks in the whole run
    nodes: int  # nodes the run spans (a team on each)


def form_team(node: str, job_id: str | None = None, timeout_s: float = AGREE_S) -> Team | None:
    """This rank's team, agreed on with every rank of the default process group; None outside a
    distributed run, or when the group cannot agree (logged: each rank is then a job of its own).

    The job id is ``job_id`` as rank 0 was given it (else one rank 0 makes), with the node's index
    appended when the run spans several nodes (job ids are unique across the service)."""
    try:
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
            return None
        rank, world = dist.get_rank(), dist.get_world_size()
        everyone: list[tuple[str, str] | None] = [None] * world
        group = _gloo_group(dist, timeout_s)
        dist.all_gather_object(everyone, (node, job_id or uuid.uuid4().hex[:16]), group=group)
    except Exception as exc:  # a broken group: the ranks go on as jobs of their own rather than fail training
        # a gather that timed out leaves its group unusable: the next start makes another, as the rank that
        # was late does at its first
        _groups.clear()
        log.warning(
            "adlrec: the ranks could not agree on one job (%s: %s); each registers as its own", type(exc).__name__, exc
        )
        return None
    names = [str(n) for n, _ in everyone]  # type: ignore[misc]
    base = str(everyone[0][1])  # type: ignore[index]
    nodes = list(dict.fromkeys(names))  # in the order of their lowest rank
    mates = [r for r, n in enumerate(names) if n == node]
    if len(nodes) > 1:
        suffix = f"-{nodes.index(node)}"
        base = base[: MAX_ID - len(suffix)] + suffix
    return Team(job_id=base, leader=mates[0] == rank, ranks=len(mates), rank=rank, world=world, nodes=len(nodes))


def _gloo_group(dist: Any, timeout_s: float) -> Any:
    """A ``gloo`` group of every rank, made once per default process group (its making is itself a
    collective, bounded by ``timeout_s``, as is every gather over it)."""
    world = dist.group.WORLD
    for made_for, group in _groups:
        if made_for is world:
            return group
    group = dist.new_group(backend="gloo", timeout=timedelta(seconds=timeout_s))
    _groups[:] = [(world, group)]  # a process group destroyed and made again: the old one's group goes
    return group
