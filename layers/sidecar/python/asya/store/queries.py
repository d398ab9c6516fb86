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
    "follow_items",
    "long_deadline_pages",
    "preflight_items",
    "query_all",
    "task_keys",
    "view_items",
]

_MAX_ATTEMPTS: Final = 5
_BATCH_GET_LIMIT: Final = 100
_BATCH_WRITE_LIMIT: Final = 25


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


def preflight_items(
    dynamodb: Any, table: str, keys: Sequence[dict[str, Any]], *, now: datetime, complete: bool = False
) -> list[dict[str, Any]]:
    """The unexpired items found for ``keys`` (task items and child fence items), read whole with one strongly
    consistent ``BatchGetItem`` per 100 keys (P-STAT-10, GW-DATA-8); ``complete`` as for :func:`batch_get`."""
    return [item for item in batch_get(dynamodb, table, keys, complete=complete) if not rec.is_expired(item, now)]


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


def follow_items(dynamodb: Any, table: str, task_id: str, after_seq: int) -> list[dict[str, Any]]:
    """One strongly consistent query of what a follower reads (GW-SSE-5, GW-SSE-9): the fly items whose last number is
    above ``after_seq``, then the ``PAUSE``, ``RESULT`` and ``TASK`` items (they sort after every ``EV#`` key and
    nothing else sorts between them)."""
    return query_all(
        dynamodb,
        {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": rec.str_av(rec.task_pk(task_id)),
                ":from": rec.str_av(rec.event_sk(max(after_seq, 0) + 1)),
                ":to": rec.str_av(rec.TASK_SK),
            },
            "ConsistentRead": True,
        },
    )


def view_items(dynamodb: Any, table: str, task_id: str) -> list[dict[str, Any]]:
    """The items of a task view (GW-TASK-1), strongly consistent: ``BODY`` and the ``CHILD#`` fence items (one query),
    then ``PAUSE``, ``RESULT`` and ``TASK`` (another)."""
    pk = rec.str_av(rec.task_pk(task_id))
    head = query_all(
        dynamodb,
        {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :from AND :to",
            "ExpressionAttributeValues": {
                ":pk": pk,
                ":from": rec.str_av(rec.BODY_SK),
                ":to": rec.str_av(rec.CHILD_PREFIX + "\uffff"),
            },
            "ConsistentRead": True,
        },
    )
    tail = query_all(
        dynamodb,
        {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND sk >= :from",
            "ExpressionAttributeValues": {":pk": pk, ":from": rec.str_av(rec.PAUSE_SK)},
            "ConsistentRead": True,
        },
    )
    return [*head, *tail]


def long_deadline_pages(
    dynamodb: Any, table: str, *, due: str, page_size: int | None = None
) -> Iterator[list[dict[str, str]]]:
    """``[{"id", "deadline_at"}]`` of the ``long_deadlines`` entries due by ``due`` (GW-BACK-1), one query page at a
    time, shard after shard; the index holds keys only, so the id comes from ``pk`` and the deadline from ``gsi3sk``;
    ``page_size`` caps the items per page (DynamoDB's 1 MB page otherwise)."""
    prefix = rec.task_pk("")
    for shard in range(rec.DEADLINE_SHARDS):
        request: dict[str, Any] = {
            "TableName": table,
            "IndexName": "long_deadlines",
            "KeyConditionExpression": "gsi3pk = :shard AND gsi3sk <= :due",
            "ExpressionAttributeValues": {":shard": rec.str_av(f"LONGDL#{shard}"), ":due": rec.str_av(due)},
        }
        if page_size is not None:
            request["Limit"] = page_size
        while True:
            page = dynamodb.query(**request)
            entries = [
                {"id": pk[len(prefix) :], "deadline_at": deadline}
                for item in page.get("Items", [])
                if (pk := rec.get_str(item, "pk")) is not None
                and pk.startswith(prefix)
                and (deadline := rec.get_str(item, "gsi3sk")) is not None
            ]
            if entries:
                yield entries
            if not page.get("LastEvaluatedKey"):
                break
            request["ExclusiveStartKey"] = page["LastEvaluatedKey"]
