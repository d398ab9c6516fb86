"""API Gateway's stage throttle in front of the local gateway (opt-in: ``LocalMesh(stage_throttle=True)``).

The deployed API throttles every method at the manifest's ``gateway.edge.throttle`` (``rate_limit`` requests per
second, ``burst_limit`` at once) and answers the excess with its ``THROTTLED`` Gateway Response: 429 with
``Retry-After`` and the gateway's error shape (docs/http.md GW-OVL-6). The local mesh serves the gateway app directly,
so without this nothing is ever refused at the edge; with it, a request that finds API Gateway's token bucket
(:class:`asya_local.artifact.edgelimits.TokenBucket`, the artifact mesh's API front's) empty gets that answer before it
reaches the app. The capacity model's calibration (``bench/calibrate.py``) drives the local mesh past it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from asya.manifest import GatewayEdge
from asya_local.artifact.edgelimits import StageThrottle, TokenBucket

__all__ = ["StageThrottleMiddleware"]

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_App = Callable[[_Scope, _Receive, _Send], Awaitable[None]]


class StageThrottleMiddleware:
    """An ASGI app that plays the stage throttle of ``edge`` in front of ``app``; ``throttled`` counts its 429s."""

    def __init__(self, app: _App, edge: GatewayEdge, *, retry_after: int) -> None:
        self._app = app
        throttle = edge.throttle
        self._bucket = TokenBucket(StageThrottle(rate=float(throttle.rate_limit), burst=int(throttle.burst_limit)))
        self._retry_after = retry_after
        self.throttled = 0

    def __getattr__(self, name: str) -> Any:
        # the mesh's dev routes and lifecycle reach through to the app (``state``, ``router``, ...)
        return getattr(self._app, name)

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http" or self._bucket.take():
            await self._app(scope, receive, send)
            return
        self.throttled += 1
        why = f"the mesh is overloaded (API Gateway throttled the request); retry after {self._retry_after} s"
        body = json.dumps({"error": why}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 429,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"retry-after", str(self._retry_after).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
