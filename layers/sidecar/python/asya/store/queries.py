"""Raw reads and batch writes of the task table: paginated queries, pre-flight ``BatchGetItem``, deletes.

Pure request plumbing for ``TaskStore``: no status rules here. Unprocessed batch entries are retried up to 5 times
with exponential backoff starting at 50 ms; errors propagate (keys a ``BatchGetItem`` still left unprocessed are
left out, or raise ``IncompleteReadError`` where the caller needs them all).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, Final

from asya.store import records as rec
from asya.store.errors import IncompleteReadError

__all__ = [
    "batch_delete",
    "batch_get",
    "batch_statuses",
    "event_items",
    "overdue_entries",
    "overdue_pages",
    "query_all",
    "task_keys",
]

_MAX_ATTEMPTS: Final = 5
_BATCH_GET_LIMIT: Final = 100
_BATCH_WRITE_LIMIT: Final = 25
_LAST_SEQ: Final = 10**12 - 1


def _backoff(attempt: int) -> None:
    time.sleep(0.05 * 2**attempt)


def get_item(dynamodb: Any, table: str, task_id: str, sk: str, *, now: datetime) -> dict[str, Any] | None:
    """Item ``sk`` of task ``task_id``, strongly consistent; ``None`` when absent or expired (GW-DATA-5)."""
    item: dict[str, Any] | None = dynamodb.get_item(TableName=table, Key=rec.key(task_id, sk), ConsistentRead=True).get(
        "Item"
    )
    if item is None or rec.is_expired(item, now):
        return None
    return item


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


def batch_statuses(
    dynamodb: Any, table: str, ids: Sequence[str], *, now: datetime, extra_keys: Sequence[dict[str, Any]] = ()
) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """``{id: status}`` of unexpired task items, and the unexpired items found for ``extra_keys`` (other small items
    read with them, such as idempotency items): one consistent ``BatchGetItem`` per 100 keys (GW-DATA-8)."""
    keys = [rec.key(task_id, rec.TASK_SK) for task_id in ids]
    task_pks = {k["pk"]["S"] for k in keys}
    # extra items are read whole: read units are billed by item size, whatever the projection
    projection = None if extra_keys else {"#pk": "pk", "#sk": "sk", "#id": "id", "#status": "status", "#ttl": "ttl"}
    statuses: dict[str, str] = {}
    extra: list[dict[str, Any]] = []
    for item in batch_get(dynamodb, table, [*keys, *extra_keys], projection=projection):
        if rec.is_expired(item, now):
            continue
        if rec.get_str(item, "pk") in task_pks and rec.get_str(item, "sk") == rec.TASK_SK:
            task_id, status = rec.get_str(item, "id"), rec.get_str(item, "status")
            if task_id is not None and status is not None:
                statuses[task_id] = status
        else:
            extra.append(item)
    return statuses, extra


def batch_get(
    dynamodb: Any,
    table: str,
    keys: Sequence[dict[str, Any]],
    *,
    projection: dict[str, str] | None = None,
    consistent: bool = True,
    complete: bool = False,
) -> list[dict[str, Any]]:
    """The items found for ``keys`` (duplicates asked once), one ``BatchGetItem`` per 100 keys; ``projection`` maps
    placeholders to the attribute names to return (default: whole items). Keys still unprocessed after the retries are
    left out, or with ``complete`` raise :class:`IncompleteReadError`."""
    unique = list({(k["pk"]["S"], k["sk"]["S"]): k for k in keys}.values())
    found: list[dict[str, Any]] = []
    for start in range(0, len(unique), _BATCH_GET_LIMIT):
        spec: dict[str, Any] = {"Keys": unique[start : start + _BATCH_GET_LIMIT], "ConsistentRead": consistent}
        if projection:
            spec["ProjectionExpression"] = ", ".join(projection)
            spec["ExpressionAttributeNames"] = dict(projection)
        request: dict[str, Any] = {table: spec}
        for attempt in range(_MAX_ATTEMPTS):
            response = dynamodb.batch_get_item(RequestItems=request)
            found.extend(response.get("Responses", {}).get(table, []))
            request = response.get("UnprocessedKeys") or {}
            if not request:
                break
            _backoff(attempt)
        if request and complete:
            left = len(request.get(table, {}).get("Keys", []))
            raise IncompleteReadError(f"BatchGetItem left {left} keys of table {table!r} unprocessed after retries")
    return found


def event_items(dynamodb: Any, table: str, task_id: str, after_seq: int) -> list[dict[str, Any]]:
    """Event items whose last sequence number is above ``after_seq`` (strongly consistent, in ``sk`` order); from the
    start (``after_seq < 1``) the task item too, last, which stands for event 1 (``TASK`` sorts right after ``EV#``
    and nothing sorts between them)."""
    return query_all(
        dynamodb,
        {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": rec.str_av(rec.task_pk(task_id)),
                ":from": rec.str_av(rec.event_sk(max(after_seq, 0) + 1)),
                ":to": rec.str_av(rec.TASK_SK if after_seq < 1 else rec.event_sk(_LAST_SEQ)),
            },
            "ConsistentRead": True,
        },
    )


def overdue_entries(dynamodb: Any, table: str, *, due: str) -> list[dict[str, str]]:
    """``[{"id", "deadline_at"}]`` of every ``active_deadlines`` shard with ``deadline_at <= due`` (GW-BACK-2)."""
    return [
        {"id": entry["id"], "deadline_at": entry["deadline_at"]}
        for page in overdue_pages(dynamodb, table, due=due)
        for entry in page
    ]


def overdue_pages(
    dynamodb: Any, table: str, *, due: str, page_size: int | None = None
) -> Iterator[list[dict[str, str]]]:
    """``[{"id", "deadline_at", "created_at"}]`` due by ``due``, one query page at a time, shard after shard,
    following ``LastEvaluatedKey``; ``page_size`` caps the items per page (DynamoDB's 1 MB page otherwise)."""
    for shard in range(rec.DEADLINE_SHARDS):
        request: dict[str, Any] = {
            "TableName": table,
            "IndexName": "active_deadlines",
            "KeyConditionExpression": "gsi3pk = :shard AND gsi3sk <= :due",
            "ExpressionAttributeValues": {":shard": rec.str_av(f"ACTIVE#{shard}"), ":due": rec.str_av(due)},
            "ProjectionExpression": "#id, deadline_at, created_at",
            "ExpressionAttributeNames": {"#id": "id"},
        }
        if page_size is not None:
            request["Limit"] = page_size
        while True:
            page = dynamodb.query(**request)
            entries: list[dict[str, str]] = []
            for item in page.get("Items", []):
                task_id, deadline = rec.get_str(item, "id"), rec.get_str(item, "deadline_at")
                if task_id is not None and deadline is not None:
                    entry = {"id": task_id, "deadline_at": deadline}
                    created_at = rec.get_str(item, "created_at")
                    if created_at is not None:
                        entry["created_at"] = created_at
                    entries.append(entry)
            if entries:
                yield entries
            if not page.get("LastEvaluatedKey"):
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
