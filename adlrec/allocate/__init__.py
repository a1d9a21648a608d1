"""Allocation policies: pure functions ``plan = policy(request)`` (no clock, network, MLflow or I/O).

``POLICIES`` maps each policy's name to its function; see each module for what it does and why.
"""

from __future__ import annotations

from collections.abc import Callable

from adlrec.allocate.common import InfeasibleRequest
from adlrec.allocate.even import even, proportional
from adlrec.allocate.fixed import fixed
from adlrec.allocate.greedy import greedy
from adlrec.allocate.maxmin import maxmin
from adlrec.allocate.optimal import optimal
from adlrec.allocate.ranks import lockstep_curve
from adlrec.schemas import AllocationPlan, AllocationRequest

__all__ = [
    "POLICIES",
    "InfeasibleRequest",
    "Policy",
    "even",
    "fixed",
    "greedy",
    "lockstep_curve",
    "maxmin",
    "optimal",
    "proportional",
]

Policy = Callable[[AllocationRequest], AllocationPlan]

POLICIES: dict[str, Policy] = {
    "even": even,
    "fixed": fixed,
    "greedy": greedy,
    "maxmin": maxmin,
    "optimal": optimal,
    "proportional": proportional,
}
