"""Checkpoint dates and lines (P-CKPT-1, P-CKPT-3); keys and objects are tested on moto in test_sink/test_sump."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from asya.envelope import Envelope, parse_envelope
from asya_crew.checkpoint import CheckpointEntry, CheckpointLine, CheckpointWriter, checkpoint_day, checkpoint_text

pytestmark = pytest.mark.unit

NOW = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)


def _env(status: dict[str, object], payload: Any = None) -> Envelope:
    return parse_envelope(
        {"id": "t1", "route": {"prev": [], "curr": "", "next": []}, "status": status, "payload": payload, "headers": {}}
    )


def test_p_ckpt_1_date_of_updated_at_in_utc() -> None:
    assert checkpoint_day(_env({"phase": "failed", "updated_at": "2026-03-01T23:30:00-02:00"}), now=NOW) == "2026-03-02"


@pytest.mark.parametrize("updated_at", [None, "yesterday"])
def test_p_ckpt_1_now_when_updated_at_is_absent_or_unreadable(updated_at: str | None) -> None:
    status: dict[str, object] = {"phase": "succeeded"}
    if updated_at is not None:
        status["updated_at"] = updated_at
    assert checkpoint_day(_env(status), now=NOW) == "2026-03-05"


def test_p_ckpt_3_a_line_is_one_line_whatever_the_payload_holds() -> None:
    """Newlines are escaped by JSON; U+2028/U+2029 are escaped too, so every JSON Lines reader (also Python's
    ``splitlines``) sees one line, and the line parses back to the same envelope."""
    payload = {"text": "a\nb\r\nc\u2028d\u2029e\u0085f", "emoji": "✓"}
    env = _env({"phase": "succeeded"}, payload)
    line = checkpoint_text(env)
    assert len(line.splitlines()) == 1 and "\n" not in line
    assert json.loads(line) == env.to_dict()
    assert "✓" in line, "UTF-8 as every sender writes it, not ASCII escapes"


def test_p_sink_5_the_checkpointed_header_names_key_and_line() -> None:
    assert CheckpointLine("failed/2026-03-05/k.jsonl", 3).header() == {"key": "failed/2026-03-05/k.jsonl", "line": 3}


def test_p_ckpt_1_only_final_phases_are_checkpointed() -> None:
    def no_s3() -> Any:
        raise AssertionError("no PUT for a refused entry")

    writer = CheckpointWriter(bucket="b", s3=no_s3, clock=lambda: NOW)
    with pytest.raises(ValueError, match=r"phase: .* got 'paused'"):
        writer.write([CheckpointEntry("m1", "paused", _env({"phase": "paused"}))])
