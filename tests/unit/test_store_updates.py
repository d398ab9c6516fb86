"""The status-update ``UpdateItem`` requests (asya.store.updates, P-STAT-3, GW-DATA-3/4): cached expression texts
never leak state between calls, and every placeholder used is defined."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest

from asya.store.transition import StatusUpdate, StoredState
from asya.store.updates import attach_checkpoint, blind_update, exact_update

pytestmark = pytest.mark.unit

NOW = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)

UPDATES = [
    StatusUpdate(status="running", step="processing", actor="a", progress=40.0, data={"curr": "a"}),
    StatusUpdate(status="running", step="received", actor="a"),
    StatusUpdate(status="running"),
    StatusUpdate(status="running", progress=10.0),
    StatusUpdate(status="running", resume=True, deadline_at="2026-03-02T00:00:00Z"),
    StatusUpdate(status="paused", pause_metadata={"prompt": "ok?"}, remaining_seconds=30),
    StatusUpdate(status="succeeded", checkpoint_key="succeeded/t.json"),
    StatusUpdate(status="failed", error="boom", failed_actor="a", if_deadline_at="2026-03-01T11:00:00Z"),
]


def _request(update: StatusUpdate) -> dict[str, Any]:
    return blind_update(update, task_id="t", now=NOW, now_ms="2026-03-01T10:00:00.000Z", day="2026-03-01").request(
        "tbl", "t"
    )


def _placeholders(request: dict[str, Any]) -> tuple[set[str], set[str]]:
    text = request["UpdateExpression"] + " " + request["ConditionExpression"]
    return set(re.findall(r"#\w+", text)), set(re.findall(r":\w+", text))


@pytest.mark.parametrize("update", UPDATES, ids=lambda u: f"{u.status}-{u.step}-{u.progress}-{u.resume}")
def test_p_stat_3_every_placeholder_is_defined_and_used(update: StatusUpdate) -> None:
    request = _request(update)
    names, values = _placeholders(request)
    assert names == set(request["ExpressionAttributeNames"])
    assert values == set(request["ExpressionAttributeValues"])
    assert all(request["ExpressionAttributeNames"][n] == n[1:] for n in names)


def test_p_stat_3_running_condition_text_matches_the_update_members() -> None:
    full = _request(UPDATES[0])["ConditionExpression"]
    assert full == (
        "(attribute_exists(#pk)) AND (begins_with(#created_at, :day)) AND (#status_order < :one_order OR "
        "(#status = :running AND #progress_percent <= :p AND "
        "NOT (#current_actor = :actor AND #step = :step AND #progress_percent = :p)))"
    )
    bare = _request(UPDATES[2])
    assert bare["ConditionExpression"].endswith("(#status_order < :one_order)")
    assert ":running" not in bare["ExpressionAttributeValues"]


def test_p_stat_3_requests_share_no_mutable_state_between_calls() -> None:
    """The cached texts are strings; names and values are built per call, so one request's dicts are its own."""
    first = _request(UPDATES[0])
    first["ExpressionAttributeNames"]["#status"] = "tampered"
    first["ExpressionAttributeValues"][":status"]["S"] = "tampered"
    again = _request(UPDATES[0])
    assert again["ExpressionAttributeNames"]["#status"] == "status"
    assert again["ExpressionAttributeValues"][":status"] == {"S": "running"}
    other = _request(StatusUpdate(status="running", step="processing", actor="b", progress=60.0))
    assert other["ExpressionAttributeValues"][":actor"] == {"S": "b"}
    assert other["ExpressionAttributeValues"][":p"] == {"N": "60"}
    assert other["UpdateExpression"] == again["UpdateExpression"]


def test_p_stat_3_exact_and_attach_requests_define_their_placeholders() -> None:
    stored = StoredState(status="running", created_at="2026-03-01T09:00:00Z", last_seq=4)
    for request in (
        exact_update(UPDATES[0], stored, task_id="t", now=NOW, now_ms="x", progress=50.0).request("tbl", "t"),
        attach_checkpoint("succeeded/t.json").request("tbl", "t"),
    ):
        names, values = _placeholders(request)
        assert names == set(request["ExpressionAttributeNames"])
        assert values == set(request["ExpressionAttributeValues"])
