"""The fault injector of the chaos harness: which faults to play, at which rate, and where.

Every fault is played by a real part of the local mesh (``asya_local.mesh.LocalMesh``), never by a stand-in:

- botocore event hooks on the mesh's own clients (``before-parameter-build``, which sees the API parameters, and
  ``after-call``), scoped to the ESM worker threads (``esm-{queue name}-{n}``) so the gateway and the backstop are
  never touched: DynamoDB throttling (``ProvisionedThroughputExceededException`` before a call, as if the SDK's
  retries were used up), S3 write failures
  at x-sink (``PutObject``), SQS send failures at user actors (``SendMessage``/``SendMessageBatch``, mid fan-out when
  the sender is ``split``), duplicates (the same body sent again by a separate client right after a send succeeded),
  and a crash after the sends (an :class:`InvocationCrashError` raised when frame 0, the last send, has left);
- :class:`chaos.restarts.GatewayRestarter`: a gateway restart (``LocalMesh.restart_gateway``: open SSE streams are
  cut, connections refused until the new gateway answers) after a task's creation;
- late copies of fan-out children (``late_child_copy``): a child envelope a user actor sent is kept and sent again
  to the same queue once every task of the workload has ended (:meth:`Injector.send_late_copies`), so the copy of a
  finished child's last hop arrives after its task ended (P-ACK-7);
- forged producer posts (``forged_status``, :mod:`chaos.forgery`): crew-only statuses posted to a task's producer
  route right after its creation, with the client's credentials and with the reporter's (GW-EVT-1/3);
- the handler wrappers of :mod:`chaos.actors`, loaded as the actors' handlers: handler exceptions
  (:class:`ChaosError`, retried by the chaos mesh's policy), a crash before the sends, and a visibility timeout that
  expires mid-handler (the record is made visible again with ``ChangeMessageVisibility`` and the handler holds on, so
  another poller receives it while the first run still holds the hop), and a ``SET`` that puts a crew actor into
  ``route.next`` (``crew_set``, refused at the yield under P-ABI-15; the handler goes on when it is); and, in the
  compiled flow ``calc``, a ``SET``/``DEL`` of a header the layer owns (``layer_set``, refused at the yield under
  P-HDR-5) and a second payload from a flow call (``second_payload``: the hop fails under P-FLOW-11).

A crash is a ``BaseException``: nothing in the layer catches it, the ESM emulator sees the invocation die and leaves
its record to come back after its visibility timeout (P-ACK-5). Every decision is drawn from one seeded generator, and
every fault played is written down on the :class:`Invocation` it hit, which the checker reads to explain duplicate
handler runs and failed tasks.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

from botocore.exceptions import ClientError

__all__ = [
    "FAULTS",
    "ChaosError",
    "FaultRates",
    "FaultRatesError",
    "Injector",
    "Invocation",
    "InvocationCrashError",
]

#: Faults that fail or kill an invocation after it may have claimed its hop: the record comes back, and a second run
#: of the same hop is what P-ACK-7 allows.
REDELIVERING: Final = frozenset(
    {"crash_before_send", "crash_after_send", "dynamodb_throttle", "s3_failure", "send_failure"}
)


class ChaosError(Exception):
    """The injected handler exception (the chaos mesh retries it: ``rules: [{errors: [ChaosError]}]``)."""


class InvocationCrashError(BaseException):
    """The injected death of an invocation. A ``BaseException``, so no ``except Exception`` of the layer stops it."""


class FaultRatesError(ValueError):
    """A fault rate that is not a known fault or not a probability."""


@dataclass(frozen=True, slots=True)
class FaultRates:
    """The probability of each fault, per opportunity (a handler call, a send, a DynamoDB or S3 call)."""

    handler_error: float = 0.0
    crash_before_send: float = 0.0
    crash_after_send: float = 0.0
    lease_expiry: float = 0.0
    duplicate: float = 0.0
    dynamodb_throttle: float = 0.0
    s3_failure: float = 0.0
    send_failure: float = 0.0
    gateway_restart: float = 0.0
    late_child_copy: float = 0.0
    forged_status: float = 0.0
    crew_set: float = 0.0
    layer_set: float = 0.0
    second_payload: float = 0.0

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise FaultRatesError(f"fault rate {item.name}: must be a number in 0..1, got {value!r}")

    @classmethod
    def of(cls, rates: Mapping[str, float]) -> FaultRates:
        """From ``{fault: rate}``; an unknown fault name is refused, naming it."""
        unknown = sorted(set(rates) - set(FAULTS))
        if unknown:
            raise FaultRatesError(f"unknown fault {unknown[0]!r}: known faults are {', '.join(FAULTS)}")
        return cls(**rates)

    def active(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in FAULTS if getattr(self, name) > 0}


FAULTS: Final = tuple(item.name for item in fields(FaultRates))


@dataclass(slots=True)
class Invocation:
    """One invocation of one actor on one record (the chaos mesh has ``batch_size: 1``), as its worker saw it."""

    actor: str
    queue_url: str
    message_id: str
    receipt_handle: str
    receive_count: int
    envelope: dict[str, Any] | None
    #: The envelope ids of every record of the batch (crew actors take batches of 10).
    batch_ids: frozenset[str] = frozenset()
    faults: list[str] = field(default_factory=list)
    #: ``time.monotonic()`` when its records were received.
    received: float = 0.0

    @property
    def envelope_id(self) -> str | None:
        value = (self.envelope or {}).get("id")
        return value if isinstance(value, str) else None


def _client_error(code: str, operation: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": f"chaos: injected {code}"}}, operation)


class Injector:
    """Plays :class:`FaultRates` on a running mesh. ``attach(sqs=, dynamodb=, s3=)`` registers the hooks on the
    mesh's clients; ``raw_sqs`` is a client of the same endpoint without hooks (duplicates, visibility changes)."""

    def __init__(
        self,
        rates: FaultRates,
        *,
        queue_actors: Mapping[str, str],
        queue_urls: Mapping[str, str],
        user_actors: frozenset[str],
        raw_sqs: Any,
        seed: int = 0,
        lease_hold_seconds: float = 1.5,
    ) -> None:
        self.rates = rates
        self._queue_actors = dict(queue_actors)
        self._queue_urls = dict(queue_urls)
        self._user_actors = user_actors
        self._raw_sqs = raw_sqs
        self._random = random.Random(seed)
        self._lock = threading.Lock()
        self._local = threading.local()
        self.lease_hold_seconds = lease_hold_seconds
        self.played: Counter[str] = Counter()
        self.observed: Counter[str] = Counter()
        self.invocations: list[Invocation] = []
        #: Writes to a task item (``sk = TASK``) by an invocation holding no envelope of that task's id (a child's
        #: doing): each is a violation.
        self.child_task_writes: list[dict[str, Any]] = []
        #: Child envelopes kept by the ``late_child_copy`` fault, ``(queue URL, body)``, sent again by
        #: :meth:`send_late_copies` once every task of the workload has ended.
        self.late_copies: list[tuple[str, str]] = []
        #: Envelope id -> ``time.monotonic()`` when its late copy was sent.
        self.late_sent: dict[str, float] = {}

    # -- decisions -------------------------------------------------------------------------------------------

    def current(self) -> Invocation | None:
        """The invocation this thread is running (``None`` outside an actor's worker)."""
        inv: Invocation | None = getattr(self._local, "invocation", None)
        return inv

    def roll(self, fault: str, invocation: Invocation | None) -> bool:
        """Whether to play ``fault`` on this opportunity; a played fault is written down on the invocation (when
        it hits one: a gateway restart hits the whole mesh)."""
        rate = getattr(self.rates, fault)
        if rate <= 0:
            return False
        with self._lock:
            hit: bool = self._random.random() < rate
            if hit:
                self.played[fault] += 1
                if invocation is not None:
                    invocation.faults.append(fault)
        return hit

    def expire_lease(self, invocation: Invocation) -> None:
        """The visibility timeout ends mid-handler: the record is visible again now, and the handler holds on so
        another poller receives it while this run still holds the hop."""
        self._raw_sqs.change_message_visibility(
            QueueUrl=invocation.queue_url, ReceiptHandle=invocation.receipt_handle, VisibilityTimeout=0
        )
        time.sleep(self.lease_hold_seconds)

    # -- hooks -----------------------------------------------------------------------------------------------

    def attach(self, *, sqs: Any, dynamodb: Any, s3: Any) -> None:
        sqs.meta.events.register("after-call.sqs.ReceiveMessage", self._received)
        for operation in ("SendMessage", "SendMessageBatch"):
            sqs.meta.events.register(f"before-parameter-build.sqs.{operation}", self._before_send)
            sqs.meta.events.register(f"after-call.sqs.{operation}", self._after_send)
        dynamodb.meta.events.register("before-parameter-build.dynamodb", self._before_dynamodb)
        dynamodb.meta.events.register("after-call.dynamodb", self._after_dynamodb)
        s3.meta.events.register("before-parameter-build.s3.PutObject", self._before_put)

    def _worker_actor(self) -> str | None:
        """The actor whose ESM worker runs this thread (``esm-{queue name}-{n}``), else ``None``."""
        name = threading.current_thread().name
        if not name.startswith("esm-"):
            return None
        return self._queue_actors.get(name[4:].rpartition("-")[0])

    def _received(self, parsed: Mapping[str, Any], **_: Any) -> None:
        actor = self._worker_actor()
        if actor is None:
            return
        messages = parsed.get("Messages") or []
        if not messages:
            self._local.invocation = None
            return
        message = messages[0]
        try:
            envelope = json.loads(message.get("Body", ""))
        except ValueError:
            envelope = None
        invocation = Invocation(
            actor=actor,
            batch_ids=frozenset(_envelope_ids(messages)),
            queue_url=self._queue_urls[actor],
            message_id=message["MessageId"],
            receipt_handle=message["ReceiptHandle"],
            receive_count=int(message.get("Attributes", {}).get("ApproximateReceiveCount", "1")),
            envelope=envelope if isinstance(envelope, dict) else None,
            received=time.monotonic(),
        )
        self._local.invocation = invocation
        with self._lock:
            self.invocations.append(invocation)

    def _before_send(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        invocation = self.current()
        self._local.sending = dict(params)
        if invocation is None or invocation.actor not in self._user_actors:
            return
        if self.roll("send_failure", invocation):
            raise _client_error("InternalError", model.name)

    def _after_send(self, parsed: Mapping[str, Any], model: Any, **_: Any) -> None:
        invocation = self.current()
        params: dict[str, Any] = getattr(self._local, "sending", None) or {}
        self._local.sending = None
        if invocation is None or invocation.actor not in self._user_actors or "Error" in parsed:
            return
        bodies = [params["MessageBody"]] if "MessageBody" in params else [e["MessageBody"] for e in params["Entries"]]
        if self.roll("duplicate", invocation):
            for body in bodies:
                self._raw_sqs.send_message(QueueUrl=params["QueueUrl"], MessageBody=body)
        for body in _children(bodies):
            if self.roll("late_child_copy", invocation):
                with self._lock:
                    self.late_copies.append((params["QueueUrl"], body))
        if _carries(bodies, invocation.envelope_id) and self.roll("crash_after_send", invocation):
            raise InvocationCrashError(f"chaos: {invocation.actor} died after sending frame 0 ({model.name})")

    def send_late_copies(self) -> int:
        """Send every kept child envelope again to the queue it was first sent to (its last hop: ``split``'s
        children go to ``square``), as a late duplicate of a finished child (P-ACK-7); how many were sent."""
        with self._lock:
            copies, self.late_copies = self.late_copies, []
        for url, body in copies:
            self._raw_sqs.send_message(QueueUrl=url, MessageBody=body)
            envelope_id = json.loads(body).get("id")
            with self._lock:
                self.late_sent[str(envelope_id)] = time.monotonic()
        return len(copies)

    def _before_dynamodb(self, params: Mapping[str, Any], model: Any, **_: Any) -> None:
        invocation = self.current()
        if invocation is None:
            return
        if model.name in {"UpdateItem", "PutItem", "DeleteItem"}:
            key = params.get("Key") or params.get("Item") or {}
            task = key.get("pk", {}).get("S", "").removeprefix("TASK#")
            # a task item is written for the task's own envelope only: a fan-out child (own id, parent_id = the
            # task) writes its CHILD# fence item, never the task's status (P-ACK-8, P-FAN-3)
            if key.get("sk", {}).get("S") == "TASK" and task not in invocation.batch_ids:
                with self._lock:
                    self.child_task_writes.append({"actor": invocation.actor, "task": task, "operation": model.name})
        if self.roll("dynamodb_throttle", invocation):
            raise _client_error("ProvisionedThroughputExceededException", model.name)

    def _after_dynamodb(self, parsed: Mapping[str, Any], **_: Any) -> None:
        code = parsed.get("Error", {}).get("Code")
        if code in {"ConditionalCheckFailedException", "TransactionCanceledException"} and self._worker_actor():
            with self._lock:
                self.observed["conditional_check_failed"] += 1

    def _before_put(self, model: Any, **_: Any) -> None:
        invocation = self.current()
        if invocation is not None and invocation.actor == "x-sink" and self.roll("s3_failure", invocation):
            raise _client_error("InternalError", model.name)


def _envelope_ids(messages: list[Mapping[str, Any]]) -> list[str]:
    out = []
    for message in messages:
        try:
            envelope = json.loads(message.get("Body", ""))
        except ValueError:
            continue
        if isinstance(envelope, dict) and isinstance(envelope.get("id"), str):
            out.append(envelope["id"])
    return out


def _children(bodies: list[str]) -> list[str]:
    """The bodies that are fan-out children (a ``parent_id``)."""
    out = []
    for body in bodies:
        try:
            sent = json.loads(body)
        except ValueError:
            continue
        if isinstance(sent, dict) and isinstance(sent.get("parent_id"), str):
            out.append(body)
    return out


def _carries(bodies: list[str], envelope_id: str | None) -> bool:
    """Whether one of the sent bodies is the envelope under way itself (frame 0 keeps the envelope's id)."""
    if envelope_id is None:
        return False
    for body in bodies:
        try:
            sent = json.loads(body)
        except ValueError:
            continue
        if isinstance(sent, dict) and sent.get("id") == envelope_id:
            return True
    return False
