"""The allocation service: jobs register and heartbeat, the service plans their loader workers.

The only package that imports fastapi.  ``create_app(settings)`` builds the application;
``adlrec serve`` runs it under uvicorn (:mod:`adlrec.service.server`).  See docs/service.md.
"""

from adlrec.service.app import create_app

__all__ = ["create_app"]
