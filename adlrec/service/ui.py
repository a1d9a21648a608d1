"""The web UI: the static files of ``webapp/`` served at ``/ui/``.  They read only the JSON API."""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["mount_ui"]

log = logging.getLogger(__name__)


def mount_ui(app: FastAPI, directory: Path) -> bool:
    """Serve ``directory`` at ``/ui/`` and send ``/`` there; returns whether the UI is served.

    A missing folder (an installed wheel carries no ``webapp/``) leaves the API alone and says how to
    point the service at the files.
    """
    if not (directory / "index.html").is_file():
        log.warning("web UI not served: %s has no index.html; set ADLREC_SERVICE_WEBAPP_DIR", directory)
        return False
    app.mount("/ui", StaticFiles(directory=directory, html=True), name="ui")

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/ui/")

    return True
