"""Status writes of the task store: one status change applied to a task (P-STAT-1..4, P-ACK-8; GATEWAY
GW-EVT-1..3, GW-DATA-2, GW-DATA-3, GW-DATA-4, GW-BACK-4).

``StatusWriter.apply(task_id, update)`` makes ONE conditional ``UpdateItem`` of the task item (``asya.store.updates``):
blind first, then exact from the item a failed condition returned, at most five times. No event item is written: the
task item is the state and ``last_seq`` numbers its changes (P-STAT-3). Then, only for:

- an accepted terminal update with a result or error details: one ``PutItem`` of the ``RESULT`` item. The task item
  was tagged ``terminal_by`` = the update's ``writer_id`` in the same write, so only that writer, or a redelivery of
  its message (which finds its own tag), writes the result item; a stale writer never changes it (GW-DATA-2);
- an accepted ``paused`` update that is not a hop claim (the producer route, a failed resume's way back): one
  ``PutItem`` of the ``PAUSE`` item with ``pause_metadata``; x-pause's paused claim writes none, its pause item came
  first (P-PAUSE-5, ``TaskStore.put_pause_item``).

A stale terminal update attaches its checkpoint to a task that has none (P-STAT-2). A hop claim (``update.claim``,
P-ACK-8) whose condition fails is classified from the old item: :attr:`Outcome.DUPLICATE` (a higher fence, or a
``succeeded``/``failed`` task), :attr:`Outcome.HELD` (an equal fence under a live lease), or the task's status for
``canceled``/``paused`` (``Outcome.STALE`` with that status): the caller decides (P-STAT-10).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from botocore.exceptions import ClientError

from asya.store import records as rec
from asya.store import updates as upd
from asya.store.bodies import BodyCodec
from asya.store.errors import StoreConflictError
from asya.store.transition import TERMINAL, StatusUpdate, StoredState, Verdict, decide
from asya.store.views import stored_state
from asya.timeutil import Clock, format_ts_ms, parse_ts

__all__ = ["ApplyResult", "Outcome", "StatusWriter", "refused_claim"]

_log = logging.getLogger(__name__)

_MAX_ATTEMPTS: Final = 5


class Outcome(StrEnum):
    ACCEPTED = "accepted"
    STALE = "stale"
    NOT_FOUND = "not_found"
    CHECKPOINT_ATTACHED = "checkpoint_attached"
    #: a hop claim found a higher fence, or a finished task: the delivery is a duplicate (P-ACK-8)
    DUPLICATE = "duplicate"
    #: a hop claim found its own fence under another run's live lease (``lease_until`` says until when)
    HELD = "held"


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What a status update did; ``status`` is the task's status after it (``None`` for an unknown id)."""

    outcome: Outcome
    status: str | None = None
    seq: int | None = None
    lease_until: int | None = None

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
        """Apply one status change and say what happened (see :class:`Outcome`)."""
        if update.status == "pending":
            return ApplyResult(Outcome.STALE)
        now = self._clock()
        now_ms = format_ts_ms(now)
        hint = parse_ts(update.created_at_hint)
        day = (hint or now).date().isoformat()
        spec = upd.blind_update(update, task_id=task_id, now=now, now_ms=now_ms, day=day)
        token = rec.new_write_token() if update.claim is not None else None
        for _ in range(_MAX_ATTEMPTS):
            if token is not None:
                spec.set(rec.WRITE_TOKEN, rec.str_av(token))
            try:
                response = self.dynamodb.update_item(**spec.request(self.table, task_id))
            except ClientError as exc:
                if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                    raise
                old: dict[str, Any] | None = exc.response.get("Item")  # type: ignore[assignment]
                if not old or rec.is_expired(old, now):
                    return ApplyResult(Outcome.NOT_FOUND)
                stored = stored_state(old)
                if token is None or rec.get_str(old, rec.WRITE_TOKEN) != token:
                    if update.claim is not None:
                        refused = refused_claim(stored, update.claim, rec.epoch_ms(now))
                        if refused is not None:
                            return refused
                    decision = decide(stored, update)
                    if decision.verdict is Verdict.STALE:
                        if update.terminal and stored.status in TERMINAL:
                            self._complete_result(task_id, stored, update, now)
                        return ApplyResult(Outcome.STALE, stored.status)
                    if decision.verdict is Verdict.ATTACH_CHECKPOINT:
                        self._complete_result(task_id, stored, update, now)
                        return self.attach(task_id, update.checkpoint_key or "", update.checkpoint_line, stored.status)
                    spec = upd.exact_update(
                        update, stored, task_id=task_id, now=now, now_ms=now_ms, progress=decision.progress
                    )
                    continue
                # the SDK retried a claim whose first attempt wrote (GW-OVL-5): it is ours, not a held lease
                response = {"Attributes": old}
            new = response["Attributes"]
            if update.terminal and upd.has_result(update):
                self._put_result(task_id, update, now)
            elif update.status == "paused" and update.pause_metadata is not None and update.claim is None:
                # x-pause's paused write (a claim) comes after its own pause item write (P-PAUSE-5)
                self._put_pause(task_id, update)
            return ApplyResult(Outcome.ACCEPTED, update.status, rec.get_int(new, "last_seq"))
        raise StoreConflictError(f"status update of task {task_id!r} lost {_MAX_ATTEMPTS} races; giving up")

    def attach(self, task_id: str, checkpoint_key: str, checkpoint_line: int | None, status: str | None) -> ApplyResult:
        """Attach a checkpoint to a task that has none, whatever its status (P-STAT-2); changes nothing else."""
        spec = upd.attach_checkpoint(checkpoint_key, checkpoint_line)
        request = spec.request(self.table, task_id)
        request["ReturnValues"] = "NONE"
        try:
            self.dynamodb.update_item(**request)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return ApplyResult(Outcome.STALE, status)
        return ApplyResult(Outcome.CHECKPOINT_ATTACHED, status)

    def _complete_result(self, task_id: str, stored: StoredState, update: StatusUpdate, now: datetime) -> None:
        """A redelivery of the terminal writer's own message finds its tag: it writes the result item the first
        delivery may have died before writing (GW-DATA-2). Anyone else's terminal write never touches it."""
        if update.writer_id is not None and stored.terminal_by == update.writer_id and upd.has_result(update):
            self._put_result(task_id, update, now)

    def _put_result(self, task_id: str, update: StatusUpdate, now: datetime) -> None:
        item: dict[str, Any] = {
            **rec.key(task_id, rec.RESULT_SK),
            "ttl": rec.num_av(rec.epoch(now + rec.RESULT_TTL)),
        }
        if update.status == "succeeded":
            name, value, _ = self._bodies.encode(task_id, "result", update.result)
            item[name] = value
        elif update.error_details is not None:
            name, value, _ = self._bodies.encode(task_id, "error_details", dict(update.error_details))
            item[name] = value
        self.dynamodb.put_item(TableName=self.table, Item=item)

    def _put_pause(self, task_id: str, update: StatusUpdate) -> None:
        assert update.pause_metadata is not None
        name, value, _ = self._bodies.encode(task_id, "pause_metadata", dict(update.pause_metadata))
        self.dynamodb.put_item(TableName=self.table, Item={**rec.key(task_id, rec.PAUSE_SK), name: value})


def refused_claim(stored: StoredState, claim: tuple[int, int, int], now_ms: int) -> ApplyResult | None:
    """Why a hop claim's condition failed, when the reason is not a retryable detail (P-ACK-8, P-STAT-10)."""
    if stored.status in ("succeeded", "failed"):
        return ApplyResult(Outcome.DUPLICATE, stored.status)
    if stored.status in ("canceled", "paused"):
        return ApplyResult(Outcome.STALE, stored.status)
    fence = (claim[0], claim[1])
    if stored.fence is not None:
        if stored.fence > fence:
            return ApplyResult(Outcome.DUPLICATE, stored.status)
        if stored.fence == fence and stored.lease_until >= now_ms:
            return ApplyResult(Outcome.HELD, stored.status, lease_until=stored.lease_until)
    return None
