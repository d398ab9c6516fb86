"""The layer's headers are the layer's (P-HDR-5): a handler's SET or DEL that would add, change or remove one is
refused with ``ValueError`` at the yield and the state is unchanged; ``x-asya-*`` is denied unless allowlisted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from asya.abi import AbiState, Frame, Handler

pytestmark = pytest.mark.unit

FLOW_STATE = {"flow": "f", "pc": 3, "owner": "task-1", "loops": {"7": 2}}


def make_state() -> AbiState:
    return AbiState(
        id="task-1",
        curr="me",
        next=["post"],
        headers={
            "x-asya-flow": "f",
            "x-asya-flow-state": FLOW_STATE,
            "x-asya-hops": 4,
            "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            "mine": 1,
        },
        status={"phase": "processing", "actor": "me"},
    )


def run_commands(*commands: tuple[Any, ...]) -> tuple[list[Any], AbiState, list[Frame]]:
    replies: list[Any] = []
    state = make_state()
    frames: list[Frame] = []

    def handler(payload: Any) -> Iterator[Any]:
        for command in commands:
            try:
                replies.append((yield command))
            except Exception as exc:
                replies.append(exc)
        yield {"done": True}

    Handler(handler).run(None, state, on_frame=frames.append, on_fly=lambda _: None)
    return replies, state, frames


@pytest.mark.parametrize(
    "command",
    [
        ("SET", ".headers.x-asya-flow-state", {"flow": "f", "pc": 99, "owner": "task-1"}),
        ("SET", ".headers.x-asya-flow-state.pc", 99),
        ("SET", ".headers.x-asya-flow-state.loops", {}),
        ("DEL", ".headers.x-asya-flow-state"),
        ("DEL", ".headers.x-asya-flow-state.loops"),
        ("SET", ".headers.x-asya-fan-in", {"origin_id": "other", "index": 0, "count": 1}),
        ("SET", ".headers.x-asya-hops", 0),
        ("DEL", ".headers.x-asya-hops"),
        ("SET", ".headers.x-asya-history-prev", "history/x.jsonl"),
        ("SET", ".headers.x-asya-mesh-status", "off"),
        ("SET", ".headers.x-asya-flow", "other"),
        ("SET", ".headers.x-asya-added-later", 1),  # denied by default: headers added later are covered
        ("SET", ".headers.traceparent", "00-ffffffffffffffffffffffffffffffff-b7ad6b7169203331-01"),
        ("DEL", ".headers.tracestate"),
        ("SET", '.headers["x-asya-flow-state"]', {}),
        ("SET", ".headers", {"mine": 2}),  # drops the layer's headers
        ("SET", ".headers", {**make_state().headers, "x-asya-hops": 0}),
        ("DEL", ".headers"),
    ],
)
def test_p_hdr_5_a_write_of_a_layer_header_is_refused_at_the_yield(command: tuple[Any, ...]) -> None:
    replies, state, frames = run_commands(command)
    assert type(replies[0]) is ValueError, replies[0]
    assert "P-HDR-5" in str(replies[0])
    assert state.headers == make_state().headers
    assert frames[0].headers["x-asya-flow-state"] == FLOW_STATE


@pytest.mark.parametrize(
    "command",
    [
        ("SET", ".headers.x-asya-route-override", {"analyze": "analyze-v2"}),
        ("SET", ".headers.x-asya-pause", {"prompt": "ok?"}),  # a dynamic pause (P-ABI-15)
        ("DEL", ".headers.x-asya-pause"),
        ("SET", ".headers.mine", 2),
        ("SET", ".headers.X-Asya-Flow-State", {}),  # names are matched exactly (P-HDR-2): not the layer's header
        ("DEL", ".headers.mine"),
        ("SET", ".headers", {**make_state().headers, "mine": 2, "x-asya-pause": {"prompt": "?"}}),
    ],
)
def test_p_hdr_5_the_allowlist_and_the_handlers_own_headers_stay_writable(command: tuple[Any, ...]) -> None:
    if command == ("DEL", ".headers.x-asya-pause"):
        replies, state, _ = run_commands(("SET", ".headers.x-asya-pause", {"prompt": "?"}), command)
        assert replies == [None, None]
        assert "x-asya-pause" not in state.headers
        return
    replies, state, _ = run_commands(command)
    assert replies == [None]
    assert state.headers["x-asya-flow-state"] == FLOW_STATE
