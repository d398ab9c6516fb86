"""``asya history``'s text: one block per step, a fan-out child's steps one level under the step that forked it."""

from __future__ import annotations

import pytest

from asya_local.tasks_cli import render_history

pytestmark = pytest.mark.unit


def _step(actor: str, envelope: str, outputs: list[tuple[str, str, object]], **extra: object) -> dict[str, object]:
    return {
        "actor": actor,
        "attempt": 1,
        "envelope_id": envelope,
        "started_at": "T",
        "duration_ms": 1.5,
        "input": {"in": actor},
        "outputs": [{"actor": a, "envelope_id": e, "payload": p} for a, e, p in outputs],
        "error": None,
        **extra,
    }


def test_children_are_indented_under_their_fork_and_errors_shown() -> None:
    history = {
        "id": "t",
        "truncated": True,
        "steps": [
            _step("split", "t", [("echo", "t", {"n": 0}), ("echo", "c", {"n": 1})]),
            _step("echo", "t", [("x-sink", "t", {"n": 0})]),
            _step("echo", "c", [("x-sink", "c", {"n": 1})], parent_id="t", error="ValueError: no"),
            _step("x-sink", "c", []),
        ],
    }
    assert render_history(history) == [
        "T  split  attempt 1  1.5 ms  envelope t",
        '  in:  {"in": "split"}',
        '  out: -> echo  {"n": 0}',
        '  out: -> echo  {"n": 1}',
        "T  echo  attempt 1  1.5 ms  envelope t",
        '  in:  {"in": "echo"}',
        '  out: -> x-sink  {"n": 0}',
        "  T  echo  attempt 1  1.5 ms  envelope c",
        '    in:  {"in": "echo"}',
        '    out: -> x-sink  {"n": 1}',
        "    error: ValueError: no",
        "  T  x-sink  attempt 1  1.5 ms  envelope c",
        '    in:  {"in": "x-sink"}',
        "(older steps of this task were dropped: the history keeps the latest ones)",
    ]
