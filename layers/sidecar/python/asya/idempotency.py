"""Duplicate-delivery suppression for the envelopes a hop sends (PROTOCOL P-ACK-7, P-ACK-8; GATEWAY GW-DATA-1/2).

SQS delivers at least once: a hop runs again after an invocation crash (P-ACK-5), a failed record, a lost delete,
or while it still runs, once its visibility timeout expired and another poller received the message. The layer keeps
one small item per sent frame in the task table and skips frame ``k`` of a hop whose item says it went out. Frame
``k`` is the ``k``-th envelope the hop's frames produce, in yield order. The hop's outcome envelope (a retry, the
x-sink envelope of a handler error or of zero frames, the ``on_exhausted`` envelope: at most one per run) has an
item of its own, ``OUTCOME`` (:meth:`HopGuard.send_outcome`): a handler may act differently on a redelivery (yield
frames once, raise the next time), and an outcome numbered like a frame would be taken for a frame an earlier
delivery sent, and silently dropped while that delivery's later frames were never sent.

Items (key layout in ``asya.tableschema``): ``pk = IDEM#{id}#{actor}#{hop}#{attempt}``, ``sk = FRAME#{k}`` or
``OUTCOME``, ``state`` (``sent`` or ``claimed``), ``sent_at`` or ``claimed_at`` (``format_ts_ms``), ``ttl`` 15 days
after the write. ``hop`` is ``len(route.prev)`` of the input, ``attempt`` the one the actor runs (P-PROC-4).

Reads: ``FRAME#0`` of every record is read in the pre-flight ``BatchGetItem`` of the batch (``TaskStore.preflight``),
so a duplicate is recognised before its handler runs, at no extra request.

Writes, per group of frames leaving together (:meth:`HopGuard.send`, or :meth:`HopGuard.admit` then
:meth:`HopGuard.settle` when the caller sends the group itself, as ``asya.outbox`` does for a whole SQS batch), in
one of two modes:

- direct, the common case: a first delivery (``ApproximateReceiveCount`` 1) whose frame 0 was unknown at pre-flight
  and that was received less than half the queue's visibility timeout ago. No other run can be sending this hop, so
  the frames are sent, then their items are written with one ``BatchWriteItem`` (one write unit per frame; the
  items of every record whose frames left together share it, :meth:`Idempotency.mark_sent_all`).
- claimed: a redelivery (receive count 2 or more), a record whose frame 0 was already known, or a first delivery
  running late (SQS may already have handed the message to another poller). Each frame is first claimed with a
  conditional ``PutItem`` that succeeds only when no item exists (or a claim older than the lease,
  :meth:`Idempotency.claim_lease`, was left by a run that died). A frame found ``sent`` is skipped. A frame claimed
  by a live run is held back: the others go out, then the record fails with :class:`DuplicateInFlightError` and SQS
  brings it back after the other run
  finished. Claimed frames are sent, then marked ``sent`` (one ``BatchWriteItem``); after a failed send the claims
  are released so the redelivery can send.

The direct mode cannot skip its write, although a first delivery is never a duplicate of its own message: it is the
delivery every later duplicate is a duplicate of, and the item is what a redelivery after a crash, a Lambda timeout
or a lost delete (all arriving with a higher receive count) checks.

Guarantee: effectively once per hop. Frames are never lost to this mechanism: every read or write failure here is
logged and resolved towards sending (a failed read treats the frame as unknown, a failed claim sends anyway, a
failed mark leaves the frame unmarked); failing the record instead would cause the very duplicate the write prevents.
Duplicates remain possible when a run dies between a frame's send and its item write (crash window), when SQS hands
out two copies of one message that both say receive count 1 and run at the same time, when the queue's visibility
timeout was lowered while a container still holds the old value (read once per container), and when a claimant dies
after its send but before its mark (the claim is taken over once its lease ran out), when a redelivered handler
acts differently (its outcome goes out beside the frames an earlier run sent), and for the envelopes that do not go
through a :class:`HopGuard` (the x-sink envelopes of SLA and pre-flight stops, x-sump envelopes). Fan-out children
get deterministic ids (``asya.routing.child_id``), so any duplicate that does leave is caught at its next hop, unless
both copies run there at the same time.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya import routing, tableschema
from asya.envelope import Envelope
from asya.exceptions import AsyaError
from asya.store.records import get_str
from asya.timeutil import Clock, format_ts_ms, system_clock

__all__ = [
    "CLAIMED",
    "CLAIM_LEASE",
    "MIN_CLAIM_LEASE",
    "OUTCOME",
    "SENT",
    "Delivery",
    "DuplicateInFlightError",
    "HopGuard",
    "HopKey",
    "Idempotency",
]

SENT: Final = "sent"
#: The slot of the hop's outcome envelope among its frame numbers (``sk = OUTCOME``).
OUTCOME: Final = tableschema.IDEMPOTENCY_OUTCOME_SLOT
CLAIMED: Final = "claimed"
#: A claim older than this was left by a run that died between its claim and its mark: it may be taken over.
CLAIM_LEASE: Final = timedelta(seconds=60)
#: A live run marks its frames within seconds of claiming them (the outbox holds frames at most 1 s, a send retries for
#: under 1 s), so the lease is shortened to half the queue's visibility timeout, never below this: a message redelivered
#: after a crash must find the dead run's claim expired before it runs out of receives and lands in the DLQ.
MIN_CLAIM_LEASE: Final = timedelta(seconds=10)
_RETENTION: Final = timedelta(days=tableschema.IDEMPOTENCY_RETENTION_DAYS)
_BATCH_WRITE_LIMIT: Final = 25
_MAX_ATTEMPTS: Final = 5

_log = logging.getLogger(__name__)


class DuplicateInFlightError(AsyaError):
    """Another run of the same hop holds the claim on a frame and has not sent it yet; the record fails so SQS
    delivers it again once that run has finished (P-ACK-3)."""


@dataclass(frozen=True, slots=True)
class Delivery:
    """What SQS says about one delivery of a record: its receive count and, ms since the epoch, its first receive
    (``None`` when the record does not carry it)."""

    receive_count: int = 1
    first_receive_ms: int | None = None

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Delivery:
        """From a Lambda SQS record (``attributes.ApproximateReceiveCount``/``ApproximateFirstReceiveTimestamp``)."""
        attributes = record.get("attributes") or {}
        return cls(
            receive_count=_positive_int(attributes.get("ApproximateReceiveCount")) or 1,
            first_receive_ms=_positive_int(attributes.get("ApproximateFirstReceiveTimestamp")),
        )


@dataclass(frozen=True, slots=True)
class HopKey:
    """One logical hop: the envelope ``id``, the ``actor`` running it, ``hop`` = ``len(route.prev)``, ``attempt``."""

    envelope_id: str
    actor: str
    hop: int
    attempt: int
    #: ``IDEM#{id}#{actor}#{hop}#{attempt}``, the partition of the hop's items; built once, read for every frame.
    pk: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pk", tableschema.idempotency_pk(self.envelope_id, self.actor, self.hop, self.attempt))

    @classmethod
    def of(cls, envelope: Envelope, actor: str) -> HopKey:
        """The hop ``actor`` runs for the input ``envelope`` (before the entry update)."""
        return cls(envelope.id, actor, len(envelope.route.prev), routing.entry_attempt(envelope, actor))

    def frame_key(self, index: int) -> dict[str, Any]:
        return {
            tableschema.PARTITION_KEY: {"S": self.pk},
            tableschema.SORT_KEY: {"S": tableschema.idempotency_sk(index)},
        }


class Idempotency:
    """Reads and writes the idempotency items of one actor in the task table ``table``.

    ``dynamodb`` returns the client (called on first use, so the runtime can share the task store's lazily created
    one); ``visibility_timeout`` returns the actor's queue visibility timeout in seconds; ``epoch_ms`` is the wall
    clock SQS timestamps are compared with; ``clock`` stamps items and ages claims.
    """

    def __init__(
        self,
        *,
        table: str,
        dynamodb: Callable[[], Any],
        visibility_timeout: Callable[[], int],
        clock: Clock = system_clock,
        epoch_ms: Callable[[], int] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        logger: logging.Logger | Any = None,
    ) -> None:
        self.table = table
        self._client = dynamodb
        self._visibility_timeout = visibility_timeout
        self._clock = clock
        self._epoch_ms = epoch_ms or (lambda: int(time.time() * 1000))
        self._sleep = sleep
        self.log = logger if logger is not None else _log

    @property
    def dynamodb(self) -> Any:
        return self._client()

    # -- pre-flight ---------------------------------------------------------------------------------------------

    @staticmethod
    def preflight_keys(keys: Sequence[HopKey]) -> list[dict[str, Any]]:
        """The ``FRAME#0`` keys of ``keys``, to read with the batch's pre-flight ``BatchGetItem``."""
        return [key.frame_key(0) for key in keys]

    @staticmethod
    def first_frames(keys: Sequence[HopKey], items: Sequence[Mapping[str, Any]]) -> list[str | None]:
        """Per key of a batch, in order, the state of its ``FRAME#0`` among ``items`` (the unexpired items the
        pre-flight returned), ``None`` when unknown. A key repeated in the batch (SQS put two copies of one envelope in
        it) counts as ``claimed`` from its second record on: the records run one after the other (P-PROC-1), so the
        later copy claims and finds the earlier one's frames."""
        first_sk = tableschema.idempotency_sk(0)
        found: dict[str, str] = {}
        for item in items:
            pk, sk = get_str(item, tableschema.PARTITION_KEY), get_str(item, tableschema.SORT_KEY)
            if pk and sk == first_sk and pk.startswith(tableschema.IDEMPOTENCY_PK_PREFIX):
                found[pk] = get_str(item, "state") or SENT
        states: list[str | None] = []
        earlier: set[str] = set()
        for key in keys:
            states.append(found.get(key.pk) or (CLAIMED if key.pk in earlier else None))
            earlier.add(key.pk)
        return states

    def guard(self, key: HopKey, delivery: Delivery, first_frame: str | None) -> HopGuard:
        """The guard of one run of hop ``key``; ``first_frame`` is the state of ``FRAME#0`` read at pre-flight."""
        return HopGuard(self, key, delivery, first_frame)

    def is_late(self, delivery: Delivery) -> bool:
        """True when the message may already be visible again: received at least half a visibility timeout ago."""
        if delivery.first_receive_ms is None:
            return False
        try:
            visibility_ms = self._visibility_timeout() * 1000
        except Exception as exc:  # unknown timeout: assume the worst, which only costs a claim per frame
            self.log.warning("visibility timeout unknown: frames are claimed before sending", extra={"error": str(exc)})
            return True
        return 2 * (self._epoch_ms() - delivery.first_receive_ms) >= visibility_ms

    # -- writes -------------------------------------------------------------------------------------------------

    def claim_lease(self) -> timedelta:
        """How long a claim protects a frame: :data:`CLAIM_LEASE`, or half the queue's visibility timeout when that is
        shorter, at least :data:`MIN_CLAIM_LEASE`; :data:`CLAIM_LEASE` when the timeout cannot be read."""
        try:
            half = timedelta(seconds=self._visibility_timeout() / 2)
        except Exception:  # the full lease only delays a redelivery; it never loses a frame
            return CLAIM_LEASE
        return max(MIN_CLAIM_LEASE, min(CLAIM_LEASE, half))

    def claim(self, key: HopKey, index: int) -> str | None:
        """Claim frame ``index``: ``None`` when this run may send it, else the state another run left (``sent``, or
        ``claimed`` while that run lives). A write error also answers ``None``: sending beats losing the frame."""
        now = self._clock()
        item = {
            **key.frame_key(index),
            "state": {"S": CLAIMED},
            "claimed_at": {"S": format_ts_ms(now)},
            tableschema.TTL_ATTRIBUTE: {"N": str(int((now + _RETENTION).timestamp()))},
        }
        try:
            self.dynamodb.put_item(
                TableName=self.table,
                Item=item,
                ConditionExpression=(
                    "attribute_not_exists(#pk) OR #ttl <= :now OR (#state = :claimed AND claimed_at < :stale)"
                ),
                ExpressionAttributeNames={"#pk": tableschema.PARTITION_KEY, "#ttl": "ttl", "#state": "state"},
                ExpressionAttributeValues={
                    ":now": {"N": str(int(now.timestamp()))},
                    ":claimed": {"S": CLAIMED},
                    ":stale": {"S": format_ts_ms(now - self.claim_lease())},
                },
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ConditionalCheckFailedException":
                old: Mapping[str, Any] = exc.response.get("Item") or {}  # type: ignore[assignment]
                return get_str(old, "state") or SENT
            self.log.warning("idempotency claim failed: sending anyway", extra={"pk": key.pk, "error": str(exc)})
        except BotoCoreError as exc:
            self.log.warning("idempotency claim failed: sending anyway", extra={"pk": key.pk, "error": str(exc)})
        return None

    def mark_sent(self, key: HopKey, indexes: Sequence[int]) -> None:
        """Record frames ``indexes`` as sent (best effort: a failure is logged, the frames stay sent)."""
        self.mark_sent_all([(key, indexes)])

    def mark_sent_all(self, sent: Sequence[tuple[HopKey, Sequence[int]]]) -> None:
        """:meth:`mark_sent` for the frames of several hops, in as few ``BatchWriteItem`` calls as fit (25 items)."""
        if not sent:
            return
        now = self._clock()
        expires = {"N": str(int((now + _RETENTION).timestamp()))}
        stamp = {"S": format_ts_ms(now)}
        puts = [
            {"PutRequest": {"Item": {**key.frame_key(i), "state": {"S": SENT}, "sent_at": stamp, "ttl": expires}}}
            for key, indexes in sent
            for i in indexes
        ]
        if puts:
            self._batch_write(sent[0][0], puts, "mark")

    def release(self, key: HopKey, indexes: Sequence[int]) -> None:
        """Drop this run's claims on frames it could not send, so the redelivery need not wait for the lease."""
        self._batch_write(key, [{"DeleteRequest": {"Key": key.frame_key(i)}} for i in indexes], "release")

    def _batch_write(self, key: HopKey, requests: list[dict[str, Any]], what: str) -> None:
        try:
            for start in range(0, len(requests), _BATCH_WRITE_LIMIT):
                pending: dict[str, Any] = {self.table: requests[start : start + _BATCH_WRITE_LIMIT]}
                for attempt in range(_MAX_ATTEMPTS):
                    pending = self.dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
                    if not pending:
                        break
                    self._sleep(0.05 * 2**attempt)
                if pending:
                    raise AsyaError(f"{len(pending[self.table])} items still unprocessed")
        except (ClientError, BotoCoreError, AsyaError) as exc:
            self.log.warning(f"idempotency {what} failed", extra={"pk": key.pk, "error": str(exc)})


class HopGuard:
    """Sends one hop's output at most once across deliveries (see the module docstring). Not thread-safe: the hop's
    ``HopOutput`` serialises its sends."""

    def __init__(self, ledger: Idempotency, key: HopKey, delivery: Delivery, first_frame: str | None) -> None:
        self._ledger = ledger
        self._key = key
        self._delivery = delivery
        self._first_frame = first_frame
        self._claiming = first_frame is not None or delivery.receive_count > 1
        self._next = 0
        self.skipped = 0

    @property
    def key(self) -> HopKey:
        return self._key

    def send(self, batch: Sequence[routing.Outgoing], send: Callable[[list[routing.Outgoing]], None]) -> None:
        """Send the next frames of the hop with ``send``, leaving out those an earlier run sent."""
        self._send(self.admit(batch), send)

    def send_outcome(self, outgoing: routing.Outgoing, send: Callable[[list[routing.Outgoing]], None]) -> None:
        """Send the hop's outcome envelope with ``send`` unless an earlier run sent one (its ``OUTCOME`` item)."""
        self._send(self._admit_slots([(OUTCOME, outgoing)]), send)

    def _send(
        self,
        admitted: tuple[list[tuple[int, routing.Outgoing]], list[int]],
        send: Callable[[list[routing.Outgoing]], None],
    ) -> None:
        frames, held = admitted
        if frames:
            indexes = [index for index, _ in frames]
            try:
                send([outgoing for _, outgoing in frames])
            except BaseException:
                self.settle(sent=(), failed=indexes)
                raise
            self.settle(sent=indexes, failed=())
        if held:
            raise self.held_error(held)

    def admit(self, batch: Sequence[routing.Outgoing]) -> tuple[list[tuple[int, routing.Outgoing]], list[int]]:
        """Number the next frames of the hop and decide which to send: ``(index, frame)`` pairs this run may send
        (claimed first when claiming) and the indexes held back because another live run claimed them. The caller
        sends the pairs, then calls :meth:`settle`; when some were held, it fails the record after sending the
        others (:meth:`held_error`)."""
        first = self._next
        self._next += len(batch)
        return self._admit_slots([(first + offset, outgoing) for offset, outgoing in enumerate(batch)])

    def _admit_slots(
        self, numbered: list[tuple[int, routing.Outgoing]]
    ) -> tuple[list[tuple[int, routing.Outgoing]], list[int]]:
        frames = numbered
        if self._first_frame == SENT:
            frames = [(index, outgoing) for index, outgoing in frames if index != 0]
        held: list[int] = []
        if frames and not self._claiming and self._ledger.is_late(self._delivery):
            self._claiming = True
        if frames and self._claiming:
            claimed = []
            for index, outgoing in frames:
                state = self._ledger.claim(self._key, index)
                if state is None:
                    claimed.append((index, outgoing))
                elif state == CLAIMED:
                    held.append(index)
            frames = claimed
        skipped = len(numbered) - len(frames) - len(held)
        self.skipped += skipped
        if skipped:
            self._ledger.log.info(
                "duplicate delivery: frames an earlier delivery sent were skipped",
                extra={"pk": self._key.pk, "skipped": skipped},
            )
        return frames, held

    def settle(self, *, sent: Sequence[int], failed: Sequence[int]) -> None:
        """After the send of admitted frames: mark ``sent`` ones, release this run's claims on ``failed`` ones."""
        self.release(failed)
        if sent:
            self._ledger.mark_sent(self._key, sent)

    def release(self, failed: Sequence[int]) -> None:
        """Release this run's claims on admitted frames that were not sent (no-op in the direct mode)."""
        if failed and self._claiming:
            self._ledger.release(self._key, failed)

    def held_error(self, held: Sequence[int]) -> DuplicateInFlightError:
        return DuplicateInFlightError(
            f"frames {list(held)} of hop {self._key.pk} are being sent by another delivery of this message; "
            "the record is retried once that delivery has finished"
        )


def _positive_int(value: object) -> int | None:
    try:
        number = int(str(value))
    except ValueError:
        return None
    return number if number > 0 else None
