"""P-HIST-8: the flow state a retry from a recorded step starts with is bound to the new task (owner, saved
deadlines) and keeps what the step had reached (position, loop counters, try stack, program digest)."""

from __future__ import annotations

import pytest

from asya.flows import FlowError, FlowState

pytestmark = pytest.mark.unit

_DIGEST = "ab" * 32


def test_a_replayed_state_is_owned_by_the_new_task_and_keeps_the_steps_progress() -> None:
    recorded = FlowState.from_header(
        {
            "flow": "document",
            "pc": 10,
            "owner": "old-task",
            "digest": _DIGEST,
            "loops": {"2": 1},
            "try": [[8, 1]],
            "deadlines": ["2026-01-01T00:10:00Z"],
        }
    )
    replayed = recorded.replayed("new-task", "2026-12-07T19:00:00Z").to_header()
    assert replayed == {
        "flow": "document",
        "pc": 10,
        "owner": "new-task",
        "digest": _DIGEST,
        "loops": {"2": 1},
        "try": [[8, 1]],
        "deadlines": ["2026-12-07T19:00:00Z"],
    }


def test_a_replay_without_a_deadline_restores_none_after_a_timeout_block() -> None:
    recorded = FlowState(flow="f", pc=3, owner="old", deadlines=("2026-01-01T00:10:00Z", None))
    assert recorded.replayed("new", None).deadlines == (None, None)


def test_a_state_without_saved_deadlines_gains_none() -> None:
    assert "deadlines" not in FlowState(flow="f", pc=1, owner="old").replayed("new", "2026-12-07T19:00:00Z").to_header()


def test_a_malformed_recorded_state_is_a_flow_error() -> None:
    with pytest.raises(FlowError, match="x-asya-flow-state is malformed"):
        FlowState.from_header({"flow": "f", "pc": "x"})
