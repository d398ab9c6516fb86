"""``TaskStore``: task records, status rules, event log and listing in one DynamoDB table (PROTOCOL section 10,
GATEWAY sections 4-8, 13, 14).

Write paths and their cost (GW-DATA-8):

- ``create_task``: a ``PutItem`` of the task item conditional on the id being new, then a ``PutItem`` of its body.
  Event 1 (``Task created``) is not a separate item: it is a function of the task item's creation fields, so the task
  item is the record and event 1 in one atomic write (GW-CREATE-7) and the event log synthesizes it on read
  (``asya.store.events``). A transaction would bill every item twice (GW-DATA-8). A failed body write deletes the task
  item; a gateway dying between the two puts (or an undo that fails too) leaves a task that was never sent, which
  the backstop fails at its deadline, as it does for one dying before the send: a terminal or paused update that
  finds no body item but the task item writes the body then;
- a status update (``apply``/``apply_status`` and the ``report_*``, ``cancel`` and backstop helpers built on it):
  ``asya.store.writer``: for a terminal or paused update one ``UpdateItem`` of the body item, then one conditional
  ``UpdateItem`` of the task item and one ``PutItem`` of the event item;
- ``append_fly``: one ``UpdateItem`` reserving ``n`` numbers, then the fly item(s).

Reads: the task view and the event log are strongly consistent; pre-flight is one ``BatchGetItem`` per 100 keys
(task items and the layer's idempotency items, ``asya.idempotency``); listing reads the eventually consistent
indexes, then the page's task items with one eventually consistent ``BatchGetItem``. Items whose ``ttl`` passed
are ignored everywhere (GW-DATA-5).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya.progress import hop_progress
from asya.store import queries as q
from asya.store import records as rec
from asya.store.bodies import BodyCodec
from asya.store.errors import TaskExistsError
from asya.store.events import FlyValue, expand_events, fly_items
from asya.store.limits import ERROR_LIMIT_BYTES, MESSAGE_LIMIT_BYTES, NAME_LIMIT, clip_text, fit_data_json
from asya.store.transition import MISSING, StatusUpdate
from asya.store.views import task_view
from asya.store.writer import ApplyResult, Outcome, StatusWriter
from asya.timeutil import Clock, format_ts, format_ts_ms, parse_ts, system_clock

__all__ = ["TIMED_OUT", "ApplyResult", "Outcome", "TaskStore"]

_log = logging.getLogger(__name__)

_ROUTE_STEPS: Final = frozenset({"received", "processing", "completed"})
TIMED_OUT: Final = "task timed out"


class TaskStore:
    """The task store shared by the layer, the crew and the gateway. Clients are created lazily when not injected."""

    def __init__(
        self,
        *,
        table: str,
        bucket: str | None = None,
        dynamodb: Any = None,
        s3: Any = None,
        clock: Clock = system_clock,
        list_window_days: int = 30,
    ) -> None:
        self.table = table
        self.bucket = bucket
        self._dynamodb = dynamodb
        self._s3 = s3
        self._clock = clock
        self._window = list_window_days
        self._bodies = BodyCodec(bucket=bucket, s3=self._s3_client)
        self._writer = StatusWriter(table=table, dynamodb=lambda: self.dynamodb, bodies=self._bodies, clock=clock)

    @property
    def dynamodb(self) -> Any:
        if self._dynamodb is None:
            import boto3

            self._dynamodb = boto3.client("dynamodb")
        return self._dynamodb

    def _s3_client(self) -> Any:
        if self._s3 is None:
            import boto3

            self._s3 = boto3.client("s3")
        return self._s3

    # ------------------------------------------------------------------ creation

    def create_task(
        self,
        *,
        task_id: str,
        actor: str,
        flow: str | None = None,
        payload: Any = None,
        deadline_at: str | None = None,
        context_id: str | None = None,
    ) -> dict[str, Any]:
        """Write the task record ``pending``, which carries event 1 ``Task created`` (GW-CREATE-7); the task view.

        Raises :class:`TaskExistsError` when the id is taken.
        """
        now = self._clock()
        now_ms = format_ts_ms(now)
        item = rec.new_task_item(
            task_id, actor=actor, flow=flow, deadline_at=deadline_at, context_id=context_id, now_ms=now_ms
        )
        name, value, stored = self._bodies.encode(task_id, "payload", payload)
        body = {**rec.key(task_id, rec.BODY_SK), name: value}
        try:
            self.dynamodb.put_item(TableName=self.table, Item=item, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                raise TaskExistsError(f"task {task_id!r} already exists") from None
            raise
        try:
            self.dynamodb.put_item(TableName=self.table, Item=body)
        except (ClientError, BotoCoreError):
            # a task without its payload must not stay visible: the caller sees the create fail
            self._undo_create(task_id)
            raise
        return task_view(item, self._bodies.urls(stored), bucket=self.bucket)

    def _undo_create(self, task_id: str) -> None:
        try:
            self.dynamodb.delete_item(TableName=self.table, Key=rec.key(task_id, rec.TASK_SK))
        except (ClientError, BotoCoreError) as exc:
            _log.warning("could not delete task %s after its body write failed: %s", task_id, exc)

    def delete_task(self, task_id: str) -> None:
        """Delete the task, its body, its events and its S3 values (GW-CREATE-8: the first send found no queue)."""
        q.batch_delete(self.dynamodb, self.table, q.task_keys(self.dynamodb, self.table, task_id))
        if self.bucket:
            s3 = self._s3_client()
            listing = s3.list_objects_v2(Bucket=self.bucket, Prefix=f"{rec.TASKS_PREFIX}{task_id}/")
            for obj in listing.get("Contents", []):
                s3.delete_object(Bucket=self.bucket, Key=obj["Key"])

    # ------------------------------------------------------------------ reads

    def _get_item(self, task_id: str, sk: str) -> dict[str, Any] | None:
        return q.get_item(self.dynamodb, self.table, task_id, sk, now=self._clock())

    def get_task(self, task_id: str, *, enforce_deadline: bool = True) -> dict[str, Any] | None:
        """The task view (GW-TASK-1), strongly consistent; ``None`` for an unknown or expired id.

        With ``enforce_deadline`` a ``pending``/``running`` task past its deadline is failed first (GW-BACK-3).
        """
        item = self._get_item(task_id, rec.TASK_SK)
        if item is None:
            return None
        if enforce_deadline and self._overdue(rec.get_str(item, "status"), rec.get_str(item, "deadline_at")):
            self.time_out_overdue(
                task_id, rec.get_str(item, "deadline_at") or "", created_at=rec.get_str(item, "created_at")
            )
            item = self._get_item(task_id, rec.TASK_SK)
            if item is None:
                return None
        body = self._bodies.decode_item(self._get_item(task_id, rec.BODY_SK))
        return task_view(item, body, bucket=self.bucket)

    @staticmethod
    def status_data(task: Mapping[str, Any]) -> dict[str, Any]:
        """The status data object (GW-TASK-2) of a task view, as the SSE catch-up frame sends it."""
        return dict(task["data"])

    def list_tasks(
        self,
        *,
        status: str | None = None,
        flow: str | None = None,
        limit: int = 20,
        cursor: str | None = None,
        offset: int | None = None,
        count: bool = False,
    ) -> dict[str, Any]:
        """GW-LIST-2: ``{"messages", "total", "next_cursor"}``; raises ``ListQueryError`` naming a bad parameter."""
        # deferred: only the gateway lists tasks; an actor's cold start does not pay for the listing module
        from asya.store.listing import list_tasks

        return list_tasks(
            self.dynamodb,
            self.table,
            now=self._clock(),
            window_days=self._window,
            status=status,
            flow=flow,
            limit=limit,
            cursor=cursor,
            offset=offset,
            count=count,
        )

    def events_after(self, task_id: str, after_seq: int) -> list[dict[str, Any]]:
        """Events with ``seq > after_seq`` in order: ``[{"seq": int, "event": "status"|"fly", "data": {...}}]``.

        One strongly consistent query; a fly item is expanded into one event per value (GW-SSE-11). Gaps (GW-DATA-3)
        are returned as they are: the caller decides how long to wait for a missing number.
        """
        items = q.event_items(self.dynamodb, self.table, task_id, after_seq)
        return expand_events(items, after_seq=after_seq, now=self._clock(), resolve=self._bodies.urls)

    def preflight_statuses(self, ids: Sequence[str]) -> dict[str, str]:
        """``{id: status}`` of the ids that have a task record (P-STAT-10): one consistent ``BatchGetItem`` per 100
        ids. A read error is logged and its ids are left out, which callers treat as unknown (processing continues).
        """
        return self.preflight(ids)[0]

    def preflight(
        self, ids: Sequence[str], extra_keys: Sequence[dict[str, Any]] = ()
    ) -> tuple[dict[str, str], list[dict[str, Any]]]:
        """:meth:`preflight_statuses` plus the unexpired items found for ``extra_keys`` (raw DynamoDB items of this
        table that the layer reads before a batch, such as idempotency items) in the same ``BatchGetItem``. A read
        error is logged and answers ``({}, [])``: every id unknown, no item found.
        """
        try:
            return q.batch_statuses(self.dynamodb, self.table, ids, now=self._clock(), extra_keys=extra_keys)
        except (ClientError, BotoCoreError) as exc:
            _log.warning("pre-flight read failed, treating %d ids as unknown: %s", len(ids), exc)
            return {}, []

    # ------------------------------------------------------------------ status writes

    def apply_status(self, task_id: str, update: StatusUpdate) -> bool:
        """Apply one status event; True when it was accepted and logged (P-STAT-1..4, GW-EVT-1..3)."""
        return self.apply(task_id, update).accepted

    def apply(self, task_id: str, update: StatusUpdate) -> ApplyResult:
        """Apply one status event and say what happened (see :class:`Outcome`)."""
        return self._writer.apply(task_id, update)

    def report_running(
        self,
        task_id: str,
        *,
        step: str,
        actor: str,
        route_prev: Sequence[str],
        route_curr: str,
        route_next: Sequence[str],
        extra: Mapping[str, Any] | None = None,
        message: str | None = None,
        envelope_id: str | None = None,
        created_at: str | None = None,
    ) -> bool:
        """A ``running`` event of the layer (P-STAT-5, P-STAT-6) with progress from the input route (P-STAT-8).

        Values over the store's limits are fitted, not refused (``asya.store.limits``): a long route or error text
        must not cost the task its progress."""
        data: dict[str, Any] = {}
        if step in _ROUTE_STEPS:
            data.update(prev=list(route_prev), curr=route_curr, next=list(route_next))
        data.update(extra or {})
        fitted, fitted_json = fit_data_json(data)
        update = StatusUpdate(
            status="running",
            step=step,
            actor=actor[:NAME_LIMIT],
            progress=hop_progress(step, route_prev, route_next),
            message=None if message is None else clip_text(message, MESSAGE_LIMIT_BYTES),
            data=fitted,
            encoded_data=fitted_json,
            envelope_id=envelope_id,
            created_at_hint=created_at,
        )
        return self.apply_status(task_id, update)

    def report_final(
        self,
        task_id: str,
        *,
        status: str,
        result: Any = MISSING,
        error: str | None = None,
        error_details: Mapping[str, Any] | None = None,
        failed_actor: str | None = None,
        checkpoint_key: str | None = None,
        message: str | None = None,
        envelope_id: str | None = None,
        created_at: str | None = None,
    ) -> bool:
        """The final status (P-SINK-5, P-TIME-3, P-ERR-6); a stale write, or a checkpoint attach, returns False.

        ``error`` and ``message`` over the store's limits are clipped (``asya.store.limits``), never refused: the
        final status must be written, and the whole error text stays in ``error_details``."""
        update = StatusUpdate(
            status=status,
            result=result,
            error=None if error is None else clip_text(error, ERROR_LIMIT_BYTES),
            error_details=error_details,
            failed_actor=None if failed_actor is None else failed_actor[:NAME_LIMIT],
            checkpoint_key=checkpoint_key,
            message=None if message is None else clip_text(message, MESSAGE_LIMIT_BYTES),
            envelope_id=envelope_id,
            created_at_hint=created_at,
        )
        return self.apply_status(task_id, update)

    def append_fly(self, task_id: str, values: Sequence[FlyValue]) -> bool:
        """Append FLY values with consecutive sequence numbers (P-STAT-15..17); False for an unknown id."""
        if not values:
            return True
        try:
            response = self.dynamodb.update_item(
                TableName=self.table,
                Key=rec.key(task_id, rec.TASK_SK),
                UpdateExpression="SET last_seq = last_seq + :n",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":n": rec.num_av(len(values))},
                ReturnValues="UPDATED_NEW",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                return False
            raise
        last = rec.get_int(response["Attributes"], "last_seq") or 0
        now = self._clock()
        for item in fly_items(task_id, last, [v.to_dict() for v in values], now=now, now_ms=format_ts_ms(now)):
            self.dynamodb.put_item(TableName=self.table, Item=item)
        return True

    def cancel(self, task_id: str) -> str:
        """GW-CANCEL-1/2: ``"canceled"``, ``"terminal"`` (already terminal, or lost a race) or ``"not_found"``."""
        result = self.apply(task_id, StatusUpdate(status="canceled", message="Canceled by client"))
        if result.outcome is Outcome.NOT_FOUND:
            return "not_found"
        if not result.accepted:
            return "terminal"
        if self.bucket:
            try:
                self._s3_client().delete_object(Bucket=self.bucket, Key=f"paused/{task_id}.json")
            except (ClientError, BotoCoreError) as exc:
                _log.warning("could not delete paused/%s.json after cancel: %s", task_id, exc)
        return "canceled"

    # ------------------------------------------------------------------ backstop

    def _overdue(self, status: str | None, deadline_at: str | None) -> bool:
        deadline = parse_ts(deadline_at)
        return status in ("pending", "running") and deadline is not None and deadline <= self._clock()

    def time_out_overdue(self, task_id: str, deadline_at: str, *, created_at: str | None = None) -> bool:
        """Fail a ``pending``/``running`` task whose deadline is still ``deadline_at`` (GW-BACK-2); True if it did."""
        update = StatusUpdate(
            status="failed",
            error=TIMED_OUT,
            message=TIMED_OUT,
            if_deadline_at=deadline_at,
            created_at_hint=created_at,
        )
        return self.apply_status(task_id, update)

    def expire_if_overdue(self, task: Mapping[str, Any]) -> bool:
        """Read-path backstop (GW-BACK-3) on a task view: time it out when it is past its deadline."""
        status, deadline = task.get("status"), task.get("deadline_at")
        if not isinstance(status, str) or not isinstance(deadline, str) or not self._overdue(status, deadline):
            return False
        return self.time_out_overdue(str(task["id"]), deadline, created_at=task.get("created_at"))

    def overdue_tasks(self) -> list[dict[str, str]]:
        """``[{"id", "deadline_at"}]`` of the ``active_deadlines`` entries due by now, every shard (GW-BACK-2)."""
        return q.overdue_entries(self.dynamodb, self.table, due=format_ts(self._clock()))

    def overdue_pages(self, *, page_size: int | None = None) -> Iterator[list[dict[str, str]]]:
        """The same entries with ``created_at``, one index page at a time, so a sweep can stop between pages."""
        return q.overdue_pages(self.dynamodb, self.table, due=format_ts(self._clock()), page_size=page_size)
