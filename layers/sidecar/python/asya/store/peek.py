"""Batched reads of a multiplexed follower (GW-SSE-20..27: one stream, many tasks).

- :func:`peek_tasks`: the task items of many tasks in ONE ``BatchGetItem`` per 100 ids, eventually consistent for a
  poll (half a read unit per item under 4 KB), strongly consistent for a catch-up. Each becomes a :class:`Snapshot`
  without fly events and without the values of the body, result and pause items: a follower that sees a terminal or
  paused status reads that task again with its strongly consistent query (``TaskReader.snapshot``), since those items
  are written after the task item (GW-DATA-2);
- :func:`fly_by_numbers`: FLY items read by their keys (``EV#{number}``, the last number of a flush's chunk), one
  strongly consistent ``BatchGetItem`` per 100 keys: a fly item that a read misses counts as a status change
  (GW-SSE-6), so an older replica must never answer for it.

Items whose ``ttl`` passed are ignored (GW-DATA-5).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from asya.store import queries as q
from asya.store import records as rec
from asya.store.events import expand_fly
from asya.store.reader import Snapshot
from asya.store.views import status_data

__all__ = ["fly_by_numbers", "peek_tasks"]


def peek_tasks(
    dynamodb: Any, table: str, task_ids: Sequence[str], *, consistent: bool, now: datetime
) -> dict[str, Snapshot]:
    """``{id: Snapshot}`` of the ids whose task item exists and has not expired."""
    keys = [rec.key(task_id, rec.TASK_SK) for task_id in task_ids]
    found: dict[str, Snapshot] = {}
    for item in q.batch_get(dynamodb, table, keys, consistent=consistent):
        task_id = rec.get_str(item, "id")
        if task_id is None or rec.is_expired(item, now):
            continue
        found[task_id] = Snapshot(
            status=rec.get_str(item, "status") or "pending",
            last_seq=rec.get_int(item, "last_seq") or 0,
            data=status_data(item, {}),
            fly=[],
            deadline_at=rec.get_str(item, "deadline_at"),
            status_seq=rec.get_int(item, "status_seq") or 0,
            fly_range=(rec.get_int(item, "fly_from") or 0, rec.get_int(item, "fly_to") or 0),
            owner=rec.get_str(item, "owner"),
        )
    return found


def fly_by_numbers(
    dynamodb: Any, table: str, wanted: Mapping[str, Iterable[int]], *, now: datetime
) -> dict[str, list[dict[str, Any]]]:
    """``{id: [{"seq", "event", "data"}]}``: the values of the fly items stored under the numbers ``wanted`` of each
    task (an item holds the values ``first_seq`` .. its number), in number order."""
    keys = [rec.key(task_id, rec.event_sk(number)) for task_id, numbers in wanted.items() for number in numbers]
    by_task: dict[str, list[dict[str, Any]]] = {}
    prefix = rec.task_pk("")
    for item in q.batch_get(dynamodb, table, keys, consistent=True):
        pk = rec.get_str(item, "pk") or ""
        if pk.startswith(prefix):
            by_task.setdefault(pk[len(prefix) :], []).append(item)
    return {task_id: expand_fly(items, after_seq=0, now=now) for task_id, items in by_task.items()}
