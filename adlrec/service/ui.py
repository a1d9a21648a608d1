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


# What the page may load and run: the service's own files and API only, no inline script (every value from
# the API is put in the page as text; this is the net under that), no other host (it works offline).  Inline
# styles stay allowed: the page colours each job with a style attribute.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


class _UIFiles(StaticFiles):
    """The UI's files, each answered with ``Cache-Control: no-cache``: a browser asks again every time (an
    unchanged file costs a 304 on its ETag).  Without it a browser may reuse a file for a tenth of the age
    its Last-Modified gives it, so after an upgrade it ran last month's app.js against the new API.  And
    with :data:`CONTENT_SECURITY_POLICY`."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers["Cache-Control"] = "no-cache"
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        return response


def mount_ui(app: FastAPI, directory: Path) -> bool:
    """Serve ``directory`` at ``/ui/`` and send ``/`` there; returns whether the UI is served.

    A missing folder (``ADLREC_SERVICE_WEBAPP_DIR`` naming the wrong one) leaves the API alone and says
    how to point the service at the files.
    """
    if not (directory / "index.html").is_file():
        log.warning("web UI not served: %s has no index.html; set ADLREC_SERVICE_WEBAPP_DIR", directory)
        return False
    app.mount("/ui", _UIFiles(directory=directory, html=True), name="ui")

    @app.get("/", include_in_schema=False)
    def home() -> RedirectResponse:
        return RedirectResponse("/ui/")

    return True
