"""What ends a wait on a followed task (GW-MCP-8, GW-A2A-8, GW-A2A-11): MCP ``tools/call`` and A2A sends and
streams consume :func:`asya_gateway.follow.follow_task` (which also paces keepalives and ends by the long-response
limit) until the task's terminal event or until it pauses.

A terminal catch-up (``seq`` None) does not end a wait: the follower replays the task's FLY values after it and
then sends the terminal event again.
"""

from __future__ import annotations

from asya_gateway.follow import FollowEvent

__all__ = ["ends_wait", "status_of"]


def status_of(event: FollowEvent) -> str | None:
    """The task status a ``status`` event carries; ``None`` for other events."""
    value = event.data.get("status") if event.name == "status" else None
    return value if isinstance(value, str) else None


def ends_wait(event: FollowEvent) -> bool:
    return event.terminal or status_of(event) == "paused"
