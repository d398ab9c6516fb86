"""The web console's static assets, served by the gateway itself at ``/console/`` (no build step, no CDN).

The console is four files shipped inside this package (``asya_gateway/console/``): ``index.html``, ``console.css``,
``console.js`` (an ES module) and ``flowgraph.js`` (the module it imports to draw flows). Only those names are
served, each with a fixed content type; any other path under ``/console/`` answers 404 ``{"error": "not found"}``,
and a method other than GET or HEAD answers 405 (GW-GEN-3). ``GET /console`` redirects to ``/console/`` so relative
asset URLs resolve, locally and behind API Gateway's stage prefix alike.

Auth: the assets hold no data, so they are public like ``/health`` (GW-AUTH-2); every call the page makes goes to the
API routes with the user's credentials (``X-API-Key`` under ``api_key``), so the console never weakens the API's
auth. Every answer carries a Content-Security-Policy that allows scripts, styles and connections to this origin only
(``script-src 'self'``, no inline script), so markup that slipped into a page through task data could not run.

Files are read on first request and kept in memory (a few tens of KB); nothing is read at import time.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from importlib import resources
from typing import Final

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import Receive, Scope, Send

from asya import publicroutes

__all__ = ["CONSOLE_PATH", "ConsoleAssets", "console_redirect", "is_console_path"]

CONSOLE_PATH: Final = publicroutes.CONSOLE_PATH
_PACKAGE: Final = "asya_gateway"
_FOLDER: Final = "console"
_ASSETS: Final = {
    "index.html": "text/html; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "flowgraph.js": "text/javascript; charset=utf-8",
}
_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
_HEADERS: Final = {
    "Content-Security-Policy": _CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # revalidated on each load (ETag), so a redeployed gateway never serves a stale console
    "Cache-Control": "no-cache",
}


def is_console_path(path: str) -> bool:
    """True for ``/console`` and every path below it: the public, data-free assets."""
    return path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/")


async def console_redirect(request: Request) -> Response:
    """``GET /console`` -> ``/console/``, relative to the request path so an API Gateway stage prefix is kept."""
    return RedirectResponse("console/", status_code=307)


@dataclass(frozen=True)
class _Asset:
    body: bytes
    content_type: str
    etag: str


class ConsoleAssets:
    """The ASGI app mounted at ``/console``: serves the allow-listed files of the package's ``console`` folder."""

    def __init__(self) -> None:
        self._cache: dict[str, _Asset] = {}
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        assert scope["type"] == "http"
        request = Request(scope)
        name = scope["path"].rpartition(CONSOLE_PATH + "/")[2] or "index.html"
        response: Response
        if request.method not in ("GET", "HEAD"):
            response = JSONResponse({"error": "method not allowed"}, status_code=405, headers={"Allow": "GET, HEAD"})
        elif name not in _ASSETS:
            response = JSONResponse({"error": "not found"}, status_code=404)
        else:
            asset = self._asset(name)
            if request.headers.get("if-none-match") == asset.etag:
                response = Response(status_code=304, headers={**_HEADERS, "ETag": asset.etag})
            else:
                response = Response(asset.body, media_type=asset.content_type, headers={**_HEADERS, "ETag": asset.etag})
        await response(scope, receive, send)

    def _asset(self, name: str) -> _Asset:
        with self._lock:
            cached = self._cache.get(name)
            if cached is None:
                body = resources.files(_PACKAGE).joinpath(_FOLDER).joinpath(name).read_bytes()
                etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
                cached = self._cache[name] = _Asset(body, _ASSETS[name], etag)
            return cached
