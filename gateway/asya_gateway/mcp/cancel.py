"""Canceling a handshake-era ``tools/call`` by ``notifications/cancelled`` (MCP cancellation, GW-CANCEL-1).

An MCP client that gives up on a call (the caller's cancellation, or its own request timeout) sends
``notifications/cancelled {"requestId": <id>, "reason"?}`` with its ``Mcp-Session-Id``. In a stateless deployment
that POST may reach another gateway instance than the call's, so the request id -> task id mapping must survive
without process memory. It is derived, not stored: the task of a ``tools/call`` with request id ``R`` in session
``S`` is :func:`call_task_id` ``(S, R)``, a UUID (version 4 layout) made of the first 16 bytes of
``SHA-256(S "\\n" JSON(R))``. The session id is a random UUID4 known only to its client and the table, so the task id
is as unguessable as a fresh UUID4 and no caller without the session can name it; the notification recomputes it
and cancels the task as ``DELETE /api/v1/mesh/{id}`` does (``TaskStore.cancel``). This costs no write per call (a
mapping item would cost one), and one conditional update per cancel.

A cancel that names no task (an id that was not a ``tools/call``, a call whose task is not created yet, or one that
was answered already and is terminal) changes nothing: MCP lets a receiver ignore such a notification. Under
``owner_only`` the task is read first and another subject's task is one that does not exist (GW-EDGE-7). MCP
forbids reusing a request id within a session; a call that does gets a fresh task id (``asya_gateway.mcp.calls``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Mapping
from typing import Any

from asya_gateway.context import GatewayContext
from asya_gateway.principal import is_visible, owner_checks

__all__ = ["call_task_id", "cancel_call"]

_log = logging.getLogger("asya_gateway.mcp")


def call_task_id(session_id: str, request_id: str | int) -> str:
    """The task id of the ``tools/call`` ``request_id`` in ``session_id`` (``1`` and ``"1"`` differ)."""
    digest = hashlib.sha256(f"{session_id}\n{json.dumps(request_id)}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


async def cancel_call(ctx: GatewayContext, session_id: str, params: Mapping[str, Any]) -> None:
    """Cancel the task of the call ``params["requestId"]`` names; a malformed notification is ignored (logged)."""
    request_id = params.get("requestId")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        _log.warning("notifications/cancelled ignored: requestId must be a string or an integer, got %r", request_id)
        return
    task_id = call_task_id(session_id, request_id)
    auth = ctx.manifest.gateway.auth
    if owner_checks(auth):
        view = await ctx.call(ctx.store.get_task, task_id, enforce_deadline=False)
        if view is None or not is_visible(auth, view):
            _log.info("notifications/cancelled for request %r: no task of the caller (task %s)", request_id, task_id)
            return
    outcome = await ctx.call(ctx.store.cancel, task_id)
    _log.info(
        "notifications/cancelled for request %r (task %s, reason %r): %s",
        request_id,
        task_id,
        params.get("reason"),
        outcome,
    )
