"""The allocation service: jobs register and heartbeat, the service plans their loader workers.

The only package that imports fastapi.  ``create_app(settings)`` builds the application;
``adlrec serve`` runs it under uvicorn (:mod:`adlrec.service.server`).  See docs/service.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    """``create_app``, imported when asked for: a child process the service spawns imports this package
    first, and with it the whole app (seconds), before it can ignore a terminal's Ctrl-C (lifeline.py)."""
    if name == "create_app":
        from adlrec.service.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
