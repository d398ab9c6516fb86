"""``asya_gateway.waiting``: an MCP or A2A wait ends at the terminal event or a pause, not at a terminal catch-up
(the follower replays the FLY values after it) (GW-MCP-8, GW-A2A-8, GW-A2A-11)."""

from __future__ import annotations

import pytest

from asya_gateway.follow import KEEPALIVE, FollowEvent
from asya_gateway.waiting import ends_wait, status_of

pytestmark = pytest.mark.unit


def test_a_wait_ends_at_the_terminal_event_or_a_pause() -> None:
    assert ends_wait(FollowEvent("status", 7, {"status": "succeeded"}))
    assert ends_wait(FollowEvent("status", 5, {"status": "paused"}))
    assert ends_wait(FollowEvent("status", None, {"status": "paused"}))  # a task paused before the wait began
    assert not ends_wait(FollowEvent("status", None, {"status": "failed"}))  # the replay and the terminal follow
    assert not ends_wait(FollowEvent("status", 3, {"status": "running"}))
    assert not ends_wait(FollowEvent("fly", 4, {"payload": "x", "status": "succeeded"}))
    assert not ends_wait(KEEPALIVE)
    assert status_of(FollowEvent("status", 3, {"status": "running"})) == "running"
    assert status_of(FollowEvent("fly", 4, {"status": "running"})) is None
