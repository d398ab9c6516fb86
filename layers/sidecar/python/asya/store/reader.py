"""Reads of the task store (GW-DATA-1, GW-DATA-2, GW-DATA-5, GW-SSE-5, GW-SSE-9, GW-TASK-3; P-STAT-10).

- the task view's items (``view_items``): two strongly consistent queries of the task's partition, ``BODY`` with the
  ``CHILD#`` fence items, then ``PAUSE``, ``RESULT`` and ``TASK``;
- a follower's read (``snapshot``): ONE strongly consistent query from the first fly item after a position up to the
  task item, which returns the fly items, ``PAUSE``, ``RESULT`` and ``TASK`` (nothing else sorts between them);
- pre-flight (``preflight``): one strongly consistent ``BatchGetItem`` per 100 keys; a read error answers ``{}``.

A succeeded task item that names its result's checkpoint bytes (``result_span``) has no result item: the result is
read from the checkpoint with one ranged GET (GW-DATA-10). Items whose ``ttl`` passed are ignored (GW-DATA-5). A
terminal task item that announces its result item (``has_result``) before the item exists is between its writer's two
writes: the reader re-reads the result item for up to 2 s (GW-DATA-2).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya.store import queries as q
from asya.store import records as rec
from asya.store.bodies import BodyCodec
from asya.store.events import expand_fly
from asya.store.transition import TERMINAL
from asya.store.views import status_data
from asya.timeutil import Clock

__all__ = ["Snapshot", "TaskReader"]

_log = logging.getLogger(__name__)

#: How long a reader waits for a result item its task item announces (GW-DATA-2).
_RESULT_WAIT: Final = 2.0
_RESULT_POLL: Final = 0.1


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One follower's read of a task (GW-SSE-5, GW-SSE-9): the record's state and the fly events after a position."""

    status: str
    last_seq: int
    data: dict[str, Any]
    fly: list[dict[str, Any]]
    deadline_at: str | None
    #: the number of the record's latest status change (no fly item will ever carry it)
    status_seq: int = 0
    #: the numbers of the newest FLY flush (``0, 0`` when none): only these may still get their item
    fly_range: tuple[int, int] = (0, 0)
    #: the creator's subject under ``owner_only`` (GW-EDGE-5); read by ``peek`` only
    owner: str | None = None

    def may_be_fly(self, number: int) -> bool:
        """Whether a number without a fly item may still get one (the newest flush's), so a follower holds it back;
        any other such number is a status change (GW-SSE-6)."""
        return number != self.status_seq and self.fly_range[0] <= number <= self.fly_range[1]

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL


class TaskReader:
    """Reads of the task table; ``dynamodb`` returns the client (called on use)."""

    def __init__(
        self,
        *,
        table: str,
        dynamodb: Callable[[], Any],
        bodies: BodyCodec,
        clock: Clock,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._table = table
        self._client = dynamodb
        self._bodies = bodies
        self._clock = clock
        self._sleep = sleep

    @property
    def dynamodb(self) -> Any:
        return self._client()

    def _get_item(self, task_id: str, sk: str) -> dict[str, Any] | None:
        return q.get_item(self.dynamodb, self._table, task_id, sk, now=self._clock())

    def view_items(self, task_id: str) -> dict[str, dict[str, Any]]:
        now = self._clock()
        return {
            rec.get_str(item, "sk") or "": item
            for item in q.view_items(self.dynamodb, self._table, task_id)
            if not rec.is_expired(item, now)
        }

    def values(self, task_id: str, item: Mapping[str, Any], items: Mapping[str, Any]) -> dict[str, Any]:
        """The decoded large values of a task: those kept on its task item (GW-DATA-8), then its body, result and
        pause items (GW-DATA-2)."""
        result = items.get(rec.RESULT_SK)
        if result is None and item.get("has_result") and rec.get_str(item, "status") in TERMINAL:
            result = self._await_result(task_id)
        values: dict[str, Any] = self._bodies.decode_item(item)
        for extra in (items.get(rec.BODY_SK), result, items.get(rec.PAUSE_SK)):
            values.update(self._bodies.decode_item(extra))
        span = rec.parse_span(rec.get_str(item, "result_span"))
        checkpoint = rec.get_str(item, "checkpoint_key")
        if span is not None and checkpoint and "result" not in values and rec.get_str(item, "status") == "succeeded":
            values.update(self._bodies.checkpoint_result(checkpoint, span))
        return values

    def _await_result(self, task_id: str) -> dict[str, Any] | None:
        """The result item a terminal task announces (``has_result``), read again for up to 2 s: its writer puts it
        right after the task item (GW-DATA-2)."""
        waited = 0.0
        while True:
            found = self._get_item(task_id, rec.RESULT_SK)
            if found is not None or waited >= _RESULT_WAIT:
                if found is None:
                    _log.warning("task %s: its result item is still missing after %.0f s", task_id, _RESULT_WAIT)
                return found
            self._sleep(_RESULT_POLL)
            waited += _RESULT_POLL

    def snapshot(self, task_id: str, after_seq: int) -> Snapshot | None:
        """A follower's read (GW-SSE-5, GW-SSE-9): ONE strongly consistent query for the task item, its result and
        pause items and the fly events after ``after_seq``; ``None`` for an unknown or expired task."""
        now = self._clock()
        items = q.follow_items(self.dynamodb, self._table, task_id, after_seq)
        by_sk = {rec.get_str(i, "sk") or "": i for i in items if not rec.is_expired(i, now)}
        item = by_sk.get(rec.TASK_SK)
        if item is None:
            return None
        status = rec.get_str(item, "status") or "pending"
        values = self.values(task_id, item, by_sk) if status in ("succeeded", "failed", "paused") else {}
        return Snapshot(
            status=status,
            last_seq=rec.get_int(item, "last_seq") or 0,
            data=self._bodies.urls(status_data(item, values)),
            fly=expand_fly(items, after_seq=after_seq, now=now),
            deadline_at=rec.get_str(item, "deadline_at"),
            status_seq=rec.get_int(item, "status_seq") or 0,
            fly_range=(rec.get_int(item, "fly_from") or 0, rec.get_int(item, "fly_to") or 0),
        )

    def preflight(
        self, keys: Sequence[dict[str, Any]], *, strict: bool = False
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """Pre-flight (P-STAT-10): the unexpired items found for ``keys`` (task items, child fence items), by ``(pk,
        sk)``, from one strongly consistent ``BatchGetItem`` per 100 keys. A read error is logged and answers ``{}``:
        every item unknown, processing continues and the claim decides. ``strict``: a read error, or keys left
        unprocessed (``IncompleteReadError``), raise instead, for a caller that must tell "not found" from
        "not read"."""
        if strict:
            return _by_key(q.preflight_items(self.dynamodb, self._table, keys, now=self._clock(), complete=True))
        try:
            items = q.preflight_items(self.dynamodb, self._table, keys, now=self._clock())
        except (ClientError, BotoCoreError) as exc:
            _log.warning("pre-flight read failed, treating %d keys as unknown: %s", len(keys), exc)
            return {}
        return _by_key(items)

    def statuses(self, ids: Sequence[str]) -> dict[str, str]:
        """``{id: status}`` of the ids that have a task record, from one consistent read per 100 ids (best effort: a
        read error answers ``{}``)."""
        found = self.preflight([rec.key(task_id, rec.TASK_SK) for task_id in ids])
        return {
            task_id: status
            for item in found.values()
            if (task_id := rec.get_str(item, "id")) is not None and (status := rec.get_str(item, "status")) is not None
        }


def _by_key(items: Sequence[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(rec.get_str(i, "pk") or "", rec.get_str(i, "sk") or ""): i for i in items}
