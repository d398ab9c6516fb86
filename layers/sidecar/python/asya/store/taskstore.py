"""``TaskStore``: task records, status rules, hop fences, FLY log and listing in one DynamoDB table (docs/protocol.md
6.1, P-ACK-8; docs/http.md, "The task store").

Write paths and their cost (GW-DATA-8; the layout is in ``asya.store.records``):

- ``create_task``: ONE conditional ``PutItem`` of the task item (it is the record and event 1, GW-CREATE-7; no
  transaction, which would bill every item twice), then a ``PutItem`` of the body item for a non-null payload. A
  failed body write deletes the task item;
- the hop claim (``claim_hop``): ONE conditional ``UpdateItem`` of the envelope's fence item: for a tracked root under
  progress ``hops``/``detailed`` the task item, where the same write is the hop's running status (P-STAT-19); under
  ``final`` the task item's fence only; for a child its child item (``asya.store.fences``);
- a status update (``apply`` and the ``report_*``, ``cancel`` and backstop helpers built on it): ONE conditional
  ``UpdateItem`` of the task item (``asya.store.writer``); an accepted terminal update with a result or error details
  then puts the ``RESULT`` item, a paused one the ``PAUSE`` item; x-pause puts its ``PAUSE`` item first
  (``put_pause_item``), then makes its paused write, which is its hop claim (``pause``, P-PAUSE-5): 2 write units;
- ``append_fly``: one ``UpdateItem`` taking ``n`` numbers (``ADD``-style, conditional on a non-terminal task), then
  the fly item(s).

Reads: the task view and followers' reads are strongly consistent queries of the task's partition; pre-flight is one
``BatchGetItem`` per 100 keys (task items and child fence items); listing reads the keys-only indexes, then the page's
task items with one eventually consistent ``BatchGetItem``. Items whose ``ttl`` passed are ignored everywhere
(GW-DATA-5). A reader that finds ``has_result`` without the result item (its writer is between its two writes)
re-reads it for up to 2 s (GW-DATA-2).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, NotRequired, TypedDict, Unpack

from botocore.exceptions import BotoCoreError, ClientError

from asya import tableschema
from asya.awsclients import ACTOR_BUDGET, ClientBudget, aws_client
from asya.envelope import dumps
from asya.missingkey import is_missing
from asya.progress import hop_progress
from asya.store import queries as q
from asya.store import records as rec
from asya.store.bodies import BodyCodec
from asya.store.errors import TaskExistsError
from asya.store.events import FlyValue, fly_items
from asya.store.fences import ChildFinish, ChildOutcome, Fences, fence_key
from asya.store.inline import payload_fits
from asya.store.limits import ERROR_LIMIT_BYTES, MESSAGE_LIMIT_BYTES, NAME_LIMIT, clip_text, fit_data_json
from asya.store.reader import Snapshot, TaskReader
from asya.store.transition import MISSING, StatusUpdate
from asya.store.updates import is_long_deadline
from asya.store.views import fence_of, task_view
from asya.store.writer import ApplyResult, Outcome, StatusWriter
from asya.timeutil import Clock, format_ts, format_ts_ms, parse_ts, system_clock

if TYPE_CHECKING:  # the listing module is imported when a listing runs (TaskStore.list_tasks)
    from asya.store.listing import ListQuery

__all__ = ["TIMED_OUT", "ApplyResult", "Outcome", "RunningFields", "Snapshot", "TaskStore"]

_log = logging.getLogger(__name__)

_ROUTE_STEPS: Final = frozenset({"received", "processing", "completed"})
TIMED_OUT: Final = "task timed out"
#: The pause item's lifetime (GW-DATA-2): no write removes it when the task ends.
_PAUSE_TTL: Final = timedelta(days=400)


class RunningFields(TypedDict):
    """The keywords of a ``running`` update (:meth:`TaskStore.running`, :meth:`TaskStore.report_running`)."""

    step: str
    actor: str
    route_prev: Sequence[str]
    route_curr: str
    route_next: Sequence[str]
    extra: NotRequired[Mapping[str, Any] | None]
    message: NotRequired[str | None]
    envelope_id: NotRequired[str | None]
    created_at: NotRequired[str | None]
    detailed: NotRequired[bool]


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
        index_shards: int = rec.INDEX_SHARDS,
        budget: ClientBudget = ACTOR_BUDGET,
    ) -> None:
        """``budget``: the retry mode and timeouts of the clients made when ``dynamodb``/``s3`` are not given."""
        if index_shards < rec.INDEX_SHARDS:
            raise ValueError(f"index_shards must be >= {rec.INDEX_SHARDS}, got {index_shards!r}")
        self.table = table
        self._budget = budget
        #: partitions per day of ``by_created`` written and listed (never below 8, so every earlier day stays listed)
        self.index_shards = index_shards
        self.bucket = bucket
        self._dynamodb = dynamodb
        self._s3 = s3
        self._clock = clock
        self._window = list_window_days
        self._bodies = BodyCodec(bucket=bucket, s3=self._s3_client)
        self._writer = StatusWriter(table=table, dynamodb=lambda: self.dynamodb, bodies=self._bodies, clock=clock)
        self._fences = Fences(table=table, dynamodb=lambda: self.dynamodb)
        self._reader = TaskReader(table=table, dynamodb=lambda: self.dynamodb, bodies=self._bodies, clock=clock)

    @property
    def dynamodb(self) -> Any:
        if self._dynamodb is None:
            self._dynamodb = aws_client("dynamodb", self._budget)
        return self._dynamodb

    def _s3_client(self) -> Any:
        if self._s3 is None:
            self._s3 = aws_client("s3", self._budget)
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
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Write the task record ``pending``, which is event 1 ``Task created`` (GW-CREATE-7); the task view.

        Raises :class:`TaskExistsError` when the id is taken.

        A payload that does not fit the task item goes to its ``BODY`` item first, so a failed body write (a
        throttle) leaves no task behind, and nothing has to be undone (GW-OVL-4); a body item left by a failed task
        write expires with its ``ttl``. The task item's conditional put recognises its own earlier write when the
        SDK retried it after a lost answer: the item that refused it carries the put's own token (GW-OVL-5).
        """
        now = self._clock()
        now_ms = format_ts_ms(now)
        item = rec.new_task_item(
            task_id,
            actor=actor,
            flow=flow,
            deadline_at=deadline_at,
            context_id=context_id,
            owner=owner,
            now_ms=now_ms,
            index_shards=self.index_shards,
            long_deadline=deadline_at is not None and is_long_deadline(deadline_at, now),
        )
        token = rec.new_write_token()
        item[rec.WRITE_TOKEN] = rec.str_av(token)
        stored: dict[str, Any] = {}
        body: dict[str, Any] | None = None
        text = dumps(payload) if payload is not None else None
        if text is not None and payload_fits(item, text):
            # an input that fits stays on the task item: no body item (GW-DATA-8)
            item["payload"] = rec.str_av(text)
            stored = {"payload": payload}
        elif payload is not None:
            name, value, stored = self._bodies.encode(task_id, "payload", payload)
            expires = (parse_ts(deadline_at) if deadline_at else None) or now
            body = {
                **rec.key(task_id, rec.BODY_SK),
                name: value,
                "ttl": rec.num_av(rec.epoch(expires + rec.BODY_TTL_EXTRA)),
            }
        if body is not None:
            self._put_body(task_id, body)
        old = self._put_new(item)
        if old is not None and rec.get_str(old, rec.WRITE_TOKEN) != token:
            raise TaskExistsError(f"task {task_id!r} already exists")
        return task_view(item, self._bodies.urls(stored), bucket=self.bucket)

    def _put_new(self, item: dict[str, Any]) -> dict[str, Any] | None:
        """Put ``item`` only where no item has its key: ``None`` when written, else the item already there (a write
        the SDK sent again after its answer was lost finds its own)."""
        try:
            self.dynamodb.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression="attribute_not_exists(pk)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return exc.response.get("Item") or {}  # type: ignore[return-value]
        return None

    def _put_body(self, task_id: str, body: dict[str, Any]) -> None:
        """Write a new task's ``BODY`` item, never over the body of another create of the same id (MCP and A2A
        derive ids from the client's request, so two creates may race): a body already there is taken when it holds
        the same value, or is a leftover of a create whose task item was never written."""
        old = self._put_new(body)
        if old is not None:
            if {k: v for k, v in old.items() if k != "ttl"} == {k: v for k, v in body.items() if k != "ttl"}:
                return
            if self._get_item(task_id, rec.TASK_SK) is not None:
                raise TaskExistsError(f"task {task_id!r} already exists")
            self.dynamodb.put_item(TableName=self.table, Item=body)

    def delete_task(self, task_id: str) -> None:
        """Delete the task, its body, its events and its S3 values (GW-CREATE-8: the first send found no queue)."""
        q.batch_delete(self.dynamodb, self.table, q.task_keys(self.dynamodb, self.table, task_id))
        if self.bucket:
            s3 = self._s3_client()
            listing = s3.list_objects_v2(Bucket=self.bucket, Prefix=tableschema.task_values_prefix(task_id))
            for obj in listing.get("Contents", []):
                s3.delete_object(Bucket=self.bucket, Key=obj["Key"])

    # ------------------------------------------------------------------ reads

    def _get_item(self, task_id: str, sk: str) -> dict[str, Any] | None:
        return q.get_item(self.dynamodb, self.table, task_id, sk, now=self._clock())

    def get_task(self, task_id: str, *, enforce_deadline: bool = True) -> dict[str, Any] | None:
        """The task view (GW-TASK-1), strongly consistent; ``None`` for an unknown or expired id.

        With ``enforce_deadline`` a ``pending``/``running`` task past its deadline is failed first (GW-BACK-3). A paused
        task's view adds the state stored at the pause (``paused_state``, GW-TASK-10): one S3 read more.
        """
        items = self._reader.view_items(task_id)
        item = items.get(rec.TASK_SK)
        if item is None:
            return None
        if enforce_deadline and self._overdue(rec.get_str(item, "status"), rec.get_str(item, "deadline_at")):
            self.time_out_overdue(
                task_id, rec.get_str(item, "deadline_at") or "", created_at=rec.get_str(item, "created_at")
            )
            items = self._reader.view_items(task_id)
            item = items.get(rec.TASK_SK)
            if item is None:
                return None
        values = self._reader.values(task_id, item, items)
        if rec.get_str(item, "status") == "paused":
            values.update(self._bodies.paused_state(task_id))  # GW-TASK-10
        children = [child for sk, child in items.items() if sk.startswith(rec.CHILD_PREFIX)]
        return task_view(item, values, bucket=self.bucket, children=children)

    def history_heads(self, task_id: str) -> list[str] | None:
        """The run history's chain heads (P-HIST-4): ``history_key`` and ``history_prev`` of the task item, then of its
        children's fence items, from one strongly consistent read of the task's items; ``None`` for an unknown task."""
        items = self._reader.view_items(task_id)
        if rec.TASK_SK not in items:
            return None
        heads: list[str] = []
        for sk in sorted(items, key=lambda sk: sk != rec.TASK_SK):
            for name in ("history_key", "history_prev"):
                value = rec.get_str(items[sk], name)
                if value and value not in heads:
                    heads.append(value)
        return heads

    def history_object(self, key: str) -> str | None:
        """The text of one run-history object (P-HIST-5); ``None`` when it does not exist (yet)."""
        if self.bucket is None:
            return None
        s3 = self._s3_client()
        try:
            body = s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except ClientError as exc:
            if is_missing(s3, self.bucket, key, exc):
                return None
            raise
        return bytes(body).decode("utf-8")

    def snapshot(self, task_id: str, after_seq: int) -> Snapshot | None:
        """A follower's read (GW-SSE-5, GW-SSE-9): the task item, its result and pause items and the fly events after
        ``after_seq``, one strongly consistent query; ``None`` for an unknown or expired task."""
        return self._reader.snapshot(task_id, after_seq)

    def peek(self, task_ids: Sequence[str], *, consistent: bool = False) -> dict[str, Snapshot]:
        """Many tasks' items in one ``BatchGetItem`` per 100 ids, without fly events or large values (GW-SSE-20..27,
        ``asya.store.peek``): eventually consistent for a multiplexed follower's polls."""
        from asya.store.peek import peek_tasks  # deferred: only the gateway's multiplexed stream reads this way

        return peek_tasks(self.dynamodb, self.table, task_ids, consistent=consistent, now=self._clock())

    def fly_by_numbers(self, wanted: Mapping[str, Sequence[int]]) -> dict[str, list[dict[str, Any]]]:
        """FLY events stored under the numbers ``wanted`` of each task, strongly consistent (``asya.store.peek``)."""
        from asya.store.peek import fly_by_numbers

        return fly_by_numbers(self.dynamodb, self.table, wanted, now=self._clock())

    @staticmethod
    def status_data(task: Mapping[str, Any]) -> dict[str, Any]:
        """The status data object (GW-TASK-2) of a task view, as the SSE catch-up frame sends it."""
        return dict(task["data"])

    def list_tasks(self, **query: Unpack[ListQuery]) -> dict[str, Any]:
        """GW-LIST-2: ``{"messages", "total", "next_cursor"}``; raises ``ListQueryError`` naming a bad parameter."""
        # deferred: only the gateway lists tasks; an actor's cold start does not pay for the listing module
        from asya.store.listing import list_tasks

        return list_tasks(
            self.dynamodb,
            self.table,
            now=self._clock(),
            window_days=self._window,
            shards=self.index_shards,
            **query,
        )

    def preflight(
        self, keys: Sequence[dict[str, Any]], *, strict: bool = False
    ) -> dict[tuple[str, str], dict[str, Any]]:
        """Pre-flight (P-STAT-10): the unexpired items found for ``keys`` by ``(pk, sk)``, one strongly consistent
        ``BatchGetItem`` per 100 keys; a read error answers ``{}`` (every item unknown, the claim decides), or with
        ``strict`` raises (``ClientError``, ``BotoCoreError``, ``IncompleteReadError``)."""
        return self._reader.preflight(keys, strict=strict)

    def unstarted(self, task_id: str) -> bool:
        """True when the task is ``pending`` and no actor has claimed a hop of it yet (no ``fence_h``): its first
        envelope may never have been sent (GW-CREATE-R3-7). One strongly consistent read."""
        item = self._get_item(task_id, rec.TASK_SK)
        return item is not None and rec.get_str(item, "status") == "pending" and "fence_h" not in item

    def task_status(self, task_id: str) -> str | None:
        """The task's status from one eventually consistent ``GetItem`` projecting ``status`` only (0.5 read unit):
        the layer's cancel check between yields (P-CANCEL-1..5, ``asya.cancelwatch``); ``None`` when absent."""
        item = self.dynamodb.get_item(
            TableName=self.table,
            Key=rec.key(task_id, rec.TASK_SK),
            ProjectionExpression="#s",
            ExpressionAttributeNames={"#s": "status"},
        ).get("Item")
        return rec.get_str(item, "status") if item else None

    def statuses(self, ids: Sequence[str]) -> dict[str, str]:
        """``{id: status}`` of the ids that have a task record (best effort: a read error answers ``{}``)."""
        return self._reader.statuses(ids)

    # ------------------------------------------------------------------ status writes

    def apply_status(self, task_id: str, update: StatusUpdate) -> bool:
        """Apply one status event; True when it was accepted and logged (P-STAT-1..4, GW-EVT-1..3)."""
        return self.apply(task_id, update).accepted

    def apply(self, task_id: str, update: StatusUpdate) -> ApplyResult:
        """Apply one status event and say what happened (see :class:`Outcome`)."""
        return self._writer.apply(task_id, update)

    def report_running(self, task_id: str, **fields: Unpack[RunningFields]) -> bool:
        """A best-effort ``running`` update of the layer (P-STAT-5, P-STAT-6): :meth:`running` without a claim or
        refence; True when accepted."""
        return self.running(task_id, **fields).accepted

    def running(
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
        detailed: bool = False,
        claim: tuple[int, int, int] | None = None,
        refence: tuple[int, int] | None = None,
        history: tuple[str, str | None] | None = None,
    ) -> ApplyResult:
        """A ``running`` update with progress from the input route (P-STAT-8); with ``claim`` it is also the hop claim
        (P-ACK-8, P-STAT-19), with ``refence`` the retry's fence write (P-RES-8). The route lists are stored under
        progress ``detailed`` only (P-STAT-19). Values over the store's limits are fitted, not refused
        (``asya.store.limits``): a long route or error text must not cost the task its progress."""
        data: dict[str, Any] = {}
        if detailed and step in _ROUTE_STEPS:
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
            claim=claim,
            refence=refence,
            history=history,
        )
        return self.apply(task_id, update)

    def claim_fence(
        self,
        envelope_id: str,
        parent_id: str | None,
        *,
        claim: tuple[int, int, int],
        actor: str,
        history: tuple[str, str | None] | None = None,
    ) -> ApplyResult:
        """A hop claim that writes no status: a child's (on its child item) or, under progress ``final``, a tracked
        envelope's (fence and lease only) (P-ACK-8, P-STAT-19; ``asya.store.fences``)."""
        return self._fences.claim(envelope_id, parent_id, claim=claim, actor=actor, now=self._clock(), history=history)

    def release_lease(self, envelope_id: str, parent_id: str | None, fence: tuple[int, int]) -> bool:
        """Release this run's lease on its fence item (P-ACK-8), best effort for the caller."""
        return self._fences.release(envelope_id, parent_id, fence)

    def advance_fence(
        self, envelope_id: str, parent_id: str | None, fence: tuple[int, int], *, error: str | None = None
    ) -> bool:
        """The retry's fence ``(h, n + 1)`` on a fence item that carries no status (P-RES-8); a child's item also
        says ``retrying`` with the handler's ``error`` (the child tree, ``asya.store.fences``)."""
        return self._fences.advance(envelope_id, parent_id, fence, error=error)

    def finish_child(self, envelope_id: str, parent_id: str, outcome: ChildOutcome) -> ChildFinish:
        """A child's last hop reached x-sink or an aggregator, or its infrastructure error x-sump: mark its fence item
        finished (P-ACK-7), with how it ended (``outcome``: the child tree)."""
        return self._fences.finish(envelope_id, parent_id, outcome)

    @staticmethod
    def fence_key(envelope_id: str, parent_id: str | None) -> dict[str, Any]:
        return fence_key(envelope_id, parent_id)

    @staticmethod
    def fence_of(item: Mapping[str, Any]) -> tuple[int, int] | None:
        return fence_of(item)

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
        checkpoint_line: int | None = None,
        result_span: tuple[int, int] | None = None,
        message: str | None = None,
        envelope_id: str | None = None,
        created_at: str | None = None,
        writer_id: str | None = None,
    ) -> bool:
        """The final status (P-SINK-5, P-TIME-3, P-ERR-6); a stale write, or a checkpoint attach, returns False.
        ``writer_id`` (the SQS message id of the record writing it) tags the task so that only this writer, or a
        redelivery of its message, writes the result item (GW-DATA-2).

        ``error`` and ``message`` over the store's limits are clipped (``asya.store.limits``), never refused: the
        final status must be written, and the whole error text stays in ``error_details``. ``result_span`` names the
        bytes of the checkpoint line whose ``payload`` is the result: a result too large for the task item is then
        read from there, not written to a result item (GW-DATA-10)."""
        update = StatusUpdate(
            status=status,
            result=result,
            error=None if error is None else clip_text(error, ERROR_LIMIT_BYTES),
            error_details=error_details,
            failed_actor=None if failed_actor is None else failed_actor[:NAME_LIMIT],
            checkpoint_key=checkpoint_key,
            checkpoint_line=checkpoint_line,
            result_span=result_span,
            message=None if message is None else clip_text(message, MESSAGE_LIMIT_BYTES),
            envelope_id=envelope_id,
            created_at_hint=created_at,
            writer_id=writer_id,
        )
        return self.apply_status(task_id, update)

    def attach_checkpoint(self, task_id: str, *, key: str, line: int | None) -> bool:
        """Attach a crew checkpoint to a task that has none, terminal or not, changing no status (P-STAT-2)."""
        return self._writer.attach(task_id, key, line, None).outcome is Outcome.CHECKPOINT_ATTACHED

    def append_fly(self, task_id: str, values: Sequence[FlyValue]) -> bool:
        """Append FLY values with consecutive numbers taken from the task item's counter (P-STAT-15..17); False for an
        unknown or terminal task (the values are dropped); an empty flush writes nothing."""
        if not values:
            return True
        try:
            response = self.dynamodb.update_item(
                TableName=self.table,
                Key=rec.key(task_id, rec.TASK_SK),
                # the numbers of the newest flush are named on the item (fly_from..fly_to): a follower holds back
                # only those while their item may still be on its way; any other number without an item is a status
                # change (GW-SSE-6). SET x = x + n is ADD's atomic increment, with the old value readable beside it.
                UpdateExpression="SET last_seq = last_seq + :n, fly_from = last_seq + :one, fly_to = last_seq + :n",
                ConditionExpression="attribute_exists(pk) AND status_order < :terminal",
                ExpressionAttributeValues={
                    ":n": rec.num_av(len(values)),
                    ":one": rec.num_av(1),
                    ":terminal": rec.num_av(3),
                },
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

    def put_pause_item(self, task_id: str, *, pause_metadata: Mapping[str, Any], fence: tuple[int, int]) -> None:
        """Step (1) of x-pause (P-PAUSE-5): the ``PAUSE`` item with ``pause_metadata`` (S3 above 64 KiB) and the fence
        of the hop that pauses, kept 400 days (GW-DATA-2). One ``PutItem``; an error propagates (durable path)."""
        name, value, _ = self._bodies.encode(task_id, "pause_metadata", dict(pause_metadata))
        item = {
            **rec.key(task_id, rec.PAUSE_SK),
            name: value,
            "fence_h": rec.num_av(fence[0]),
            "fence_a": rec.num_av(fence[1]),
            "ttl": rec.num_av(rec.epoch(self._clock() + _PAUSE_TTL)),
        }
        self.dynamodb.put_item(TableName=self.table, Item=item)

    def pause(
        self,
        task_id: str,
        *,
        actor: str,
        pause_metadata: Mapping[str, Any],
        remaining_seconds: int | None,
        claim: tuple[int, int, int],
        envelope_id: str | None = None,
        created_at: str | None = None,
    ) -> ApplyResult:
        """Step (2) of x-pause (P-PAUSE-5): the status write ``paused`` that freezes the deadline (``deadline_at``
        removed, ``remaining_seconds`` stored) and is x-pause's hop claim (P-ACK-8). ONE conditional ``UpdateItem``;
        the pause item is not written again (call :meth:`put_pause_item` first)."""
        update = StatusUpdate(
            status="paused",
            actor=actor[:NAME_LIMIT],
            pause_metadata=pause_metadata,
            remaining_seconds=remaining_seconds,
            claim=claim,
            envelope_id=envelope_id,
            created_at_hint=created_at,
        )
        return self.apply(task_id, update)

    def has_paused_envelope(self, task_id: str) -> bool:
        """Whether ``paused/{id}.json`` exists (P-RESUME-1, GW-RESUME-2): one ``HeadObject`` (a 403 is told from a
        missing key by ``asya.missingkey``); other S3 errors propagate."""
        if not self.bucket:
            return False
        key = tableschema.paused_key(task_id)
        s3 = self._s3_client()
        try:
            s3.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if is_missing(s3, self.bucket, key, exc):
                return False
            raise
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
                self._s3_client().delete_object(Bucket=self.bucket, Key=tableschema.paused_key(task_id))
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

    def long_deadline_pages(self, *, page_size: int | None = None) -> Iterator[list[dict[str, str]]]:
        """``[{"id", "deadline_at"}]`` of the ``long_deadlines`` entries due by now, one index page at a time, so a
        sweep can stop between pages (GW-BACK-1)."""
        return q.long_deadline_pages(self.dynamodb, self.table, due=format_ts(self._clock()), page_size=page_size)
