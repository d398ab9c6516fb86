"""SQS sends for the layer, the crew and the gateway (P-ROUTE-3, P-ROUTE-9, P-ROUTE-10, P-ACK-2).

- Queue URLs are resolved with ``GetQueueUrl`` once per actor name and cached for the life of the ``Transport``. An
  actor name that violates P-NAME-1 is rejected before any call; SQS error codes
  ``AWS.SimpleQueueService.NonExistentQueue`` / ``QueueDoesNotExist`` mean the actor has no queue. Both are
  :class:`UnknownActorError` (P-ROUTE-8).
- Bodies are the envelope's JSON (:meth:`Envelope.to_json`), produced by an injectable ``encoder(actor, envelope)``:
  the claim-check offload (P-LARGE-2) plugs in there. A body over the SQS limit of 1 MiB is a
  :class:`~asya.exceptions.SerializationError` (P-LARGE-3).
- One chunked send path, :meth:`Transport.send_prepared`: items prepared by :meth:`Transport.prepare` (resolved and
  encoded ahead of their send, so a bad body or an unknown destination is known when the item is produced) leave
  with ``SendMessageBatch``, grouped per queue (order kept within a queue), at most 10 entries and 1 MiB per call.
  Failed entries are retried up to 3 times with backoff 100, 200, 400 ms (P-ROUTE-10); it never raises for an entry:
  each result carries its own ``failure``, so one failing entry leaves the others' outcomes intact.
  :meth:`Transport.send_batch` prepares every item first (nothing is sent when one body cannot be), sends them
  through it, and raises :class:`TransportError` naming the items that did go out (they stay sent) when an entry
  still failed.
- X-Ray (P-TRACE-3): with ``trace_header=`` (a callable, given only when tracing is on, ``asya.xray``) every message
  sent carries the SQS system attribute ``AWSTraceHeader`` with the value it returns (per entry in
  ``SendMessageBatch``), read when the item is sent or, for :meth:`Transport.prepare`, prepared; no value, no
  attribute. Without it no send carries ``MessageSystemAttributes``.

- Delays (P-RES-9, P-WAIT-3): an envelope whose header ``x-asya-delay-until`` is more than 1 s ahead leaves with
  ``DelaySeconds`` up to it (at most 900; the receiver chains the rest), in :meth:`Transport.send` (unless the caller
  names a delay) and in :meth:`Transport.prepare`; so a flow's sleep is delayed by whoever sends it.

No client is created before the first send; pass ``sqs=`` to inject one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from botocore.exceptions import BotoCoreError, ClientError

from asya import headers as hdr
from asya import naming
from asya.awsclients import ACTOR_BUDGET, ClientBudget, aws_client
from asya.envelope import Envelope
from asya.exceptions import AsyaError, NamingError, SerializationError
from asya.resiliency import deferral
from asya.timeutil import Clock, parse_ts, system_clock

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageSystemAttributeValueTypeDef

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_ENTRIES",
    "MAX_MESSAGE_BYTES",
    "Prepared",
    "SendResult",
    "TraceHeader",
    "Transport",
    "TransportError",
    "UnknownActorError",
]

#: SQS limits: one message body, one ``SendMessageBatch`` call (entries and total payload).
MAX_MESSAGE_BYTES: Final = 1024 * 1024
MAX_BATCH_BYTES: Final = 1024 * 1024
MAX_BATCH_ENTRIES: Final = 10

_RETRIES: Final = 3
_INITIAL_BACKOFF: Final = 0.1
_NO_QUEUE_CODES: Final = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})

Encoder = Callable[[str, Envelope], str]
#: The ``AWSTraceHeader`` of the sends made now (P-TRACE-3), ``None`` for none.
TraceHeader = Callable[[], str | None]


class UnknownActorError(AsyaError):
    """A destination actor name is invalid or has no queue (P-ROUTE-8): reason ``UnknownActor``."""

    def __init__(self, actor: str, message: str) -> None:
        super().__init__(message)
        self.actor = actor


class TransportError(AsyaError):
    """A send failed after its retries. ``results`` holds one entry per item of the call, in order; ``ok`` ones went
    out and stay sent."""

    def __init__(self, message: str, results: Sequence[SendResult] = ()) -> None:
        super().__init__(message)
        self.results = list(results)


@dataclass(frozen=True, slots=True)
class SendResult:
    """Outcome of one item of :meth:`Transport.send_batch`; ``error`` is set for an unknown destination only,
    ``failure`` (by :meth:`Transport.send_prepared` only) for an entry that still failed after its retries."""

    actor: str
    message_id: str | None = None
    error: UnknownActorError | None = None
    failure: TransportError | None = None

    @property
    def ok(self) -> bool:
        return self.message_id is not None


class Prepared:
    """One envelope ready to send to ``actor`` (:meth:`Transport.prepare`): its queue ``url``, encoded ``body`` and
    ``trace_header`` (P-TRACE-3), or the ``error`` of an unknown destination. A plain class, not a dataclass: one is
    made per frame on the hot path, and none is compared or printed."""

    __slots__ = ("actor", "body", "envelope", "error", "size", "trace_header", "url")

    def __init__(
        self,
        actor: str,
        envelope: Envelope,
        *,
        url: str = "",
        body: str = "",
        size: int = 0,
        error: UnknownActorError | None = None,
        trace_header: str | None = None,
    ) -> None:
        self.actor = actor
        self.envelope = envelope
        self.url = url
        self.body = body
        self.size = size
        self.error = error
        self.trace_header = trace_header


def _json_body(_actor: str, envelope: Envelope) -> str:
    return envelope.to_json()


class Transport:
    """SQS sends to ``asya-{namespace}-{actor}`` queues."""

    def __init__(
        self,
        *,
        namespace: str,
        sqs: SQSClient | None = None,
        encoder: Encoder = _json_body,
        sleep: Callable[[float], None] = time.sleep,
        trace_header: TraceHeader | None = None,
        account_id: str = "",
        budget: ClientBudget = ACTOR_BUDGET,
        clock: Clock = system_clock,
    ) -> None:
        """``account_id``: the AWS account of the queues; with it queue URLs are built from the client's endpoint,
        without a ``GetQueueUrl`` call (GW-CREATE-7), and a missing queue shows at the send. ``budget``: the retry
        mode and timeouts of the client made when ``sqs`` is not given (GW-OVL-1)."""
        self._namespace = naming.validate_namespace(namespace)
        self._account_id = account_id
        self._sqs = sqs
        self._budget = budget
        self._encoder = encoder
        self._sleep = sleep
        self._trace_header = trace_header
        self._clock = clock
        self._urls: dict[str, str] = {}
        self._visibility: dict[str, int] = {}

    @property
    def sqs(self) -> SQSClient:
        if self._sqs is None:
            self._sqs = aws_client("sqs", self._budget)
        return self._sqs

    def queue_url(self, actor: str) -> str:
        """The URL of ``actor``'s queue, cached. Raises :class:`UnknownActorError` or :class:`TransportError`."""
        url = self._urls.get(actor)
        if url is not None:
            return url
        if not naming.is_valid_actor_name(actor):
            raise UnknownActorError(actor, f"unknown actor {actor!r}: not a valid actor name (P-NAME-1)")
        try:
            name = naming.queue_name(self._namespace, actor)
        except NamingError as exc:
            raise UnknownActorError(actor, f"unknown actor {actor!r}: {exc}") from None
        if self._account_id:
            url = f"{self.sqs.meta.endpoint_url}/{self._account_id}/{name}"
            self._urls[actor] = url
            return url
        try:
            url = self.sqs.get_queue_url(QueueName=name)["QueueUrl"]
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _NO_QUEUE_CODES:
                raise UnknownActorError(actor, f"unknown actor {actor!r}: queue {name!r} does not exist") from None
            raise TransportError(f"GetQueueUrl {name!r} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise TransportError(f"GetQueueUrl {name!r} failed: {exc}") from exc
        self._urls[actor] = url
        return url

    def encode(self, actor: str, envelope: Envelope) -> str:
        """The message body for ``envelope`` sent to ``actor``; :class:`SerializationError` when it cannot be sent."""
        return self._encode_sized(actor, envelope)[0]

    def _encode_sized(self, actor: str, envelope: Envelope) -> tuple[str, int]:
        try:
            body = self._encoder(actor, envelope)
        except ValueError as exc:  # NaN/Infinity (P-ABI-20)
            raise SerializationError(f"envelope {envelope.id!r} cannot be encoded as JSON: {exc}") from None
        size = len(body) if body.isascii() else len(body.encode("utf-8"))  # no copy for the common ASCII body
        if size > MAX_MESSAGE_BYTES:
            raise SerializationError(
                f"envelope {envelope.id!r} for {actor!r} is {size} bytes, over the SQS limit of {MAX_MESSAGE_BYTES}"
            )
        return body, size

    def _header(self) -> str | None:
        """The ``AWSTraceHeader`` of a send made now; ``None`` with tracing off (P-TRACE-3)."""
        return self._trace_header() if self._trace_header is not None else None

    def delay_of(self, envelope: Envelope) -> int:
        """``DelaySeconds`` for ``envelope``: up to its ``x-asya-delay-until`` when that is ahead, else 0."""
        until = envelope.headers.get(hdr.DELAY_UNTIL)
        if not isinstance(until, str):
            return 0
        return deferral(parse_ts(until), self._clock()) or 0

    def send(self, actor: str, envelope: Envelope, *, delay_seconds: int = 0) -> str:
        """Send one envelope; returns the SQS message id. Without ``delay_seconds``, :meth:`delay_of` decides."""
        delay_seconds = delay_seconds or self.delay_of(envelope)
        url = self.queue_url(actor)
        body = self.encode(actor, envelope)
        extra: dict[str, Any] = {}
        if header := self._header():
            extra["MessageSystemAttributes"] = _system_attributes(header)
        try:
            response = self.sqs.send_message(QueueUrl=url, MessageBody=body, DelaySeconds=delay_seconds, **extra)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in _NO_QUEUE_CODES:
                self._urls.pop(actor, None)
                raise UnknownActorError(actor, f"unknown actor {actor!r}: its queue does not exist") from None
            raise TransportError(f"SendMessage to {actor!r} failed: {exc}") from exc
        except BotoCoreError as exc:
            raise TransportError(f"SendMessage to {actor!r} failed: {exc}") from exc
        return response["MessageId"]

    def send_batch(self, items: Sequence[tuple[str, Envelope]]) -> list[SendResult]:
        """Send ``(actor, envelope)`` items with ``SendMessageBatch`` (:meth:`send_prepared`); one result per item.

        An unknown destination gives a result with ``error`` set and does not stop the others. Raises
        :class:`SerializationError` (before anything is sent) when a body cannot be sent, and :class:`TransportError`
        when an entry still fails after the retries; its ``results`` say which items went out (they stay sent).
        """
        results = self.send_prepared([self.prepare(actor, envelope) for actor, envelope in items])
        failure = next((r.failure for r in results if r.failure is not None), None)
        if failure is not None:
            raise TransportError(str(failure), [SendResult(actor=r.actor) if r.failure else r for r in results])
        return results

    def prepare(self, actor: str, envelope: Envelope) -> Prepared:
        """Resolve and encode one item; raises :class:`SerializationError` or :class:`TransportError`."""
        try:
            url = self.queue_url(actor)
        except UnknownActorError as exc:
            return Prepared(actor, envelope, error=exc)
        body, size = self._encode_sized(actor, envelope)
        return Prepared(actor, envelope, url=url, body=body, size=size, trace_header=self._header())

    def send_prepared(self, items: Sequence[Prepared]) -> list[SendResult]:
        """Send prepared items, grouped per queue (order kept within a queue), at most 10 entries and 1 MiB per call;
        one result per item, in order. The one chunked send path of the transport.

        Never raises for an entry: an unknown destination sets ``error``, an entry still failing after its retries
        sets ``failure``, and the other chunks are still sent."""
        results: list[SendResult | None] = [None] * len(items)
        pending: list[int] = []
        for index, item in enumerate(items):
            if item.error is not None:
                results[index] = SendResult(actor=item.actor, error=item.error)
            else:
                pending.append(index)
        pending.sort(key=lambda index: items[index].url)  # stable: per-queue order stays the items' order
        for chunk in _chunks(items, pending):
            failure = self._send_chunk(chunk, items, results)
            if failure is not None:
                for index in chunk:
                    if results[index] is None:
                        results[index] = SendResult(actor=items[index].actor, failure=failure)
        return [r for r in results if r is not None]

    def change_visibility(self, actor: str, receipt_handles: Sequence[str], timeout: int) -> None:
        """Set the visibility timeout of received messages of ``actor``'s queue; raises :class:`TransportError`."""
        self.change_visibilities(actor, [(handle, timeout) for handle in receipt_handles])

    def change_visibilities(self, actor: str, entries: Sequence[tuple[str, int]]) -> None:
        """Like :meth:`change_visibility` with one timeout per message: ``(receipt handle, seconds)`` pairs."""
        url = self.queue_url(actor)
        for start in range(0, len(entries), MAX_BATCH_ENTRIES):
            request: list[Any] = [
                {"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": timeout}
                for i, (handle, timeout) in enumerate(entries[start : start + MAX_BATCH_ENTRIES])
            ]
            try:
                response = self.sqs.change_message_visibility_batch(QueueUrl=url, Entries=request)
            except (ClientError, BotoCoreError) as exc:
                raise TransportError(f"ChangeMessageVisibilityBatch on {actor!r} failed: {exc}") from exc
            if response.get("Failed"):
                raise TransportError(f"ChangeMessageVisibilityBatch on {actor!r}: {response['Failed']}")

    def visibility_timeout(self, actor: str) -> int:
        """The visibility timeout of ``actor``'s queue in seconds, read once and cached."""
        cached = self._visibility.get(actor)
        if cached is not None:
            return cached
        url = self.queue_url(actor)
        try:
            attributes = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])
        except (ClientError, BotoCoreError) as exc:
            raise TransportError(f"GetQueueAttributes on {actor!r} failed: {exc}") from exc
        value = int(attributes["Attributes"]["VisibilityTimeout"])
        self._visibility[actor] = value
        return value

    def _send_chunk(
        self, chunk: list[int], items: Sequence[Prepared], results: list[SendResult | None]
    ) -> TransportError | None:
        """Send one chunk (indexes of ``items``, one queue) with retries; the failure of the entries still failing
        after them, else ``None``."""
        url = items[chunk[0]].url
        waiting = {str(pos): index for pos, index in enumerate(chunk)}
        failures: dict[str, str] = {}
        for attempt in range(_RETRIES + 1):
            if attempt:
                self._sleep(_INITIAL_BACKOFF * 2 ** (attempt - 1))
            entries: list[Any] = [{"Id": key, "MessageBody": items[index].body} for key, index in waiting.items()]
            for request, index in zip(entries, waiting.values(), strict=True):
                if delay := self.delay_of(items[index].envelope):
                    request["DelaySeconds"] = delay
            if self._trace_header is not None:  # tracing on (P-TRACE-3): each entry carries its own record's header
                for request, index in zip(entries, waiting.values(), strict=True):
                    if header := items[index].trace_header:
                        request["MessageSystemAttributes"] = _system_attributes(header)
            try:
                response = self.sqs.send_message_batch(QueueUrl=url, Entries=entries)
            except ClientError as exc:
                if exc.response.get("Error", {}).get("Code") in _NO_QUEUE_CODES:
                    self._mark_unknown(waiting.values(), items, results)
                    return None
                failures = {key: str(exc) for key in waiting}
                continue
            except BotoCoreError as exc:
                failures = {key: str(exc) for key in waiting}
                continue
            for ok in response.get("Successful", []):
                index = waiting.pop(ok["Id"])
                results[index] = SendResult(actor=items[index].actor, message_id=ok["MessageId"])
            failures = {f["Id"]: f"{f.get('Code', '')}: {f.get('Message', '')}" for f in response.get("Failed", [])}
            if not waiting:
                return None
        first = next(iter(waiting.values()))
        return TransportError(
            f"SendMessageBatch to {items[first].actor!r}: {len(waiting)} entries still failing after {_RETRIES} "
            f"retries: {sorted(failures.values())[:3]}"
        )

    def _mark_unknown(
        self, indexes: Iterable[int], items: Sequence[Prepared], results: list[SendResult | None]
    ) -> None:
        for index in indexes:
            actor = items[index].actor
            self._urls.pop(actor, None)
            results[index] = SendResult(
                actor=actor, error=UnknownActorError(actor, f"unknown actor {actor!r}: its queue does not exist")
            )


def _chunks(items: Sequence[Prepared], pending: list[int]) -> list[list[int]]:
    """Consecutive runs of ``pending`` (indexes of ``items``) for one queue, cut at 10 entries or 1 MiB of bodies."""
    out: list[list[int]] = []
    size = 0
    for index in pending:
        item = items[index]
        current = out[-1] if out else None
        if (
            current is None
            or items[current[0]].url != item.url
            or len(current) >= MAX_BATCH_ENTRIES
            or size + item.size > MAX_BATCH_BYTES
        ):
            out.append([index])
            size = item.size
        else:
            current.append(index)
            size += item.size
    return out


def _system_attributes(header: str) -> dict[Literal["AWSTraceHeader"], MessageSystemAttributeValueTypeDef]:
    # deferred: only a traced actor sends trace headers; with tracing off the module is never needed
    from asya.xray import system_attributes

    return system_attributes(header)
