"""How each operation keeps one subject's tasks from another (GW-EDGE-8): the declaration that owner isolation is
tested against, route by route.

Every operation of the OpenAPI document carries ``x-asya-owner`` (:data:`OWNER_EXTENSION`) naming its kind, and every
JSON-RPC method of ``/mcp`` and ``/a2a`` has one in :data:`MCP_METHOD_OWNERS` and :data:`A2A_METHOD_OWNERS`:

- ``public``: no credentials and no task data (``/health``, ``/openapi.json``, the agent card, the console's files);
- ``task``: acts on the task its path (or params) names; under ``owner_only`` another subject's task is answered as
  an unknown id;
- ``tasks``: the tasks of ``?ids=``; another subject's are ``gone``, and none of the caller's is a 404;
- ``listing``: the caller's tasks only;
- ``create``: the new task is the caller's (its ``owner``);
- ``reporter``: a reporter credential, which carries no subject (GW-EDGE-2);
- ``mesh``: the manifest, the queues or the dead-letter queues: no task's own data;
- ``session``: an MCP session, bound to the subject that opened it (another subject's session id is unknown);
- ``rpc``: a JSON-RPC endpoint whose methods are declared one by one.

A route added without a declaration makes :func:`asya_gateway.openapi.openapi_document` raise, and the isolation test
(``tests/functional/test_owner_isolation.py``) fails for a route of the app that the document does not declare.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

__all__ = [
    "A2A_METHOD_OWNERS",
    "KINDS",
    "MCP_METHOD_OWNERS",
    "OPERATION_OWNERS",
    "OWNER_EXTENSION",
]

OWNER_EXTENSION: Final = "x-asya-owner"
KINDS: Final = frozenset({"public", "task", "tasks", "listing", "create", "reporter", "mesh", "session", "rpc"})

#: ``(path, method)`` of the OpenAPI document -> its kind.
OPERATION_OWNERS: Final[Mapping[tuple[str, str], str]] = {
    ("/api/v1/mesh/", "post"): "create",
    ("/api/v1/mesh/", "get"): "listing",
    ("/api/v1/mesh/{task_id}", "get"): "task",
    ("/api/v1/mesh/{task_id}", "delete"): "task",
    ("/api/v1/mesh/{task_id}/history", "get"): "task",
    ("/api/v1/mesh/{task_id}/retry", "post"): "task",
    ("/api/v1/mesh/{task_id}/resume", "post"): "task",
    ("/api/v1/mesh/{task_id}/signal", "post"): "task",
    ("/api/v1/mesh/events", "get"): "tasks",
    ("/api/v1/mesh/{task_id}/events", "get"): "task",
    ("/api/v1/mesh/{task_id}/events", "post"): "reporter",
    ("/health", "get"): "public",
    ("/openapi.json", "get"): "public",
    ("/api/v1/system/mq-diagnostic", "post"): "mesh",
    ("/api/v1/system/dlq/{actor}/redrive", "post"): "mesh",
    ("/api/v1/system/mesh", "get"): "mesh",
    ("/console", "get"): "public",
    ("/mcp", "post"): "rpc",
    ("/mcp", "delete"): "session",
    ("/a2a/", "post"): "rpc",
    ("/.well-known/agent-card.json", "get"): "public",
    ("/.well-known/agent.json", "get"): "public",
}

#: MCP methods (both protocol eras) -> kind; any other method answers -32601.
MCP_METHOD_OWNERS: Final[Mapping[str, str]] = {
    "initialize": "session",
    "ping": "session",
    "logging/setLevel": "session",
    "tools/list": "mesh",
    # a call re-sent with the id of another subject's call runs as a new task of the caller's (GW-EDGE-7)
    "tools/call": "create",
    "notifications/cancelled": "task",
}

#: A2A methods (0.3 names; the 1.0 names map onto them, ``asya_gateway.a2a.v1``) -> kind.
A2A_METHOD_OWNERS: Final[Mapping[str, str]] = {
    # a message with a taskId continues that task: another subject's is -32001 (GW-EDGE-7)
    "message/send": "task",
    "message/stream": "task",
    "tasks/get": "task",
    "tasks/cancel": "task",
    "tasks/resubscribe": "task",
    "tasks/signal": "task",
}
