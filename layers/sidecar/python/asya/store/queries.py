"""Raw reads and batch writes of the task table: paginated queries, pre-flight ``BatchGetItem``, deletes.

Pure request plumbing for ``TaskStore``: no status rules here. Unprocessed batch entries are retried up to 5 times
with exponential backoff starting at 50 ms; errors propagate.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Final

from asya.store import records as rec

__all__ = ["batch_delete", "batch_statuses", "event_items", "overdue_entries", "query_all", "task_keys"]

_MAX_ATTEMPTS: Final = 5
_BATCH_GET_LIMIT: Final = 100
_BATCH_WRITE_LIMIT: Final = 25
_LAST_SEQ: Final = 10**12 - 1


def _backoff(attempt: int) -> None:
    time.sleep(0.05 * 2**attempt)


def query_all(dynamodb: Any, request: dict[str, Any]) -> list[dict[str, Any]]:
    """Every item of a query, following ``LastEvaluatedKey``."""
    items: list[dict[str, Any]] = []
    request = dict(request)
    while True:
        page = dynamodb.query(**request)
        items.extend(page.get("Items", []))
        if not page.get("LastEvaluatedKey"):
            return items
        request["ExclusiveStartKey"] = page["LastEvaluatedKey"]


def task_keys(dynamodb: Any, table: str, task_id: str) -> list[dict[str, Any]]:
    """Keys of every item of a task (task, body, events), strongly consistent."""
    items = query_all(
        dynamodb,
        {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk",
            "ExpressionAttributeValues": {":pk": rec.str_av(rec.task_pk(task_id))},
            "ProjectionExpression": "pk, sk",
            "ConsistentRead": True,
        },
    )
    return [{"pk": item["pk"], "sk": item["sk"]} for item in items]


def batch_delete(dynamodb: Any, table: str, keys: Sequence[dict[str, Any]]) -> None:
    for start in range(0, len(keys), _BATCH_WRITE_LIMIT):
        pending: dict[str, Any] = {
            table: [{"DeleteRequest": {"Key": k}} for k in keys[start : start + _BATCH_WRITE_LIMIT]]
        }
        for attempt in range(_MAX_ATTEMPTS):
            pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
            if not pending:
                break
            _backoff(attempt)


def batch_statuses(dynamodb: Any, table: str, ids: Sequence[str], *, now: datetime) -> dict[str, str]:
    """``{id: status}`` of unexpired task items: one consistent ``BatchGetItem`` per 100 ids (GW-DATA-8)."""
    unique = list(dict.fromkeys(ids))
    statuses: dict[str, str] = {}
    for start in range(0, len(unique), _BATCH_GET_LIMIT):
        request: dict[str, Any] = {
            table: {
                "Keys": [rec.key(task_id, rec.TASK_SK) for task_id in unique[start : start + _BATCH_GET_LIMIT]],
                "ConsistentRead": True,
                "ProjectionExpression": "#id, #status, #ttl",
                "ExpressionAttributeNames": {"#id": "id", "#status": "status", "#ttl": "ttl"},
            }
        }
        for attempt in range(_MAX_ATTEMPTS):
            response = dynamodb.batch_get_item(RequestItems=request)
            for item in response.get("Responses", {}).get(table, []):
                task_id, status = rec.get_str(item, "id"), rec.get_str(item, "status")
                if task_id is not None and status is not None and not rec.is_expired(item, now):
                    statuses[task_id] = status
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            _backoff(attempt)
    return statuses


def event_items(dynamodb: Any, table: str, task_id: str, after_seq: int) -> list[dict[str, Any]]:
    """Event items whose last sequence number is above ``after_seq`` (strongly consistent, in ``sk`` order)."""
    return query_all(
        dynamodb,
        {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": rec.str_av(rec.task_pk(task_id)),
                ":from": rec.str_av(rec.event_sk(max(after_seq, 0) + 1)),
                ":to": rec.str_av(rec.event_sk(_LAST_SEQ)),
            },
            "ConsistentRead": True,
        },
    )


def overdue_entries(dynamodb: Any, table: str, *, due: str) -> list[dict[str, str]]:
    """``[{"id", "deadline_at"}]`` of every ``active_deadlines`` shard with ``deadline_at <= due`` (GW-BACK-2)."""
    found: list[dict[str, str]] = []
    for shard in range(rec.DEADLINE_SHARDS):
        items = query_all(
            dynamodb,
            {
                "TableName": table,
                "IndexName": "active_deadlines",
                "KeyConditionExpression": "gsi3pk = :shard AND gsi3sk <= :due",
                "ExpressionAttributeValues": {":shard": rec.str_av(f"ACTIVE#{shard}"), ":due": rec.str_av(due)},
                "ProjectionExpression": "#id, deadline_at",
                "ExpressionAttributeNames": {"#id": "id"},
            },
        )
        for item in items:
            task_id, deadline = rec.get_str(item, "id"), rec.get_str(item, "deadline_at")
            if task_id is not None and deadline is not None:
                found.append({"id": task_id, "deadline_at": deadline})
    return found
