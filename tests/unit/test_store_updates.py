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
    StatusUpdate(status="canceled"),
    StatusUpdate(status="running", step="processing", actor="a", claim=(2, 1, 1_772_359_300_000)),
    StatusUpdate(status="running", step="retrying", actor="a", data={"attempt": 2}, refence=(2, 1)),
]
CLAIM, REFENCE = UPDATES[-2], UPDATES[-1]


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
        "(attribute_exists(#pk)) AND (#status_order < :one_order OR "
        "(#status = :running AND #progress_percent <= :p AND "
        "NOT (#current_actor = :actor AND #step = :step AND #progress_percent = :p)))"
    )
    bare = _request(UPDATES[2])
    assert bare["ConditionExpression"].endswith("(#status_order < :one_order)")
    assert ":running" not in bare["ExpressionAttributeValues"]


@pytest.mark.parametrize("update", UPDATES, ids=lambda u: f"{u.status}-{u.step}-{u.progress}-{u.resume}")
def test_gw_data_2_only_outcome_writes_check_the_creation_day_and_set_the_by_outcome_key(update: StatusUpdate) -> None:
    """R2: the only index key a status write sets is ``by_outcome``'s ``gsi2pk``, at a failed or canceled terminal
    write; its creation day is guessed and checked with ``begins_with``. No other write touches an index key."""
    request = _request(update)
    outcome = update.status in ("failed", "canceled")
    assert ("begins_with(#created_at, :day)" in request["ConditionExpression"]) is outcome
    assert ("#gsi2pk = :gsi2pk" in request["UpdateExpression"]) is outcome
    if outcome:
        # the key ends with the shard of the id "t" (GW-DATA-2)
        assert request["ExpressionAttributeValues"][":gsi2pk"] == {"S": f"OUTCOME#{update.status}#2026-03-01#3"}
    assert "#gsi1pk" not in request["ExpressionAttributeNames"]
    assert "#gsi1sk" not in request["ExpressionAttributeNames"]


def test_p_ack_8_the_claim_is_the_running_status_with_the_fence_and_the_lease_in_one_write() -> None:
    """The claim's condition: a pending or running task (status order at most running), and no fence, a lower one,
    or an equal one whose lease has passed; the same write stores the fence, the lease and the running status."""
    request = _request(CLAIM)
    values = request["ExpressionAttributeValues"]
    assert request["ConditionExpression"] == (
        "(attribute_exists(#pk)) AND (#status_order <= :one_order) AND "
        "(attribute_not_exists(#fence_h) OR #fence_h < :fh OR (#fence_h = :fh AND #fence_a < :fa)"
        " OR (#fence_h = :fh AND #fence_a = :fa AND #lease_until < :now_ms))"
    )
    assert (values[":fh"], values[":fa"]) == ({"N": "2"}, {"N": "1"})
    assert values[":now_ms"] == {"N": str(int(NOW.timestamp() * 1000))}
    update = request["UpdateExpression"]
    for clause in ("#fence_h = :fence_h", "#fence_a = :fence_a", "#lease_until = :lease_until", "#status = :status"):
        assert clause in update
    assert (values[":fence_h"], values[":fence_a"], values[":lease_until"]) == (
        {"N": "2"},
        {"N": "1"},
        {"N": "1772359300000"},
    )
    assert (values[":status"], values[":step"]) == ({"S": "running"}, {"S": "processing"})
    assert request["ReturnValuesOnConditionCheckFailure"] == "ALL_OLD"  # the old item says why it failed


def test_p_res_8_the_retrying_write_stores_the_next_fence_on_the_exact_stored_one() -> None:
    """The retrying status and the fence ``(h, n + 1)`` with ``lease_until = 0``, on the condition that the stored
    fence is exactly ``(h, n)``: a late duplicate of attempt ``n`` cannot start a second retry chain."""
    request = _request(REFENCE)
    values = request["ExpressionAttributeValues"]
    assert "(#fence_h = :rh AND #fence_a = :ra)" in request["ConditionExpression"]
    assert (values[":rh"], values[":ra"]) == ({"N": "2"}, {"N": "1"})
    assert "#fence_a = :fence_a" in request["UpdateExpression"]
    assert "#fence_h = :fence_h" not in request["UpdateExpression"]  # the hop does not change
    assert (values[":fence_a"], values[":lease_until"]) == ({"N": "2"}, {"N": "0"})
    assert values[":step"] == {"S": "retrying"}


def test_p_stat_3_requests_share_no_mutable_state_between_calls() -> None:
    """The cached texts are strings; names and values are built per call, so one request's dicts are its own."""
    first = _request(UPDATES[0])
    first["ExpressionAttributeNames"]["#status"] = "tampered"
    first["ExpressionAttributeValues"][":status"]["S"] = "tampered"
    again = _request(UPDATES[0])
    assert again["ExpressionAttributeNames"]["#status"] == "status"
    assert again["ExpressionAttributeValues"][":status"] == {"S": "running"}
    other = _request(StatusUpdate(status="running", step="processing", actor="b", progress=60.0, data={"curr": "b"}))
    assert other["ExpressionAttributeValues"][":actor"] == {"S": "b"}
    assert other["ExpressionAttributeValues"][":p"] == {"N": "60"}
    assert other["ExpressionAttributeValues"][":data"] == {"S": '{"curr":"b"}'}
    assert other["UpdateExpression"] == again["UpdateExpression"]


def test_p_stat_3_exact_and_attach_requests_define_their_placeholders() -> None:
    stored = StoredState(status="running", created_at="2026-03-01T09:00:00Z", last_seq=4)
    for request in (
        exact_update(UPDATES[0], stored, task_id="t", now=NOW, now_ms="x", progress=50.0).request("tbl", "t"),
        exact_update(CLAIM, stored, task_id="t", now=NOW, now_ms="x", progress=None).request("tbl", "t"),
        exact_update(REFENCE, stored, task_id="t", now=NOW, now_ms="x", progress=None).request("tbl", "t"),
        attach_checkpoint("succeeded/t.jsonl", 3).request("tbl", "t"),
        attach_checkpoint("succeeded/t.jsonl", None).request("tbl", "t"),
    ):
        names, values = _placeholders(request)
        assert names == set(request["ExpressionAttributeNames"])
        assert values == set(request["ExpressionAttributeValues"])


def test_p_stat_2_attaching_a_checkpoint_changes_no_status_and_only_a_task_without_one() -> None:
    request = attach_checkpoint("failed/k.jsonl", 7).request("tbl", "t")
    assert request["UpdateExpression"] == "SET #checkpoint_key = :checkpoint_key, #checkpoint_line = :checkpoint_line"
    assert request["ConditionExpression"] == "(attribute_exists(#pk)) AND (attribute_not_exists(#checkpoint_key))"
    assert request["ExpressionAttributeValues"][":checkpoint_line"] == {"N": "7"}
