"""Input and result kept on the task item (GATEWAY GW-DATA-8 (R3), docs/protocol.md GW-DATA-8-R3).

A task whose input fits keeps it on the task item (no body item); a succeeded task whose result fits keeps it on its
terminal update (no result item). Every reader sees the same values either way, and the task item stays under 1 KB
at every write of the success path when both values are at their limits, so the claims and the terminal write each
bill 1 unit.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from asya.store import StatusUpdate, TaskStore
from asya.store import records as rec
from asya.store.inline import CREATED_ROOM, RESULT_ROOM, TASK_ITEM_LIMIT, attribute_size, item_size
from bench.units import item_size as billed_size
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

START = datetime(2026, 3, 1, 10, 0, 0, 120_000, tzinfo=UTC)
ROUTE = ["normalize", "analyze", "summarize"]


@pytest.fixture
def store(mesh: Any) -> TaskStore:
    store: TaskStore = mesh.store(ManualClock(START))
    return store


def _item(mesh: Any, task_id: str, sk: str = rec.TASK_SK) -> dict[str, Any] | None:
    found: dict[str, Any] | None = mesh.aws.dynamodb.get_item(
        TableName=mesh.resources.table, Key=rec.key(task_id, sk), ConsistentRead=True
    ).get("Item")
    return found


def _create(store: TaskStore, payload: Any) -> str:
    task_id = str(uuid.uuid4())
    store.create_task(
        task_id=task_id, actor=ROUTE[0], flow="text-pipeline", payload=payload, deadline_at="2026-03-01T10:05:00Z"
    )
    return task_id


def _largest_payload(store: TaskStore, mesh: Any) -> dict[str, str]:
    """The largest ``{"text": ...}`` input that still stays on the task item."""
    probe = _create(store, {"text": ""})
    size = item_size(_item(mesh, probe) or {})
    return {"text": "x" * (CREATED_ROOM - size)}


def _result_at_limit() -> dict[str, str]:
    text_room = RESULT_ROOM - attribute_size("result", '{"summary":""}')
    return {"summary": "y" * text_room}


def _succeed(store: TaskStore, task_id: str, result: Any) -> None:
    store.report_final(
        task_id,
        status="succeeded",
        result=result,
        checkpoint_key=f"succeeded/2026-03-01/{uuid.uuid4()}.jsonl",
        checkpoint_line=1000,
        envelope_id=task_id,
        created_at="2026-03-01T10:00:00.120Z",
        writer_id=str(uuid.uuid4()),
    )


def test_gw_data_8_r3_item_size_counts_like_dynamodb_bills() -> None:
    item: dict[str, dict[str, Any]] = {
        "pk": {"S": "TASK#é"},
        "n": {"N": "-123.4500"},
        "e": {"N": "1.5E+10"},
        "b": {"BOOL": True},
        "z": {"NULL": True},
        "m": {"M": {"k": {"S": "v"}, "l": {"L": [{"N": "7"}]}}},
    }
    assert item_size(item) == billed_size(item)


def test_gw_data_8_r3_an_input_that_fits_stays_on_the_task_item(store: TaskStore, mesh: Any) -> None:
    payload = _largest_payload(store, mesh)
    task_id = _create(store, payload)
    item = _item(mesh, task_id)
    assert item is not None and item_size(item) == CREATED_ROOM
    assert rec.get_str(item, "payload") is not None
    assert _item(mesh, task_id, rec.BODY_SK) is None, "no body item for an input that fits"
    view = store.get_task(task_id)
    assert view is not None and view["payload"] == payload


def test_gw_data_8_r3_a_larger_input_keeps_its_body_item(store: TaskStore, mesh: Any) -> None:
    payload = _largest_payload(store, mesh)
    payload["text"] += "x"
    task_id = _create(store, payload)
    item = _item(mesh, task_id)
    assert item is not None and "payload" not in item
    assert _item(mesh, task_id, rec.BODY_SK) is not None
    view = store.get_task(task_id)
    assert view is not None and view["payload"] == payload


def test_gw_data_8_r3_a_result_that_fits_rides_on_the_terminal_update(store: TaskStore, mesh: Any) -> None:
    task_id = _create(store, {"text": "hi"})
    result = _result_at_limit()
    _succeed(store, task_id, result)
    item = _item(mesh, task_id)
    assert item is not None and rec.get_str(item, "result") is not None and "has_result" not in item
    assert _item(mesh, task_id, rec.RESULT_SK) is None, "no result item for a result that fits"
    view = store.get_task(task_id)
    assert view is not None and view["result"] == result and view["data"]["result"] == result
    snap = store.snapshot(task_id, 0)
    assert snap is not None and snap.data["result"] == result, "a follower's terminal event carries it (GW-SSE)"


def test_gw_data_8_r3_a_larger_result_keeps_its_result_item(store: TaskStore, mesh: Any) -> None:
    task_id = _create(store, {"text": "hi"})
    result = _result_at_limit()
    result["summary"] += "y"
    _succeed(store, task_id, result)
    item = _item(mesh, task_id)
    assert item is not None and "result" not in item and item.get("has_result") == {"BOOL": True}
    assert _item(mesh, task_id, rec.RESULT_SK) is not None
    view = store.get_task(task_id)
    assert view is not None and view["result"] == result


def test_gw_data_8_r3_every_write_stays_under_1_kb_with_both_values_at_their_limits(
    store: TaskStore, mesh: Any
) -> None:
    """The claims update an item that holds the input, the terminal write one that then also holds the result:
    each is billed on the larger item, so each must stay under 1 KB for 1 unit (P-ACK-8: one unit per claim)."""
    payload = _largest_payload(store, mesh)
    task_id = _create(store, payload)
    sizes = [item_size(_item(mesh, task_id) or {})]
    for k, actor in enumerate(ROUTE, start=1):
        outcome = store.running(
            task_id,
            step="processing",
            actor=actor,
            route_prev=ROUTE[: k - 1],
            route_curr=actor,
            route_next=[*ROUTE[k:], "x-sink"],
            envelope_id=task_id,
            created_at="2026-03-01T10:00:00.120Z",
            detailed=False,
            claim=(k, 1, 1_900_000_000_000),
        )
        assert outcome.accepted, (actor, outcome)
        sizes.append(item_size(_item(mesh, task_id) or {}))
    result = _result_at_limit()
    _succeed(store, task_id, result)
    final = _item(mesh, task_id) or {}
    sizes.append(item_size(final))
    assert rec.get_str(final, "result") is not None and rec.get_str(final, "payload") is not None
    assert max(sizes) <= TASK_ITEM_LIMIT, sizes
    view = store.get_task(task_id)
    assert view is not None and (view["payload"], view["result"]) == (payload, result)


def test_gw_data_8_r3_a_resumed_or_retried_reader_gets_the_inline_input(store: TaskStore, mesh: Any) -> None:
    """Readers other than the view (x-resume, retry, MCP/A2A results) go through ``get_task``: the input is there
    whichever item holds it; a failed task's inline input and its error details (result item) both show."""
    task_id = _create(store, {"text": "hello"})
    store.apply(
        task_id,
        StatusUpdate(status="failed", error="boom", error_details={"message": "boom"}, writer_id="w-1"),
    )
    view = store.get_task(task_id)
    assert view is not None
    assert view["payload"] == {"text": "hello"}
    assert view["error_details"] == {"message": "boom"}
