"""Listing tasks newest first (GATEWAY GW-LIST-1..4) over the keys-only, day-partitioned indexes of GW-DATA-2.

A ``failed`` or ``canceled`` status filter reads the sparse ``by_outcome`` index (``OUTCOME#{status}#{day}``); every
other listing reads ``by_created`` (``TASKS#{day}``), from today back ``window_days`` days (tasks expire 30 days after
their terminal status), each partition in descending ``{created_at}#{id}`` order (both indexes sort on ``gsi1sk``).
The indexes carry their keys only, so that no status update rewrites them (GW-DATA-8): the walk pages over index
entries, then reads the page's task items (summary attributes only) with one eventually consistent ``BatchGetItem``
(at most 100 keys, unprocessed keys retried, ``IncompleteReadError`` if some are left). The ``status`` filter on
``by_created`` and the ``flow`` filter apply to those items, so a filtered page may hold fewer than ``limit`` tasks
while ``next_cursor`` is set (GW-LIST-3); entries whose task is gone or expired are dropped too (GW-LIST-4). The cursor
is opaque: URL-safe base64 of ``{"day", "key"}`` where ``key`` is the last index entry of the page (table and index
keys), the ``ExclusiveStartKey`` of the next query; a cursor whose key is not an entry of its day's partition of this
listing's index (another ``status`` filter, forged: keys of another shape or over DynamoDB's key sizes, an index sort
key other than ``{created_at}#{id}`` of its own task) is a ``ListQueryError``. ``count`` counts index entries over the
whole range, and with a filter the tasks behind them that match (GW-LIST-3).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any, Final, TypedDict

from asya.store import queries as q
from asya.store import records as rec
from asya.store.errors import ListQueryError
from asya.store.transition import STATUSES
from asya.store.updates import OUTCOME_STATUSES
from asya.store.views import summary
from asya.timeutil import parse_ts

__all__ = ["MAX_LIMIT", "MAX_OFFSET", "ListQuery", "decode_cursor", "encode_cursor", "list_tasks"]

MAX_LIMIT: Final = 100
MAX_OFFSET: Final = 10_000
_SUMMARY_PROJECTION: Final = {
    f"#{name}": name
    for name in (
        "pk",
        "sk",
        "id",
        "status",
        "flow",
        "actor",
        "created_at",
        "updated_at",
        "progress_percent",
        "current_actor",
        "deadline_at",
        "error",
        "ttl",
    )
}


class ListQuery(TypedDict, total=False):
    """The filters and paging of one listing (GW-LIST-2): the keywords of :func:`list_tasks` after ``window_days``,
    which ``TaskStore.list_tasks`` passes on."""

    status: str | None
    flow: str | None
    limit: int
    cursor: str | None
    offset: int | None
    count: bool


def encode_cursor(day: str, key: dict[str, str]) -> str:
    raw = json.dumps({"day": day, "key": key}, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(cursor: str) -> tuple[str, dict[str, str]]:
    """Raises :class:`ListQueryError` naming ``cursor`` when it is not one of ours."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
        day, key = raw["day"], raw["key"]
    except (ValueError, UnicodeError, binascii.Error, TypeError, KeyError):
        raise ListQueryError(f"cursor: invalid cursor {cursor!r}") from None
    if not isinstance(day, str) or not isinstance(key, dict) or not all(isinstance(v, str) for v in key.values()):
        raise ListQueryError(f"cursor: invalid cursor {cursor!r}")
    return day, key


def _validate(status: str | None, limit: int, cursor: str | None, offset: int | None) -> None:
    if status is not None and status not in STATUSES:
        raise ListQueryError(f"status: invalid value {status!r}: use one of {', '.join(STATUSES)}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ListQueryError(f"limit: invalid value {limit!r}: use an integer between 1 and {MAX_LIMIT}")
    if offset is not None and (
        isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_OFFSET
    ):
        raise ListQueryError(f"offset: invalid value {offset!r}: use an integer between 0 and {MAX_OFFSET}")
    if cursor is not None and offset is not None:
        raise ListQueryError("cursor: use either cursor or offset, not both")


class _Walk:
    """Queries of one listing: the index, its partition keys by day, and the filters applied to fetched items."""

    def __init__(self, dynamodb: Any, table: str, *, status: str | None, flow: str | None, now: datetime) -> None:
        self.dynamodb = dynamodb
        self.table = table
        self.status = status
        self.flow = flow
        self.now = now
        self.outcome = status in OUTCOME_STATUSES
        self.index, self.pk_name, self.sk_name = (
            ("by_outcome", "gsi2pk", "gsi1sk") if self.outcome else ("by_created", "gsi1pk", "gsi1sk")
        )

    @property
    def filtered(self) -> bool:
        """Whether entries must be checked against their task items (the index cannot tell)."""
        return self.flow is not None or (self.status is not None and not self.outcome)

    def partition(self, day: str) -> str:
        return rec.outcome_index_pk(self.status or "", day) if self.outcome else rec.created_index_pk(day)

    def pages(self, day: str, *, start: dict[str, str] | None = None, count: bool = False) -> Iterator[dict[str, Any]]:
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": self.index,
            "KeyConditionExpression": "#pk = :part",
            "ExpressionAttributeNames": {"#pk": self.pk_name},
            "ExpressionAttributeValues": {":part": rec.str_av(self.partition(day))},
            "ScanIndexForward": False,
        }
        if count:
            request["Select"] = "COUNT"
        if start is not None:
            request["ExclusiveStartKey"] = {name: rec.str_av(value) for name, value in start.items()}
        while True:
            page = self.dynamodb.query(**request)
            yield page
            last = page.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def key_of(self, item: dict[str, Any]) -> dict[str, str]:
        return {name: rec.get_str(item, name) or "" for name in ("pk", "sk", self.pk_name, self.sk_name)}

    def owns(self, day: str, key: dict[str, str]) -> bool:
        """Whether ``key`` can be an entry of this walk's partition of ``day``: a cursor made by another listing
        (another status filter, or none) or forged would reach DynamoDB as an invalid ``ExclusiveStartKey``."""
        if set(key) != {"pk", "sk", self.pk_name, self.sk_name} or not key["pk"].startswith(rec.task_pk("")):
            return False
        task_id = key["pk"][len(rec.task_pk("")) :]
        created_at, hash_sign, sk_id = key[self.sk_name].partition("#")
        # the index sort key must be the one this task's entry has ({created_at}#{id}, GW-DATA-2): DynamoDB checks
        # only that a start key fits its key sizes, and an oversized one is a ValidationException, not "no entry"
        return (
            key["sk"] == rec.TASK_SK
            and key[self.pk_name] == self.partition(day)
            and hash_sign == "#"
            and sk_id == task_id
            and rec.is_storable_id(task_id)
            and created_at.startswith(day)
            and parse_ts(created_at) is not None
            and rec.fits_sort_key(key[self.sk_name])
        )

    def matches(self, item: dict[str, Any] | None) -> bool:
        if item is None or rec.is_expired(item, self.now):
            return False
        if self.status is not None and rec.get_str(item, "status") != self.status:
            return False
        return self.flow is None or rec.get_str(item, "flow") == self.flow


def list_tasks(
    dynamodb: Any,
    table: str,
    *,
    now: datetime,
    window_days: int,
    status: str | None = None,
    flow: str | None = None,
    limit: int = 20,
    cursor: str | None = None,
    offset: int | None = None,
    count: bool = False,
) -> dict[str, Any]:
    """``{"messages": [summary, ...], "total": int | None, "next_cursor": str | None}`` (GW-LIST-2, GW-LIST-3)."""
    _validate(status, limit, cursor, offset)
    walk = _Walk(dynamodb, table, status=status, flow=flow, now=now)
    today = now.date()
    days = [(today - timedelta(days=back)).isoformat() for back in range(window_days + 1)]
    start_day, start_key = (None, None) if cursor is None else decode_cursor(cursor)
    if start_day is not None:
        if start_day not in days:
            raise ListQueryError(f"cursor: invalid cursor {cursor!r}: its day is outside the listing window")
        if start_key is None or not walk.owns(start_day, start_key):
            raise ListQueryError(f"cursor: invalid cursor {cursor!r}: it was not made by this listing")
        days = days[days.index(start_day) :]
    skip = offset or 0
    wanted = skip + limit + 1
    found: list[tuple[str, dict[str, Any]]] = []
    for day in days:
        for page in walk.pages(day, start=start_key if day == start_day else None):
            found.extend((day, item) for item in page.get("Items", []))
            if len(found) >= wanted:
                break
        if len(found) >= wanted:
            break
    page_items = found[skip : skip + limit]
    next_cursor = None
    if len(found) > skip + limit and page_items:
        last_day, last_item = page_items[-1]
        next_cursor = encode_cursor(last_day, walk.key_of(last_item))
    total = None
    if count:
        all_days = [(today - timedelta(days=back)).isoformat() for back in range(window_days + 1)]
        if walk.filtered:
            total = sum(len(_matching(walk, page.get("Items", []))) for day in all_days for page in walk.pages(day))
        else:
            total = sum(page.get("Count", 0) for day in all_days for page in walk.pages(day, count=True))
    return {
        "messages": _summaries(walk, [entry for _, entry in page_items], now),
        "total": total,
        "next_cursor": next_cursor,
    }


def _matching(walk: _Walk, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task items behind index ``entries`` that pass the walk's filters, in entry order, from eventually
    consistent ``BatchGetItem`` reads (the indexes lag the table, GW-LIST-4: a task deleted or expired since, or whose
    status no longer matches, is left out rather than shown with a status the caller did not ask for)."""
    keys = [{"pk": entry["pk"], "sk": entry["sk"]} for entry in entries]
    items = q.batch_get(
        walk.dynamodb, walk.table, keys, projection=_SUMMARY_PROJECTION, consistent=False, complete=True
    )
    by_pk = {rec.get_str(item, "pk"): item for item in items}
    found = (by_pk.get(rec.get_str(entry, "pk")) for entry in entries)
    return [item for item in found if item is not None and walk.matches(item)]


def _summaries(walk: _Walk, entries: list[dict[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """The summaries of a page's index entries, in their order."""
    return [summary(item) for item in _matching(walk, entries)]
