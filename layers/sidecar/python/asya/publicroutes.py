"""The gateway's public routes (GW-AUTH-2) and its producer route (GW-EVT-1), declared once: the app's
authentication (``asya_gateway.auth``) and the API's methods (``asya_cdk.gateway``, GW-EDGE-1) both read them.

- :data:`PUBLIC_PATHS`: ``GET`` without credentials, in every mode.
- :data:`CONSOLE_PATH` and everything below it: the web console's static assets, data-free, public too.
- :data:`PRODUCER_ROUTE`: the reporters' route; it takes ``X-Asya-Reporter-Key`` (:data:`REPORTER_KEY_HEADER`),
  never a client's credential.
"""

from __future__ import annotations

from typing import Final

__all__ = ["CONSOLE_PATH", "PRODUCER_ROUTE", "PUBLIC_PATHS", "REPORTER_KEY_HEADER", "is_public_path"]

PUBLIC_PATHS: Final = ("/health", "/openapi.json", "/.well-known/agent.json", "/.well-known/agent-card.json")
CONSOLE_PATH: Final = "/console"
#: (method, API Gateway resource path)
PRODUCER_ROUTE: Final = ("POST", "/api/v1/mesh/{task_id}/events")
REPORTER_KEY_HEADER: Final = "X-Asya-Reporter-Key"


def is_public_path(path: str) -> bool:
    """A public route's path, the console folder or a path below it."""
    return path in PUBLIC_PATHS or path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/")
