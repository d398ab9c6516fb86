"""Listing over the sharded ``by_created`` and ``by_outcome`` indexes (GATEWAY GW-DATA-2 R2: ``TASKS#{day}#{shard
0..7}``; GW-LIST-2, GW-LIST-3) against moto.

Forty tasks are created from 23:50 on 2026-02-28 to past midnight, some pairs in the same millisecond, so a listing
merges eight shards of two days, breaks ties on the id, and pages cut shards unevenly. The expected order is computed
from what was created, never from the store.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asya.store import TaskStore
from asya.store import records as rec
from asya.store.listing import decode_cursor
from asya.timeutil import format_ts_ms
from tests.clocks import ManualClock

pytestmark = pytest.mark.functional

START = datetime(2026, 2, 28, 23, 50, 0, 120_000, tzinfo=UTC)
LISTED_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TASKS = 40
#: The listing window of the stores here: today, the day before (where the walk crosses midnight) and one empty day,
#: so a walk that runs out still walks past a day without entries. The default 30 days would cost every last page
#: and every count 8 (or 32) shard queries per empty day, and prove nothing more about merging shards.
WINDOW_DAYS = 2


class Requests:
    """The DynamoDB operations a client sends, with their parameters."""

    def __init__(self, client: Any) -> None:
        self.sent: list[tuple[str, dict[str, Any]]] = []
        client.meta.events.register("provide-client-params.dynamodb.*", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.sent.append((model.name, params))

    def of(self, operation: str) -> list[dict[str, Any]]:
        return [params for name, params in self.sent if name == operation]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(START)


@pytest.fixture
def store(mesh: Any, clock: ManualClock) -> TaskStore:
    return TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb, clock=clock, list_window_days=WINDOW_DAYS)


def _task_id(i: int) -> str:
    return f"task-{TASKS - i:02d}" if i % 4 == 2 else f"task-{i:02d}"


def _flow(i: int) -> str:
    return "text-pipeline" if i % 3 else "other"


@pytest.fixture
def created(store: TaskStore, clock: ManualClock) -> list[tuple[str, str]]:
    """``(created_at, id)`` of the forty tasks, newest first; every fourth one shares the millisecond of the one
    before it, and its id sorts after that one's, so the id, not the order of creation, decides the tie."""
    tasks: list[tuple[str, str]] = []
    for i in range(TASKS):
        task_id = _task_id(i)
        store.create_task(task_id=task_id, actor="normalize", flow=_flow(i))
        tasks.append((format_ts_ms(clock.now), task_id))
        if i % 4 != 1:
            clock.now += timedelta(seconds=37)
    clock.now = LISTED_AT
    return sorted(tasks, reverse=True)


@pytest.fixture
def requests(mesh: Any) -> Iterator[Requests]:
    recorder = Requests(mesh.aws.dynamodb)
    yield recorder
    mesh.aws.dynamodb.meta.events.unregister("provide-client-params.dynamodb.*", recorder._record)


def _ids(tasks: list[tuple[str, str]]) -> list[str]:
    return [task_id for _, task_id in tasks]


def _walk(store: TaskStore, limit: int, **query: Any) -> list[list[str]]:
    """Every page of a listing, following ``next_cursor`` to the end."""
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = store.list_tasks(limit=limit, cursor=cursor, **query)
        pages.append([m["id"] for m in page["messages"]])
        cursor = page["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) <= TASKS + 1, "the cursor does not advance"


def _running(store: TaskStore, task_id: str) -> bool:
    return store.report_running(
        task_id,
        step="processing",
        actor="normalize",
        route_prev=[],
        route_curr="normalize",
        route_next=["x"],
        created_at=None,
    )


def test_gw_data_2_tasks_land_on_every_shard_of_their_creation_day(created: list[tuple[str, str]], mesh: Any) -> None:
    entries = mesh.aws.dynamodb.scan(TableName=mesh.resources.table, IndexName="by_created")["Items"]
    partitions = {entry["gsi1sk"]["S"]: entry["gsi1pk"]["S"] for entry in entries}
    assert partitions == {f"{at}#{task_id}": f"TASKS#{at[:10]}#{rec.index_shard(task_id)}" for at, task_id in created}
    # both days, each spread over several shards, all eight shards used
    used = {tuple(part.split("#")[1:]) for part in partitions.values()}
    assert {day for day, _ in used} == {"2026-02-28", "2026-03-01"}
    assert all(sum(1 for day, _ in used if day == wanted) >= 4 for wanted in ("2026-02-28", "2026-03-01"))
    assert {int(shard) for _, shard in used} == set(range(rec.INDEX_SHARDS))


def test_gw_list_2_cursor_pages_merge_the_shards_newest_first_across_midnight(
    store: TaskStore, created: list[tuple[str, str]]
) -> None:
    """Every page size, including one that ends exactly on the last task of 2026-03-01, walks the forty tasks in the
    exact order once: no duplicate, no gap, full pages but the last, and no cursor after it."""
    on_march_1 = sum(1 for at, _ in created if at.startswith("2026-03-01"))
    assert 0 < on_march_1 < TASKS
    for limit in sorted({1, 3, 7, 13, on_march_1, TASKS, 100}):
        pages = _walk(store, limit)
        assert [task_id for page in pages for task_id in page] == _ids(created), limit
        assert all(len(page) == limit for page in pages[:-1]), limit
        assert 0 < len(pages[-1]) <= limit


def test_gw_list_2_the_cursor_is_the_last_sort_key_of_its_page(
    store: TaskStore, created: list[tuple[str, str]]
) -> None:
    page = store.list_tasks(limit=7)
    at, task_id = created[6]
    assert decode_cursor(page["next_cursor"]) == ("by_created", f"{at}#{task_id}")


def test_gw_list_2_a_cursor_resumes_below_its_position_when_newer_tasks_arrive(
    store: TaskStore, created: list[tuple[str, str]]
) -> None:
    first = store.list_tasks(limit=9)
    for i in range(3):
        store.create_task(task_id=f"late-{i}", actor="normalize")
    rest = _walk_from(store, first["next_cursor"], limit=9)
    assert [m["id"] for m in first["messages"]] + rest == _ids(created)


def _walk_from(store: TaskStore, cursor: str | None, *, limit: int) -> list[str]:
    ids: list[str] = []
    while cursor is not None:
        page = store.list_tasks(limit=limit, cursor=cursor)
        ids.extend(m["id"] for m in page["messages"])
        cursor = page["next_cursor"]
    return ids


def test_gw_list_1_offset_pages_equal_the_merged_order(store: TaskStore, created: list[tuple[str, str]]) -> None:
    for offset in (0, 5, 7, 20, 33, 39, 40, 41):
        page = store.list_tasks(limit=7, offset=offset)
        assert [m["id"] for m in page["messages"]] == _ids(created)[offset : offset + 7], offset
        assert (page["next_cursor"] is None) is (offset + 7 >= TASKS), offset


def test_gw_list_3_count_is_exact_over_the_shards_of_every_day(
    store: TaskStore, created: list[tuple[str, str]]
) -> None:
    failed = _ids(created)[1::6]
    running = [task_id for task_id in _ids(created)[::5] if task_id not in failed]
    for task_id in running:
        assert _running(store, task_id)
    for task_id in failed:
        assert store.report_final(task_id, status="failed", error="boom")
    assert store.list_tasks(count=True)["total"] == TASKS
    pending = [task_id for task_id in _ids(created) if task_id not in running and task_id not in failed]
    assert store.list_tasks(status="pending", count=True)["total"] == len(pending)
    assert store.list_tasks(status="running", count=True)["total"] == len(running)
    other = {_task_id(i) for i in range(TASKS) if _flow(i) == "other"}
    assert store.list_tasks(flow="other", count=True)["total"] == len(other)
    assert [task_id for page in _walk(store, 6, flow="other") for task_id in page] == [
        task_id for task_id in _ids(created) if task_id in other
    ]
    # failed tasks come from the sharded by_outcome index, merged newest first over both days
    outcome = store.list_tasks(status="failed", count=True, limit=4)
    assert outcome["total"] == len(failed)
    assert [page for page in _walk(store, 4, status="failed")] == [failed[i : i + 4] for i in range(0, len(failed), 4)]
    assert [task_id for page in _walk(store, 3, status="pending") for task_id in page] == pending


def test_gw_list_2_a_page_queries_each_shard_of_a_day_once_and_reads_at_most_limit_items(
    store: TaskStore, created: list[tuple[str, str]], requests: Requests
) -> None:
    """A page within one day: eight queries of ``limit + 1`` entries and one ``BatchGetItem`` of ``limit`` keys. A
    page that needs the day before queries its eight shards too; no shard is queried twice."""
    on_march_1 = sum(1 for at, _ in created if at.startswith("2026-03-01"))
    for limit, days in ((5, ["2026-03-01"]), (on_march_1 + 3, ["2026-03-01", "2026-02-28"])):
        requests.sent.clear()
        assert len(store.list_tasks(limit=limit)["messages"]) == limit
        queries = requests.of("Query")
        # a day's shards are queried side by side: the order within a day is the threads'
        partitions = sorted(query["ExpressionAttributeValues"][":part"]["S"] for query in queries)
        assert partitions == sorted(f"TASKS#{day}#{shard}" for day in days for shard in range(rec.INDEX_SHARDS))
        assert {query["Limit"] for query in queries} == {limit + 1}
        (batch,) = requests.of("BatchGetItem")
        assert len(batch["RequestItems"][store.table]["Keys"]) == limit


def test_gw_list_1_an_offset_beyond_a_shards_page_queries_that_shard_again(
    store: TaskStore, clock: ManualClock, requests: Requests
) -> None:
    """Four older tasks elsewhere and twenty newer ones in shard 0: ``offset=10, limit=2`` asks each shard for ``3 +
    ceil(10 * 5 / 32) = 5`` entries, and the 13 the page needs are all in shard 0, which is queried again from where
    its page stopped, twice."""
    in_shard_0 = [task_id for task_id in (f"task-{i}" for i in range(200)) if rec.index_shard(task_id) == 0][:20]
    others = [task_id for task_id in (f"other-{i}" for i in range(20)) if rec.index_shard(task_id) != 0][:4]
    created: list[tuple[str, str]] = []
    for task_id in others + in_shard_0:
        store.create_task(task_id=task_id, actor="normalize")
        created.append((format_ts_ms(clock.now), task_id))
        clock.now += timedelta(seconds=1)
    expected = _ids(sorted(created, reverse=True))
    requests.sent.clear()
    page = store.list_tasks(offset=10, limit=2)
    assert [m["id"] for m in page["messages"]] == expected[10:12]
    shard_0 = [
        query for query in requests.of("Query") if query["ExpressionAttributeValues"][":part"]["S"].endswith("#0")
    ]
    assert len(shard_0) == 3 and [query["Limit"] for query in shard_0] == [5, 5, 5]
    assert "ExclusiveStartKey" not in shard_0[0] and all("ExclusiveStartKey" in query for query in shard_0[1:])


def test_raising_the_shard_count_keeps_earlier_entries_listed(
    mesh: Any, clock: ManualClock, created: list[tuple[str, str]]
) -> None:
    """A deployment sized for more creations (``capacity``) writes and lists 32 shards: the forty tasks written
    with eight are still listed, merged in order with the new ones, some of which land past shard 7."""
    wider = TaskStore(
        table=mesh.resources.table,
        dynamodb=mesh.aws.dynamodb,
        clock=clock,
        index_shards=32,
        list_window_days=WINDOW_DAYS,
    )
    clock.now = LISTED_AT - timedelta(hours=1)
    added: list[tuple[str, str]] = []
    for i in range(24):
        task_id = f"wide-{i:02d}"
        wider.create_task(task_id=task_id, actor="normalize")
        added.append((format_ts_ms(clock.now), task_id))
        clock.now += timedelta(seconds=11)
    clock.now = LISTED_AT
    assert any(rec.index_shard(task_id, 32) >= rec.INDEX_SHARDS for _, task_id in added)
    expected = _ids(sorted([*created, *added], reverse=True))
    assert [task_id for page in _walk(wider, 7) for task_id in page] == expected
    assert wider.list_tasks(limit=1, count=True)["total"] == len(expected)


def test_a_shard_count_below_eight_is_refused(mesh: Any) -> None:
    with pytest.raises(ValueError, match="index_shards must be >= 8, got 4"):
        TaskStore(table=mesh.resources.table, dynamodb=mesh.aws.dynamodb, index_shards=4)
