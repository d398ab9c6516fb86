"""Status writes of the task store: one status event applied to a task (PROTOCOL P-STAT-1..4, GATEWAY GW-EVT-1..3,
GW-DATA-3, GW-DATA-4, GW-BACK-4).

``StatusWriter.apply(task_id, update)``:

1. a terminal or paused update first writes its large values and the expiry to the body item (``result`` and
   ``error_details`` only if absent, so a losing terminal write cannot replace the winner's), conditional on the body
   existing; a task whose body is missing (its creation failed half-way) gets it written then, an unknown id is a
   no-op (P-STAT-4);
2. one conditional ``UpdateItem`` of the task item (``asya.store.updates``): blind first, then exact from the item a
   failed condition returned, at most five times; a stale update changes nothing, a stale terminal one attaches its
   checkpoint key (GW-BACK-4);
3. one ``PutItem`` of the event item with the sequence number the update reserved. A writer failing between 2 and 3
   leaves a gap (GW-DATA-3); when the gap is the task's final event, the next terminal write for the task fills it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from botocore.exceptions import ClientError

from asya.store import queries as q
from asya.store import records as rec
from asya.store import updates as upd
from asya.store.bodies import BodyCodec
from asya.store.errors import StoreConflictError
from asya.store.events import status_event_item
from asya.store.transition import MISSING, TERMINAL, StatusUpdate, Verdict, decide
from asya.store.views import status_data, stored_state
from asya.timeutil import Clock, format_ts_ms, parse_ts

__all__ = ["ApplyResult", "Outcome", "StatusWriter"]

_log = logging.getLogger(__name__)

_MAX_ATTEMPTS: Final = 5


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    STALE = "stale"
    NOT_FOUND = "not_found"
    CHECKPOINT_ATTACHED = "checkpoint_attached"


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What a status update did; ``status`` is the task's status after it (``None`` for an unknown id)."""

    outcome: Outcome
    status: str | None = None
    seq: int | None = None

    @property
    def accepted(self) -> bool:
        return self.outcome is Outcome.ACCEPTED


class StatusWriter:
    """Applies status updates to the tasks of ``table``; ``dynamodb`` returns the client (called on use)."""

    def __init__(self, *, table: str, dynamodb: Callable[[], Any], bodies: BodyCodec, clock: Clock) -> None:
        self.table = table
        self._client = dynamodb
        self._bodies = bodies
        self._clock = clock

    @property
    def dynamodb(self) -> Any:
        return self._client()

    def apply(self, task_id: str, update: StatusUpdate) -> ApplyResult:
        """Apply one status event and say what happened (see :class:`Outcome`)."""
        if update.status == "pending":
            return ApplyResult(Outcome.STALE)
        now = self._clock()
        now_ms = format_ts_ms(now)
        stored_body: dict[str, Any] = {}
        if update.terminal or update.status == "paused":
            found = self._write_body(task_id, update, now, stored_body)
            if not found:
                return ApplyResult(Outcome.NOT_FOUND)
        hint = parse_ts(update.created_at_hint)
        day = (hint or now).date().isoformat()
        spec = upd.blind_update(update, task_id=task_id, now=now, now_ms=now_ms, day=day)
        for _ in range(_MAX_ATTEMPTS):
            try:
                response = self.dynamodb.update_item(**spec.request(self.table, task_id))
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                old: dict[str, Any] | None = exc.response.get("Item")  # type: ignore[assignment]
                if not old or rec.is_expired(old, now):
                    return ApplyResult(Outcome.NOT_FOUND)
                stored = stored_state(old)
                decision = decide(stored, update)
                if decision.verdict is not Verdict.ACCEPT and update.terminal and stored.status in TERMINAL:
                    self._repair_final_event(task_id, old, stored_body, update, now)
                if decision.verdict is Verdict.STALE:
                    return ApplyResult(Outcome.STALE, stored.status)
                if decision.verdict is Verdict.ATTACH_CHECKPOINT:
                    return self._attach(task_id, update.checkpoint_key or "", stored.status)
                spec = upd.exact_update(
                    update, stored, task_id=task_id, now=now, now_ms=now_ms, progress=decision.progress
                )
                continue
            new = response["Attributes"]
            seq = rec.get_int(new, "last_seq") or 0
            self.dynamodb.put_item(
                TableName=self.table,
                Item=_event(task_id, seq, item=new, body=stored_body, update=update, now=now, now_ms=now_ms),
            )
            return ApplyResult(Outcome.ACCEPTED, update.status, seq)
        raise StoreConflictError(f"status update of task {task_id!r} lost {_MAX_ATTEMPTS} races; giving up")

    def _repair_final_event(
        self, task_id: str, old: Mapping[str, Any], body: Mapping[str, Any], update: StatusUpdate, now: datetime
    ) -> None:
        """The task already ended, maybe by this very writer in an earlier delivery that failed between the task
        update and the event put, or by one that died there. Without that event SSE clients never see the end
        (GW-SSE-7), so a later terminal write writes it when missing (one read, on this path only)."""
        seq = rec.get_int(old, "last_seq") or 0
        key = rec.key(task_id, rec.event_sk(seq))
        if seq <= 1 or self.dynamodb.get_item(TableName=self.table, Key=key, ConsistentRead=True).get("Item"):
            return
        event = _event(task_id, seq, item=old, body=body, update=update, now=now, now_ms=format_ts_ms(now))
        try:
            self.dynamodb.put_item(TableName=self.table, Item=event, ConditionExpression="attribute_not_exists(pk)")
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":  # else repaired meanwhile
                raise
            return
        _log.warning("task %s: wrote its missing final event %d", task_id, seq)

    def _attach(self, task_id: str, checkpoint_key: str, status: str) -> ApplyResult:
        spec = upd.attach_checkpoint(checkpoint_key)
        request = spec.request(self.table, task_id)
        request["ReturnValues"] = "NONE"
        try:
            self.dynamodb.update_item(**request)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return ApplyResult(Outcome.STALE, status)
        return ApplyResult(Outcome.CHECKPOINT_ATTACHED, status)

    def _write_body(self, task_id: str, update: StatusUpdate, now: datetime, stored: dict[str, Any]) -> bool:
        """Large values and the expiry of a terminal or paused update, before the status write; False: no task."""
        spec = upd.UpdateSpec()
        values: list[tuple[str, Any, bool]] = []
        if update.status == "succeeded" and update.result is not MISSING:
            values.append(("result", update.result, True))
        if update.status == "failed" and update.error_details is not None:
            values.append(("error_details", dict(update.error_details), True))
        if update.status == "paused" and update.pause_metadata is not None:
            values.append(("pause_metadata", dict(update.pause_metadata), False))
        for field, value, keep_first in values:
            name, attribute_value, form = self._bodies.encode(task_id, field, value)
            stored.update(form)
            placeholder = spec.name(name)
            label = spec.value(name, attribute_value)
            spec.sets.append(
                f"{placeholder} = if_not_exists({placeholder}, {label})" if keep_first else f"{placeholder} = {label}"
            )
            if not keep_first:
                spec.remove(f"{field}_s3" if name == field else field)
        if update.terminal:
            spec.set("ttl", rec.num_av(rec.epoch(now + rec.TERMINAL_TTL)))
        spec.conditions.append(f"attribute_exists({spec.name('pk')})")
        request = spec.request(self.table, task_id)
        request["Key"] = rec.key(task_id, rec.BODY_SK)
        request["ReturnValues"] = "NONE"
        del request["ReturnValuesOnConditionCheckFailure"]
        try:
            self.dynamodb.update_item(**request)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            if q.get_item(self.dynamodb, self.table, task_id, rec.TASK_SK, now=now) is None:
                return False
            # a task whose body write failed at creation and whose undo failed too: without a body it could never
            # end (backstop, cancel, x-sink), so the body is written now, with no payload
            _log.warning("task %s has no body item: writing it with the %s update", task_id, update.status)
            del request["ConditionExpression"]
            request["ExpressionAttributeNames"].pop("#pk", None)
            self.dynamodb.update_item(**request)
        return True


def _event(
    task_id: str,
    seq: int,
    *,
    item: Mapping[str, Any],
    body: Mapping[str, Any],
    update: StatusUpdate,
    now: datetime,
    now_ms: str,
) -> dict[str, Any]:
    """The event item of status event ``seq``: the status data of the task ``item`` as written, with ``body``."""
    return status_event_item(
        task_id,
        seq,
        data=status_data(item, body),
        actor=update.actor,
        envelope_id=update.envelope_id,
        now=now,
        now_ms=now_ms,
    )
