"""Fence-only writes of the hop claim (P-ACK-8, P-RES-8, P-STAT-1; GW-DATA-2).

A hop claim that is not at the same time a running status, and the other writes that touch only a fence:

- :meth:`Fences.claim`: ONE conditional ``UpdateItem`` that stores the fence ``(h, a)`` and ``lease_until`` on a fence
  item: the child item ``pk = TASK#{parent_id}, sk = CHILD#{id}`` of a fan-out child (created by this write, with the
  claiming ``actor`` and a 15-day ``ttl``), or the task item of a tracked envelope under progress ``final`` (P-STAT-19:
  fence and lease only, ``last_seq`` unchanged). Condition: no fence stored, a lower one, or an equal one whose lease
  has passed, and for a task item a ``pending``/``running`` status. A failed condition returns the old item
  (``ReturnValuesOnConditionCheckFailure``), which says why, classified as for the status-writing claim
  (``asya.store.writer``);
- :meth:`Fences.release`: ``lease_until = 0`` when the stored fence is still the caller's, so the record's own
  redelivery is not held off (best effort; P-ACK-8);
- :meth:`Fences.advance`: the retry's fence ``(h, n + 1)`` with ``lease_until = 0`` when the stored fence is exactly
  ``(h, n)`` (P-RES-8), for fence items whose envelope writes no status (children, progress ``final``);
- :meth:`Fences.finish`: a fan-out child's last hop reached x-sink or a fan-in aggregator (P-ACK-7), or its
  failure ended at x-sump (P-SUMP-7), or its task's cancel stopped it (x-sink, ``canceled``); :class:`ChildOutcome`
  says how. Its child
  item gets the fence ``(FINISHED_HOP, 0)``, above any hop's, with ``lease_until = 0`` and ``done_by`` (the SQS message
  id of the record that finished it). Condition: the item exists and has no ``done_by``, or the same one (the
  record's own redelivery). Every later copy of any hop of the child then finds a higher fence (a duplicate, at the
  pre-flight or the claim), and a second record reaching x-sink for it is told it is finished: no second checkpoint
  line. No item (the child never claimed: untracked) writes nothing. One write per child.

The child tree (docs/protocol.md P-FAN-7): a child item also says how its child is doing, carried by these same
writes and never by a write of its own: the claim stores ``child_status = running`` and the claiming ``actor`` (the
attempt is ``fence_a``, the hop ``fence_h``); the retry's advance stores ``child_status = retrying`` and the handler's
``error`` (clipped to :data:`CHILD_ERROR_LIMIT_BYTES`); the finish stores the phase it ended in (``succeeded`` /
``failed``), the actor it ended at, its last ``attempt``, its checkpoint's ``checkpoint_key`` and ``checkpoint_line``
(reserved before the PUT, P-FAN-9) and, when failed, its ``error``. A claim keeps the last ``error``.

Write units: each call is one write of a small item (1 unit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from botocore.exceptions import ClientError

from asya.store import records as rec
from asya.store import updates as upd
from asya.store.limits import clip_text
from asya.store.transition import StoredState
from asya.store.views import stored_state
from asya.store.writer import ApplyResult, Outcome, refused_claim

__all__ = ["CHILD_ERROR_LIMIT_BYTES", "FINISHED_HOP", "ChildFinish", "ChildOutcome", "Fences", "fence_key"]

#: The hop of a finished child's fence: above any route's length (P-ACK-7).
FINISHED_HOP: Final = 1_000_000
#: A child item's last error is clipped to this many UTF-8 bytes: the item stays well under 1 KB (one write unit).
CHILD_ERROR_LIMIT_BYTES: Final = 300


@dataclass(frozen=True, slots=True)
class ChildOutcome:
    """How a fan-out child ended, for :meth:`Fences.finish`: ``writer_id`` is the SQS message id of the record that
    finished it; ``phase`` (``succeeded``/``failed``/``canceled``), ``actor``, ``attempt`` and ``error`` are how it
    ended (the fence no longer tells the attempt); ``checkpoint`` the key and line of its checkpoint (P-FAN-7,
    P-FAN-9)."""

    writer_id: str
    phase: str | None = None
    actor: str | None = None
    error: str | None = None
    attempt: int | None = None
    checkpoint: tuple[str, int] | None = None


class ChildFinish(StrEnum):
    """What :meth:`Fences.finish` found."""

    FINISHED = "finished"  # this record finished the child (or is its own redelivery)
    ALREADY = "already"  # another record finished it before: this one is a late copy
    UNTRACKED = "untracked"  # no child item: the child claimed nothing


def fence_key(envelope_id: str, parent_id: str | None) -> dict[str, Any]:
    """The fence item of an envelope: its task item, or its child item under its parent (P-ACK-8)."""
    if parent_id:
        return rec.key(parent_id, rec.child_sk(envelope_id))
    return rec.key(envelope_id, rec.TASK_SK)


class Fences:
    """Fence-only writes on the task table; ``dynamodb`` returns the client (called on use)."""

    def __init__(self, *, table: str, dynamodb: Callable[[], Any]) -> None:
        self.table = table
        self._client = dynamodb

    def claim(
        self,
        envelope_id: str,
        parent_id: str | None,
        *,
        claim: tuple[int, int, int],
        actor: str,
        now: datetime,
        history: tuple[str, str | None] | None = None,
    ) -> ApplyResult:
        """Claim a hop on a fence item without a status change (with the run history's chain head, P-HIST-4);
        ``ACCEPTED``, ``DUPLICATE``, ``HELD``, ``STALE`` with
        the task's ``canceled``/``paused`` status, or ``NOT_FOUND`` (a task item that does not exist: untracked)."""
        spec = upd.UpdateSpec()
        spec.set("fence_h", rec.num_av(claim[0]))
        spec.set("fence_a", rec.num_av(claim[1]))
        spec.set("lease_until", rec.num_av(claim[2]))
        token = rec.new_write_token()
        spec.set(rec.WRITE_TOKEN, rec.str_av(token))
        if history is not None:
            upd.history_clauses(spec, history)
        child = bool(parent_id)
        if child:
            spec.set("actor", rec.str_av(actor))
            spec.set("child_status", rec.str_av("running"))
            spec.set("ttl", rec.num_av(rec.epoch(now + rec.CHILD_TTL)))
        else:
            spec.names["#pk"] = "pk"
            spec.conditions.append("attribute_exists(#pk)")
            spec.conditions.append(f"{spec.name('status_order')} <= {spec.value('one_order', rec.num_av(1))}")
        now_ms = rec.epoch_ms(now)
        spec.conditions.append(upd.claim_condition(spec, claim, now_ms))
        request = spec.request(self.table, envelope_id)
        request["Key"] = fence_key(envelope_id, parent_id)
        request["ReturnValues"] = "NONE"
        try:
            self._client().update_item(**request)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            old: dict[str, Any] | None = exc.response.get("Item")  # type: ignore[assignment]
            if not old:
                return ApplyResult(Outcome.NOT_FOUND)
            stored = stored_state(old)
            if child:  # a child item has no status: only its fence speaks
                stored = StoredState(status="running", fence=stored.fence, lease_until=stored.lease_until)
            if rec.get_str(old, rec.WRITE_TOKEN) == token:  # the SDK resent a claim that wrote (GW-OVL-5)
                return ApplyResult(Outcome.ACCEPTED)
            refused = refused_claim(stored, claim, now_ms)
            # every other failure of a plain fence condition is a race with a concurrent claim: that run holds it
            return refused or ApplyResult(Outcome.HELD, stored.status, lease_until=stored.lease_until)
        return ApplyResult(Outcome.ACCEPTED)

    def release(self, envelope_id: str, parent_id: str | None, fence: tuple[int, int]) -> bool:
        """``lease_until = 0`` if the stored fence is still ``fence``; False when it is not (or the item is gone)."""
        return self._fenced_write(envelope_id, parent_id, fence, next_attempt=False)

    def advance(
        self, envelope_id: str, parent_id: str | None, fence: tuple[int, int], *, error: str | None = None
    ) -> bool:
        """Store ``(h, n + 1)`` with ``lease_until = 0`` if the stored fence is exactly ``fence = (h, n)``; a child's
        item also gets ``child_status = retrying`` and ``error``."""
        return self._fenced_write(envelope_id, parent_id, fence, next_attempt=True, error=error)

    def finish(self, envelope_id: str, parent_id: str, outcome: ChildOutcome) -> ChildFinish:
        """Mark a child finished (see the module docstring) with how it ended (``outcome``)."""
        sets = "SET #fh = :fh, #fa = :fa, #lease = :zero, #done = :writer"
        names = {"#pk": "pk", "#fh": "fence_h", "#fa": "fence_a", "#lease": "lease_until", "#done": "done_by"}
        values = {
            ":fh": rec.num_av(FINISHED_HOP),
            ":fa": rec.num_av(0),
            ":zero": rec.num_av(0),
            ":writer": rec.str_av(outcome.writer_id),
        }
        for name, value in (("child_status", outcome.phase), ("actor", outcome.actor), ("error", outcome.error)):
            if value:
                text = clip_text(value, CHILD_ERROR_LIMIT_BYTES) if name == "error" else value
                sets += f", #{name} = :{name}"
                names[f"#{name}"] = name
                values[f":{name}"] = rec.str_av(text)
        if outcome.attempt is not None:
            sets += ", #attempt = :attempt"
            names["#attempt"] = "attempt"
            values[":attempt"] = rec.num_av(outcome.attempt)
        if outcome.checkpoint is not None:
            sets += ", #ckey = :ckey, #cline = :cline"
            names.update({"#ckey": "checkpoint_key", "#cline": "checkpoint_line"})
            key, line = outcome.checkpoint
            values.update({":ckey": rec.str_av(key), ":cline": rec.num_av(line)})
        request = {
            "TableName": self.table,
            "Key": fence_key(envelope_id, parent_id),
            "UpdateExpression": sets,
            "ConditionExpression": "attribute_exists(#pk) AND (attribute_not_exists(#done) OR #done = :writer)",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValues": "NONE",
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        try:
            self._client().update_item(**request)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return ChildFinish.ALREADY if exc.response.get("Item") else ChildFinish.UNTRACKED
        return ChildFinish.FINISHED

    def _fenced_write(
        self,
        envelope_id: str,
        parent_id: str | None,
        fence: tuple[int, int],
        *,
        next_attempt: bool,
        error: str | None = None,
    ) -> bool:
        spec = upd.UpdateSpec()
        spec.set("lease_until", rec.num_av(0))
        if next_attempt:
            spec.set("fence_a", rec.num_av(fence[1] + 1))
            if parent_id:
                spec.set("child_status", rec.str_av("retrying"))
                if error:
                    spec.set("error", rec.str_av(clip_text(error, CHILD_ERROR_LIMIT_BYTES)))
        spec.conditions.append(upd.refence_condition(spec, fence))
        request = spec.request(self.table, envelope_id)
        request["Key"] = fence_key(envelope_id, parent_id)
        request["ReturnValues"] = "NONE"
        del request["ReturnValuesOnConditionCheckFailure"]
        try:
            self._client().update_item(**request)
        except ClientError as exc:
            if exc.response["Error"]["Code"] != "ConditionalCheckFailedException":
                raise
            return False
        return True
