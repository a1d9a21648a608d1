"""A trace-driven, discrete-event simulator of loader-worker allocation on one shared node.

``simulate(trace, policy, node, config)`` is pure (no clock, no I/O); trace files, profile lookup
and the trace generator are the adapters around it.  docs/simulate.md describes the models.
"""

from __future__ import annotations

from adlrec.simulate.compare import PolicyRun, compare_policies, comparison_csv, comparison_rows, comparison_table
from adlrec.simulate.engine import SimulationError, check_trace, simulate
from adlrec.simulate.generate import TraceSpec, generate_trace
from adlrec.simulate.records import JobResult, Node, SimConfig, SimResult, TraceJob
from adlrec.simulate.trace import build_jobs, format_trace, parse_trace, profile_catalog, profile_files, read_trace

__all__ = [
    "JobResult",
    "Node",
    "PolicyRun",
    "SimConfig",
    "SimResult",
    "SimulationError",
    "TraceJob",
    "TraceSpec",
    "build_jobs",
    "check_trace",
    "compare_policies",
    "comparison_csv",
    "comparison_rows",
    "comparison_table",
    "format_trace",
    "generate_trace",
    "parse_trace",
    "profile_catalog",
    "profile_files",
    "read_trace",
    "simulate",
]
