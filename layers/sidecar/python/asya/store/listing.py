"""Listing tasks newest first (GW-LIST-1..4) over the keys-only, day-partitioned, sharded indexes of GW-DATA-2.

A ``failed`` or ``canceled`` status filter reads the sparse ``by_outcome`` index (``OUTCOME#{status}#{day}#{shard}``);
every other listing reads ``by_created`` (``TASKS#{day}#{shard}``), from today back ``window_days`` days (tasks expire
30 days after their terminal status). A day is :data:`asya.store.records.INDEX_SHARDS` (8) partitions, a task's shard
fixed by its id (``records.index_shard``), each in descending ``{created_at}#{id}`` order (both indexes sort on
``gsi1sk``): the walk queries every shard of a day and merges them k-way into the day's one descending order, then
goes on to the day before when that day runs out. Sort keys are unique (the id is in them) and Python orders strings
by code point as DynamoDB orders them by UTF-8 bytes, so the merged order is exact: newest first, ties on
``created_at`` broken by id, descending.

The indexes carry their keys only, so that no status update rewrites them (GW-DATA-8): the walk pages over index
entries, then reads the page's task items (summary attributes only) with one eventually consistent ``BatchGetItem`` (at
most ``limit`` keys, unprocessed keys retried, ``IncompleteReadError`` if some are left). The ``status`` filter on
``by_created``, the ``flow`` filter and the ``owner`` filter (GW-EDGE-5) apply to those items; a filtered walk
reads on past the page's entries, 100 at a time, until ``limit`` tasks (and a look-ahead one) match or 1,000 entries
past the offset were read, so a filter finds what its count counts (GW-LIST-3); only a page cut by that bound holds
fewer than ``limit`` tasks while ``next_cursor`` is set (it resumes after the last entry read). Entries whose task is
gone or expired are dropped too (GW-LIST-4).

Reads per page: :data:`~asya.store.records.INDEX_SHARDS` queries per day the walk visits, each with ``Limit`` =
``limit + 1``, which is the whole page and its look-ahead entry, so no shard is queried twice in a day; the walk visits
the cursor's day (or today) and the days before it until it has ``limit + 1`` entries, so a page of a busy day costs 8
queries and a page of a sparse window up to ``8 * (window_days + 1)``. A day's eight first queries run side by side on
a pool of eight threads (a boto3 client is thread-safe), so a page waits for one query per day visited, as it did
before the sharding; the pool lives for one call. With ``offset``, a shard's ``Limit`` also covers its expected share
of the skipped entries with a quarter more, and a shard that runs out of its page before the listing has ``offset +
limit + 1`` entries is queried again from where it stopped. Then one ``BatchGetItem`` of the page's at most ``limit``
task items. ``count`` adds a ``Select=COUNT`` query per shard and day of the whole window (more past 1 MB, eight at a
time), or with a filter the entries themselves and the task items behind them: it counts index entries, and with a
filter the tasks behind them that match (GW-LIST-3).

The cursor is opaque: URL-safe base64 of ``{"scope", "last"}``, where ``scope`` names the listing's index
(``by_created``, or ``by_outcome#{status}``) and ``last`` is the ``gsi1sk`` of the page's last entry; the next page
queries every shard of that entry's day with ``gsi1sk < :last``, then the days before. The cursor is small and the
same whatever the shard count. A cursor that is not exactly these two strings, whose ``scope`` is not this listing's
(a ``failed`` or ``canceled`` cursor is no cursor of another listing; pending, running and unfiltered listings share
``by_created`` and its cursors), whose ``last`` is not ``{created_at}#{id}`` (a task-record timestamp, an id that fits
a key, within DynamoDB's 1024-byte sort key), or whose day is outside the window is a ``ListQueryError`` naming
``cursor``.
"""

from __future__ import annotations

import base64
import binascii
import heapq
import json
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from itertools import chain, islice
from typing import Any, Final, TypedDict

from asya.store import queries as q
from asya.store import records as rec
from asya.store.errors import ListQueryError
from asya.store.transition import STATUSES
from asya.store.updates import OUTCOME_STATUSES
from asya.store.views import summary
from asya.timeutil import format_ts_ms, parse_ts

__all__ = ["MAX_LIMIT", "MAX_OFFSET", "ListQuery", "decode_cursor", "encode_cursor", "list_tasks"]

MAX_LIMIT: Final = 100
MAX_OFFSET: Final = 10_000
#: A filtered walk checks index entries against their task items this many at a time (one ``BatchGetItem`` each,
#: DynamoDB's limit) and reads at most ``_FILTER_SCAN`` entries past the offset for one page (GW-LIST-3).
_FILTER_BATCH: Final = 100
#: at most this many shard queries of a day run side by side (a deployment sized for many creations has more shards)
_MAX_THREADS: Final = 16
_FILTER_SCAN: Final = 1_000
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
        "owner",
    )
}


class ListQuery(TypedDict, total=False):
    """The filters and paging of one listing (GW-LIST-2): the keywords of :func:`list_tasks` after ``window_days``,
    which ``TaskStore.list_tasks`` passes on."""

    status: str | None
    flow: str | None
    owner: str | None
    limit: int
    cursor: str | None
    offset: int | None
    count: bool


def encode_cursor(scope: str, last: str) -> str:
    raw = json.dumps({"scope": scope, "last": last}, separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii")


def decode_cursor(cursor: str) -> tuple[str, str]:
    """``(scope, last)`` of a cursor; raises :class:`ListQueryError` naming ``cursor`` when it is not one of ours."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor.encode("ascii")))
    except (ValueError, binascii.Error, RecursionError):
        raise ListQueryError(f"cursor: invalid cursor {cursor!r}") from None
    if not isinstance(raw, dict) or set(raw) != {"scope", "last"}:
        raise ListQueryError(f"cursor: invalid cursor {cursor!r}")
    scope, last = raw["scope"], raw["last"]
    if not isinstance(scope, str) or not isinstance(last, str):
        raise ListQueryError(f"cursor: invalid cursor {cursor!r}")
    return scope, last


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
    """Queries of one listing: the index, its partition keys by day and shard, and the filters applied to fetched
    items."""

    def __init__(
        self,
        dynamodb: Any,
        table: str,
        *,
        status: str | None,
        flow: str | None,
        now: datetime,
        pool: ThreadPoolExecutor,
        owner: str | None = None,
        shards: int = rec.INDEX_SHARDS,
    ) -> None:
        self.dynamodb = dynamodb
        self.shards = shards
        #: runs a day's shard queries side by side: the walk's latency is one query per day, not eight
        self.pool = pool
        self.table = table
        self.status = status
        self.flow = flow
        self.owner = owner
        self.now = now
        self.outcome = status in OUTCOME_STATUSES
        self.index, self.pk_name = ("by_outcome", "gsi2pk") if self.outcome else ("by_created", "gsi1pk")
        self.sk_name = "gsi1sk"  # both indexes sort on by_created's key (GW-DATA-2)
        #: what a cursor of this listing names: its index and, for ``by_outcome``, the status partition
        self.scope = f"by_outcome#{status}" if self.outcome else "by_created"

    @property
    def filtered(self) -> bool:
        """Whether entries must be checked against their task items (the index cannot tell)."""
        return self.flow is not None or self.owner is not None or (self.status is not None and not self.outcome)

    def partition(self, day: str, shard: int) -> str:
        if self.outcome:
            return rec.outcome_index_pk(self.status or "", day, shard)
        return rec.created_index_pk(day, shard)

    def pages(
        self, day: str, shard: int, *, before: str | None = None, limit: int | None = None, count: bool = False
    ) -> Iterator[dict[str, Any]]:
        """The query pages of one shard of ``day``, newest first, below the sort key ``before`` if given."""
        condition = "#pk = :part"
        names = {"#pk": self.pk_name}
        values = {":part": rec.str_av(self.partition(day, shard))}
        if before is not None:
            condition += " AND #sk < :last"
            names["#sk"] = self.sk_name
            values[":last"] = rec.str_av(before)
        request: dict[str, Any] = {
            "TableName": self.table,
            "IndexName": self.index,
            "KeyConditionExpression": condition,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ScanIndexForward": False,
        }
        if limit is not None:
            request["Limit"] = limit
        if count:
            request["Select"] = "COUNT"
        while True:
            page = self.dynamodb.query(**request)
            yield page
            last = page.get("LastEvaluatedKey")
            if not last:
                return
            request["ExclusiveStartKey"] = last

    def entries(self, day: str, *, before: str | None, per_query: int) -> Iterator[dict[str, Any]]:
        """The index entries of ``day`` below ``before``, newest first: the k-way merge of its shards. The first
        query of every shard is sent at once, on the pool; a further one, in the caller's thread, only when the merge
        needs a shard's next entry and its page is used up."""
        shards = [self._shard(self.pages(day, shard, before=before, limit=per_query)) for shard in range(self.shards)]
        return heapq.merge(*shards, key=self.sort_key, reverse=True)

    def _shard(self, pages: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        first = self.pool.submit(next, pages, None)

        def items() -> Iterator[dict[str, Any]]:
            page = first.result()
            while page is not None:
                yield from page.get("Items", [])
                page = next(pages, None)

        return items()

    def sort_key(self, entry: dict[str, Any]) -> str:
        return rec.get_str(entry, self.sk_name) or ""

    def resume_point(self, cursor: str, days: list[str]) -> tuple[str, str]:
        """``(day, last)`` of a cursor of this listing: a forged one would reach DynamoDB as a key condition value,
        and one over the sort key size is a ``ValidationException`` there (a 500), not "no entry"."""
        scope, last = decode_cursor(cursor)
        if scope != self.scope:
            raise ListQueryError(f"cursor: invalid cursor {cursor!r}: it was not made by this listing")
        created_at, hash_sign, task_id = last.partition("#")
        moment = parse_ts(created_at)
        if not (
            hash_sign == "#"
            and task_id
            and moment is not None
            and format_ts_ms(moment) == created_at
            and rec.is_storable_id(task_id)
            and rec.fits_sort_key(last)
        ):
            raise ListQueryError(f"cursor: invalid cursor {cursor!r}: its position is no index entry")
        day = rec.day_of(created_at)
        if day not in days:
            raise ListQueryError(f"cursor: invalid cursor {cursor!r}: its day is outside the listing window")
        return day, last

    def count(self, days: Iterable[str]) -> int:
        """The entries of ``days`` or, when :attr:`filtered`, the tasks behind them that match (GW-LIST-3)."""
        shards = [(day, shard) for day in days for shard in range(self.shards)]
        return sum(self.pool.map(lambda at: self._count(*at), shards))

    def _count(self, day: str, shard: int) -> int:
        if self.filtered:
            return sum(len(_matching(self, page.get("Items", []))) for page in self.pages(day, shard))
        return sum(page.get("Count", 0) for page in self.pages(day, shard, count=True))

    def matches(self, item: dict[str, Any] | None) -> bool:
        if item is None or rec.is_expired(item, self.now):
            return False
        if self.status is not None and rec.get_str(item, "status") != self.status:
            return False
        if self.owner is not None and rec.get_str(item, "owner") != self.owner:
            return False
        return self.flow is None or rec.get_str(item, "flow") == self.flow


def _per_query(limit: int, skip: int, shards: int = rec.INDEX_SHARDS) -> int:
    """A shard query's ``Limit``: the page and its look-ahead entry, plus the shard's expected share of ``skip``
    entries with a quarter more for uneven shards (a second query of a shard stays rare; the over-read is keys only)."""
    return limit + 1 + -(-skip * 5 // (4 * shards))


def list_tasks(
    dynamodb: Any,
    table: str,
    *,
    now: datetime,
    window_days: int,
    status: str | None = None,
    flow: str | None = None,
    owner: str | None = None,
    limit: int = 20,
    cursor: str | None = None,
    offset: int | None = None,
    count: bool = False,
    shards: int = rec.INDEX_SHARDS,
) -> dict[str, Any]:
    """``{"messages": [summary, ...], "total": int | None, "next_cursor": str | None}`` (GW-LIST-2, GW-LIST-3)."""
    _validate(status, limit, cursor, offset)
    with ThreadPoolExecutor(max_workers=min(shards, _MAX_THREADS), thread_name_prefix="asya-list") as pool:
        walk = _Walk(dynamodb, table, status=status, flow=flow, now=now, pool=pool, owner=owner, shards=shards)
        return _page(walk, window_days=window_days, limit=limit, cursor=cursor, offset=offset, count=count)


def _page(
    walk: _Walk, *, window_days: int, limit: int, cursor: str | None, offset: int | None, count: bool
) -> dict[str, Any]:
    today = walk.now.date()
    window = [(today - timedelta(days=back)).isoformat() for back in range(window_days + 1)]
    days, before = window, None
    if cursor is not None:
        start_day, before = walk.resume_point(cursor, window)
        days = window[window.index(start_day) :]
    skip = offset or 0
    per_query = _per_query(limit, skip, walk.shards) if not walk.filtered else _FILTER_BATCH
    walked = chain.from_iterable(
        walk.entries(day, before=before if day == days[0] else None, per_query=per_query) for day in days
    )
    if walk.filtered:
        page = _filtered_page(walk, walked, limit=limit, skip=skip)
        page["total"] = walk.count(window) if count else None
        return page
    # the look-ahead entry tells whether there is a next page
    found = list(islice(walked, skip + limit + 1))
    page_items = found[skip : skip + limit]
    next_cursor = None
    if len(found) > skip + limit and page_items:
        next_cursor = encode_cursor(walk.scope, walk.sort_key(page_items[-1]))
    return {
        "messages": _summaries(walk, page_items),
        "total": walk.count(window) if count else None,
        "next_cursor": next_cursor,
    }


def _filtered_page(walk: _Walk, walked: Iterator[dict[str, Any]], *, limit: int, skip: int) -> dict[str, Any]:
    """A page of a filtered walk: entries are read on in batches of :data:`_FILTER_BATCH` and checked against their
    task items until ``skip + limit + 1`` match (the look-ahead tells a next page) or :data:`_FILTER_SCAN` entries
    past ``skip`` were read; then ``next_cursor`` resumes after the last entry read, so a page found short by the
    scan bound never hides a match from the next one. A filter finds what its count counts (GW-LIST-3)."""
    matched: list[tuple[dict[str, Any], dict[str, Any]]] = []
    scanned = 0
    last: dict[str, Any] | None = None
    while len(matched) <= skip + limit:
        batch = list(islice(walked, _FILTER_BATCH))
        if not batch:
            return {"messages": [summary(item) for _, item in matched[skip:]], "next_cursor": None}
        matched += _matching_pairs(walk, batch)
        scanned += len(batch)
        last = batch[-1]
        if scanned >= _FILTER_SCAN + skip and len(matched) <= skip + limit:
            page = matched[skip:]
            return {
                "messages": [summary(item) for _, item in page],
                "next_cursor": encode_cursor(walk.scope, walk.sort_key(last)),
            }
    page = matched[skip : skip + limit]
    return {
        "messages": [summary(item) for _, item in page],
        "next_cursor": encode_cursor(walk.scope, walk.sort_key(page[-1][0])) if page else None,
    }


def _matching_pairs(walk: _Walk, entries: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(entry, task item)`` of the ``entries`` whose task passes the walk's filters, in entry order."""
    keys = [{"pk": entry["pk"], "sk": entry["sk"]} for entry in entries]
    items = q.batch_get(
        walk.dynamodb, walk.table, keys, projection=_SUMMARY_PROJECTION, consistent=False, complete=True
    )
    by_pk = {rec.get_str(item, "pk"): item for item in items}
    pairs = ((entry, by_pk.get(rec.get_str(entry, "pk"))) for entry in entries)
    return [(entry, item) for entry, item in pairs if item is not None and walk.matches(item)]


def _matching(walk: _Walk, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The task items behind index ``entries`` that pass the walk's filters, in entry order, from eventually
    consistent ``BatchGetItem`` reads (the indexes lag the table, GW-LIST-4: a task deleted or expired since, or whose
    status no longer matches, is left out rather than shown with a status the caller did not ask for)."""
    return [item for _, item in _matching_pairs(walk, entries)]


def _summaries(walk: _Walk, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The summaries of a page's index entries, in their order."""
    return [summary(item) for item in _matching(walk, entries)]
