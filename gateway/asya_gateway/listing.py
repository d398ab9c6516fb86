"""Query of ``GET /api/v1/mesh/`` (GW-LIST-1): strings to the arguments of ``TaskStore.list_tasks``.

This module checks what only the HTTP layer sees (integers written as text, ``count`` spelled ``true``/``false``, a flow
name's syntax, and that the manifest declares the flow: GW-LIST-6); ranges, statuses, cursors and ``cursor`` with
``offset`` are checked by the store, whose ``ListQueryError`` names the parameter too. Empty values count as absent;
unknown parameters are ignored.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from asya import naming
from asya_gateway.errors import HttpError
from asya_gateway.validation import parse_non_negative_int

__all__ = ["parse_list_query"]


def _integer(query: Mapping[str, str], name: str, hint: str) -> int | None:
    raw = query.get(name) or None
    if raw is None:
        return None
    value = parse_non_negative_int(raw)
    if value is None:
        raise HttpError(400, f"{name}: invalid value {raw[:40]!r}: {hint}")
    return value


def parse_list_query(query: Mapping[str, str], *, flows: Collection[str]) -> dict[str, Any]:
    """``flows``: the manifest's flows, the only names ``flow`` may filter by (GW-LIST-6)."""
    kwargs: dict[str, Any] = {}
    status = query.get("status") or None
    if status is not None:
        kwargs["status"] = status
    flow = query.get("flow") or None
    if flow is not None:
        if naming.FLOW_NAME_RE.match(flow) is None:
            raise HttpError(400, f"flow: invalid value {flow!r}: not a flow name")
        if flow not in flows:  # no task can match: answered now rather than after scanning every index page
            raise HttpError(400, f"flow: unknown flow {flow!r} (flows: {', '.join(sorted(flows)) or 'none declared'})")
        kwargs["flow"] = flow
    limit = _integer(query, "limit", "use an integer between 1 and 100")
    if limit is not None:
        kwargs["limit"] = limit
    offset = _integer(query, "offset", "use an integer between 0 and 10000")
    if offset is not None:
        kwargs["offset"] = offset
    cursor = query.get("cursor") or None
    if cursor is not None:
        kwargs["cursor"] = cursor
    count = query.get("count") or None
    if count is not None:
        if count not in ("true", "false"):
            raise HttpError(400, f"count: invalid value {count!r}: use true or false")
        kwargs["count"] = count == "true"
    return kwargs
