"""An AWS request meter built on botocore event hooks: every call a hooked client makes is counted and billed.

``Meter.attach(client)`` registers two handlers on the client's own event emitter (other clients are unaffected):
``before-parameter-build`` remembers the call's parameters (and, for DynamoDB writes, the items as they were) and
``after-call`` bills it. Calls are grouped by ``(component, service, operation)``; the component is ``"timers"`` for any
call on the deadline-timer queue, else what the calling thread declared with :meth:`Meter.component`, else what a
one-function-at-a-time driver declared for every thread with :meth:`Meter.process`, else ``"backstop"`` for the local
mode's backstop thread and ``"gateway"`` for any other (uvicorn's threads). Given a ``classify`` function
(``bench.keyclass``), calls are also grouped by their key class (:meth:`Meter.snapshot_classes`).

Billing (``bench.units``):

- SQS: per started 64 KB chunk of the request's payload (sent bodies and attributes; for ``ReceiveMessage`` the
  received ones), at least 1; ``ReceiveMessage`` answering no message is counted apart as an empty receive;
- DynamoDB writes (``PutItem``, ``UpdateItem``, ``DeleteItem``, ``BatchWriteItem``, ``TransactWriteItems``): a
  strongly consistent read of every touched item through the un-hooked ``shadow`` client before and after the call
  gives the old and new item; table and index write units follow from their sizes (a failed condition bills the
  stored item, transactions bill twice);
- DynamoDB reads: the full size of each item read (projections do not reduce the bill, so items are re-read through
  the shadow client when a projection was asked for); ``BatchGetItem`` bills every asked-for key, found or not;
- S3: tier-1 (PUT, COPY, POST, LIST) or tier-2 (GET, HEAD...) requests.

The shadow reads make DynamoDB write billing exact only while no other thread writes the same item between the read
and the call; the traffic benchmark therefore drives the actors one at a time. Without a shadow client the meter only
counts DynamoDB requests (no units), which is cheap enough to leave on while timing.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from typing import Any, Final

from asya import naming, tableschema
from bench import units

__all__ = [
    "READ_OPERATIONS",
    "TIMERS",
    "WRITE_OPERATIONS",
    "Meter",
    "Usage",
    "dynamodb_read_usage",
    "dynamodb_write_usage",
    "s3_usage",
    "sqs_payload_bytes",
    "sqs_usage",
    "thread_component",
]


WRITE_OPERATIONS: Final = frozenset({"PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems"})
READ_OPERATIONS: Final = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})
_INDEXES: Final = tuple(
    units.IndexSpec(gsi.partition_key, gsi.sort_key, None if gsi.projection is None else frozenset(gsi.projection))
    for gsi in tableschema.GSIS
)
_KEY_NAMES: Final = (tableschema.PARTITION_KEY, tableschema.SORT_KEY)
#: Calls on the deadline-timer queue, whoever makes them (the gateway arming, the backstop consuming).
TIMERS: Final = "timers"
_TIMER_QUEUE_SUFFIX: Final = f"-{naming.DEADLINE}"
_CONTEXT_KEY: Final = "bench_meter"
Item = Mapping[str, Any]


@dataclass
class Usage:
    """Requests and billed units of a group of calls."""

    requests: int = 0
    billed_requests: int = 0
    empty_receives: int = 0
    payload_bytes: int = 0
    wru_table: int = 0
    wru_index: int = 0
    rru: float = 0.0
    s3_tier1: int = 0
    s3_tier2: int = 0

    @property
    def wru(self) -> int:
        return self.wru_table + self.wru_index

    def add(self, other: Usage) -> None:
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "wru": self.wru}


def sqs_payload_bytes(operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> int:
    """The payload SQS bills ``operation`` on: bodies and message attributes sent, or received for a receive."""
    if operation == "SendMessage":
        return _message_bytes(params)
    if operation == "SendMessageBatch":
        return sum(_message_bytes(entry) for entry in params.get("Entries", []))
    if operation == "ReceiveMessage":
        return sum(_message_bytes(message) for message in parsed.get("Messages", []))
    return 0


def _message_bytes(message: Mapping[str, Any]) -> int:
    body = message.get("MessageBody", message.get("Body", ""))
    size = len(str(body).encode("utf-8"))
    for name, value in (message.get("MessageAttributes") or {}).items():
        size += len(name.encode("utf-8")) + len(str(value.get("DataType", "")).encode("utf-8"))
        raw = value.get("StringValue", value.get("BinaryValue", b""))
        size += len(raw) if isinstance(raw, bytes | bytearray) else len(str(raw).encode("utf-8"))
    return size


def sqs_usage(operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> Usage:
    """One SQS call: one request, billed per started 64 KB chunk of its payload."""
    payload = sqs_payload_bytes(operation, params, parsed)
    usage = Usage(requests=1, billed_requests=units.sqs_billed_requests(payload), payload_bytes=payload)
    if operation == "ReceiveMessage" and not parsed.get("Messages"):
        usage.empty_receives = 1
    return usage


def s3_usage(operation: str) -> Usage:
    """One S3 call by request class (DELETE is free)."""
    kind = units.s3_request_class(operation)
    return Usage(
        requests=1,
        billed_requests=0 if kind == "free" else 1,
        s3_tier1=1 if kind == "tier1" else 0,
        s3_tier2=1 if kind == "tier2" else 0,
    )


def dynamodb_write_usage(changes: Sequence[tuple[Item | None, Item | None]], *, transactional: bool = False) -> Usage:
    """One write call touching items that went from ``old`` to ``new`` (``None``: absent; a failed condition passes
    the stored item twice)."""
    usage = Usage(requests=1, billed_requests=1)
    for old, new in changes:
        write = units.WriteUnits.of_change(old, new, _INDEXES, transactional=transactional)
        usage.wru_table += write.table
        usage.wru_index += write.index
    return usage


def dynamodb_read_usage(operation: str, sizes: Sequence[int], *, consistent: bool) -> Usage:
    """One read call that read items of ``sizes`` bytes (0 for a key asked for but not found)."""
    usage = Usage(requests=1, billed_requests=1)
    if operation in ("Query", "Scan"):
        usage.rru = units.query_read_units(sizes, consistent=consistent)
    else:
        transactional = operation == "TransactGetItems"
        usage.rru = sum(units.item_read_units(s, consistent=consistent, transactional=transactional) for s in sizes)
    return usage


def thread_component(thread_name: str) -> str:
    """The component of a thread that declared none: the local mode's backstop loop runs in ``asya-backstop``;
    everything else (uvicorn and its worker threads) is the gateway."""
    return "backstop" if "backstop" in thread_name else "gateway"


def _key(item: Item) -> dict[str, Any]:
    return {name: item[name] for name in _KEY_NAMES if name in item}


def _write_targets(operation: str, params: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``(table, key)`` of every item a write call touches."""
    if operation == "PutItem":
        return [(params["TableName"], _key(params["Item"]))]
    if operation in ("UpdateItem", "DeleteItem"):
        return [(params["TableName"], dict(params["Key"]))]
    targets: list[tuple[str, dict[str, Any]]] = []
    if operation == "BatchWriteItem":
        for table, requests in params.get("RequestItems", {}).items():
            for request in requests:
                if "PutRequest" in request:
                    targets.append((table, _key(request["PutRequest"]["Item"])))
                elif "DeleteRequest" in request:
                    targets.append((table, dict(request["DeleteRequest"]["Key"])))
    elif operation == "TransactWriteItems":
        for entry in params.get("TransactItems", []):
            kind, body = next(iter(entry.items()))
            if kind == "Put":
                targets.append((body["TableName"], _key(body["Item"])))
            elif kind in ("Update", "Delete"):
                targets.append((body["TableName"], dict(body["Key"])))
    return targets


class Meter:
    """Counts and bills the calls of every attached client. Thread-safe."""

    def __init__(
        self, *, shadow_dynamodb: Any = None, classify: Callable[[str, str, Mapping[str, Any]], str] | None = None
    ) -> None:
        self._shadow = shadow_dynamodb
        self._classify = classify
        self._by_class: dict[tuple[str, str, str, str], Usage] = defaultdict(Usage)
        self._process: str | None = None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._usage: dict[tuple[str, str, str], Usage] = defaultdict(Usage)
        self.enabled = True

    # -- wiring -------------------------------------------------------------------------------------------------

    def attach(self, client: Any) -> None:
        service = client.meta.service_model.service_name
        handlers: dict[str, Callable[..., None]] = {
            "sqs": self._after_sqs,
            "s3": self._after_s3,
            "dynamodb": self._after_dynamodb,
        }
        after = handlers.get(service)
        if after is None:
            raise ValueError(f"the meter bills sqs, s3 and dynamodb, not {service!r}")
        client.meta.events.register("before-parameter-build", self._before)
        client.meta.events.register("after-call", after)

    @contextmanager
    def component(self, name: str) -> Iterator[None]:
        """Attribute the calls this thread makes inside the block to ``name``."""
        previous = getattr(self._local, "name", None)
        self._local.name = name
        try:
            yield
        finally:
            self._local.name = previous

    @contextmanager
    def process(self, name: str) -> Iterator[None]:
        """Attribute to ``name`` the calls of every thread that declared no component, while the block runs: a
        driver that runs one function at a time (a Lambda runtime's helper threads, such as its outbox ticker, then
        count as that function)."""
        previous = self._process
        self._process = name
        try:
            yield
        finally:
            self._process = previous

    def reset(self) -> None:
        with self._lock:
            self._usage.clear()
            self._by_class.clear()

    def snapshot(self) -> dict[tuple[str, str, str], Usage]:
        with self._lock:
            return {key: Usage(**asdict(value)) for key, value in self._usage.items()}

    def snapshot_classes(self) -> dict[tuple[str, str, str, str], Usage]:
        """Usage by ``(component, service, operation, key class)``; empty without a ``classify`` function."""
        with self._lock:
            return {key: Usage(**asdict(value)) for key, value in self._by_class.items()}

    # -- hooks --------------------------------------------------------------------------------------------------

    def _before(self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if not self.enabled:
            return
        component = (
            getattr(self._local, "name", None) or self._process or thread_component(threading.current_thread().name)
        )
        if str(params.get("QueueUrl", "")).endswith(_TIMER_QUEUE_SUFFIX):
            component = TIMERS  # deadline timers: per task, but reported apart from the hops (GW-DATA-8)
        state: dict[str, Any] = {"params": dict(params), "component": component}
        if (
            self._shadow is not None
            and model.service_model.service_name == "dynamodb"
            and model.name in WRITE_OPERATIONS
        ):
            targets = _write_targets(model.name, params)
            state["targets"] = targets
            state["old"] = [self._shadow_get(table, key) for table, key in targets]
        context[_CONTEXT_KEY] = state

    def _record(self, context: Mapping[str, Any], service: str, operation: str, usage: Usage) -> None:
        state = context[_CONTEXT_KEY]
        component = state["component"]
        with self._lock:
            self._usage[(component, service, operation)].add(usage)
            if self._classify is not None:
                key_class = self._classify(service, operation, state["params"])
                self._by_class[(component, service, operation, key_class)].add(usage)

    def _after_sqs(self, parsed: Mapping[str, Any], model: Any, context: Mapping[str, Any], **_: Any) -> None:
        if _CONTEXT_KEY in context:
            usage = sqs_usage(model.name, context[_CONTEXT_KEY]["params"], parsed)
            self._record(context, "sqs", model.name, usage)

    def _after_s3(self, model: Any, context: Mapping[str, Any], **_: Any) -> None:
        if _CONTEXT_KEY in context:
            self._record(context, "s3", model.name, s3_usage(model.name))

    def _after_dynamodb(self, parsed: Mapping[str, Any], model: Any, context: Mapping[str, Any], **_: Any) -> None:
        state = context.get(_CONTEXT_KEY)
        if state is None:
            return
        operation = model.name
        params = state["params"]
        if operation in WRITE_OPERATIONS and self._shadow is None:
            usage = Usage(requests=1, billed_requests=1)
        elif operation in WRITE_OPERATIONS:
            targets = state["targets"]
            new = [self._shadow_get(table, key) for table, key in targets]
            usage = dynamodb_write_usage(
                list(zip(state["old"], new, strict=True)), transactional=operation == "TransactWriteItems"
            )
        elif operation in READ_OPERATIONS and self._shadow is not None:
            sizes, consistent = self._read_sizes(operation, params, parsed)
            usage = dynamodb_read_usage(operation, sizes, consistent=consistent)
        else:
            usage = Usage(requests=1, billed_requests=1)
        self._record(context, "dynamodb", operation, usage)

    # -- shadow reads -------------------------------------------------------------------------------------------

    def _shadow_get(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        item: dict[str, Any] | None = self._shadow.get_item(TableName=table, Key=dict(key), ConsistentRead=True).get(
            "Item"
        )
        return item

    def _read_sizes(
        self, operation: str, params: Mapping[str, Any], parsed: Mapping[str, Any]
    ) -> tuple[list[int], bool]:
        if operation == "GetItem":
            item = parsed.get("Item")
            if item is not None and "ProjectionExpression" in params:
                item = self._shadow_get(params["TableName"], params["Key"])
            return [units.item_size(item)], bool(params.get("ConsistentRead"))
        if operation == "BatchGetItem":
            sizes: list[int] = []
            consistent = False
            for table, request in params.get("RequestItems", {}).items():
                consistent = consistent or bool(request.get("ConsistentRead"))
                sizes.extend(units.item_size(self._shadow_get(table, key)) for key in request.get("Keys", []))
            return sizes, consistent
        if operation in ("Query", "Scan"):
            consistent = bool(params.get("ConsistentRead"))
            items = parsed.get("Items", [])
            projected = "ProjectionExpression" in params or params.get("Select") not in (None, "ALL_ATTRIBUTES")
            # an index projection without the table keys cannot be re-read: its own size is a lower bound
            return [
                units.item_size(
                    self._shadow_get(params["TableName"], _key(item))
                    if projected and all(k in item for k in _KEY_NAMES)
                    else item
                )
                for item in items
            ], consistent
        sizes = [units.item_size(entry.get("Item")) for entry in parsed.get("Responses", [])]
        return sizes, True
