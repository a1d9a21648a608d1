"""The web UI: the static files of ``webapp/`` served at ``/ui/``.  They read only the JSON API."""

from __future__ import annotations

import logging
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.types import Scope

__all__ = ["mount_ui"]

log = logging.getLogger(__name__)


class _UIFiles(StaticFiles):
    """The UI's files, each answered with ``Cache-Control: no-cache``: a browser asks again every time (an
    unchanged file costs a 304 on its ETag).  Without it a browser may reuse a file for a tenth of the age
    its Last-Modified gives it, so after an upgrade it ran last month's app.js against the new API."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Cache-Control"] = "no-cache"
        return response


def mount_ui(app: FastAPI, directory: Path) -> bool:
    """Serve ``directory`` at ``/ui/`` and send ``/`` there; returns whether the UI is served.

    A missing folder (an installed wheel carries no ``webapp/``) leaves the API alone and says how to
    point the service at the files.
    """
    if not (directory / "index.html").is_file():
        log.warning("web UI not served: %s has no index.html; set ADLREC_SERVICE_WEBAPP_DIR", directory)
        return False
    app.mount("/ui", _UIFiles(directory=directory, html=True), name="ui")

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/ui/")

    return True
