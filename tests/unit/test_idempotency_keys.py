"""Hop identity for duplicate suppression (PROTOCOL P-ACK-8, P-FAN-2, P-PROC-4; GATEWAY GW-DATA-2): pure functions."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from asya import routing, tableschema
from asya.envelope import parse_envelope
from asya.idempotency import CLAIMED, SENT, HopKey, Idempotency

pytestmark = pytest.mark.unit

TASK = "5b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10"
RAW: dict[str, Any] = {
    "id": TASK,
    "route": {"prev": ["normalize"], "curr": "split", "next": ["embed"]},
    "status": {"phase": "pending", "actor": "split", "attempt": 1, "max_attempts": 1},
    "payload": {"text": "hello"},
}


def _entry(raw: dict[str, Any], actor: str = "split") -> Any:
    return routing.entry_update(parse_envelope(raw), actor, "2026-03-01T10:00:04Z")


def test_gw_data_2_idempotency_key_layout() -> None:
    assert tableschema.idempotency_pk("abc", "split", 1, 2) == "IDEM#abc#split#1#2"
    assert tableschema.idempotency_sk(0) == "FRAME#0"
    assert tableschema.IDEMPOTENCY_RETENTION_DAYS == 15
    key = HopKey.of(parse_envelope(RAW), "split")
    assert key == HopKey(TASK, "split", 1, 1)
    assert key.frame_key(3) == {"pk": {"S": f"IDEM#{TASK}#split#1#1"}, "sk": {"S": "FRAME#3"}}


def test_p_proc_4_the_key_holds_the_attempt_the_actor_runs() -> None:
    retrying = {**RAW, "status": {"phase": "retrying", "actor": "split", "attempt": 3, "max_attempts": 5}}
    assert HopKey.of(parse_envelope(retrying), "split").attempt == 3
    assert _entry(retrying).status.attempt == 3
    # another actor's retrying status starts over at attempt 1
    assert HopKey.of(parse_envelope(retrying), "embed").attempt == 1


def test_p_fan_2_child_ids_are_uuid4_shaped_and_repeat_for_the_same_hop() -> None:
    entry = _entry(RAW)
    ids = [routing.frame_identity(entry, k)[0] for k in range(4)]
    assert ids[0] == TASK
    for child in ids[1:]:
        parsed = uuid.UUID(child)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and child == str(parsed)
    assert len(set(ids)) == 4
    assert [routing.frame_identity(_entry(RAW), k)[0] for k in range(4)] == ids, "a redelivery repeats them"


@pytest.mark.parametrize(
    "change",
    [
        {"id": "another-task"},
        {"route": {"prev": ["normalize", "split"], "curr": "split", "next": []}},
        {"status": {"phase": "retrying", "actor": "split", "attempt": 2, "max_attempts": 3}},
    ],
    ids=["id", "hop", "attempt"],
)
def test_p_fan_2_child_ids_differ_between_hops(change: dict[str, Any]) -> None:
    assert routing.child_id(_entry({**RAW, **change}), 1) != routing.child_id(_entry(RAW), 1)
    assert routing.child_id(_entry(RAW, actor="other"), 1) != routing.child_id(_entry(RAW), 1)


def test_first_frames_maps_preflight_items_and_repeats_in_a_batch() -> None:
    a, b, c = HopKey("a", "x", 0, 1), HopKey("b", "x", 0, 1), HopKey("c", "x", 0, 1)
    found = [
        {"pk": {"S": a.pk}, "sk": {"S": "FRAME#0"}, "state": {"S": SENT}},
        {"pk": {"S": b.pk}, "sk": {"S": "FRAME#0"}, "state": {"S": CLAIMED}},
        {"pk": {"S": "TASK#a"}, "sk": {"S": "TASK"}, "id": {"S": "a"}},
    ]
    assert Idempotency.first_frames([a, b, c, c], found) == [SENT, CLAIMED, None, CLAIMED]
    assert Idempotency.preflight_keys([a]) == [a.frame_key(0)]
