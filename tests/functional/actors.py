"""What the functional tests that drive actor runtimes against the moto mesh share: the Lambda context, an actor's
environment, messages delivered as the Lambda SQS event the ESM would build, queue draining, a test envelope, the
``Harness`` of one actor and the log lines of a runtime.

Import it as ``tests.functional.actors``; test modules import nothing from one another. ``TaskWrites`` is the
window on revision 2's single task-item write per hop: the item each accepted write left, and every write request.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from asya import naming
from asya.config import ActorConfig
from asya.sidecar import ActorRuntime
from asya.store import TaskStore
from asya.timeutil import format_ts
from asya_local.lambda_event import sqs_event

HANDLERS = Path(__file__).resolve().parent / "handlers"
NOW = datetime(2026, 3, 1, 10, 0, 0, tzinfo=UTC)
REGION = "us-east-1"


@dataclass
class Context:
    """The part of the Lambda context object the layer uses."""

    remaining_ms: int = 300_000

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


def actor_env(mesh: Any, actor: str, handler: str | None = None, **extra: str) -> dict[str, str]:
    """The ``ASYA_*`` environment of ``actor`` on ``mesh``; ``handler`` is a dotted name in ``HANDLERS``."""
    env = {
        "ASYA_NAMESPACE": mesh.resources.namespace,
        "ASYA_ACTOR": actor,
        "ASYA_TABLE": mesh.resources.table,
        "ASYA_BUCKET": mesh.resources.bucket,
    }
    if handler is not None:
        env.update(ASYA_HANDLER=handler, ASYA_CODE_DIR=str(HANDLERS))
    env.update(extra)
    return env


def queue_arn(mesh: Any, actor: str) -> str:
    return f"arn:aws:sqs:{REGION}:123456789012:{naming.queue_name(mesh.resources.namespace, actor)}"


def deliver(
    sqs: Any, url: str, bodies: Sequence[str | dict[str, Any]], *, arn: str, traces: Sequence[str | None] = ()
) -> dict[str, Any]:
    """Put ``bodies`` on the queue at ``url`` (the ``i``-th with ``AWSTraceHeader`` ``traces[i]`` when given and not
    ``None``) and receive them back as one Lambda SQS event, records in the order of ``bodies``."""
    texts = [body if isinstance(body, str) else json.dumps(body) for body in bodies]
    for index, text in enumerate(texts):
        trace = traces[index] if index < len(traces) else None
        extra: dict[str, Any] = {}
        if trace is not None:
            extra["MessageSystemAttributes"] = {"AWSTraceHeader": {"DataType": "String", "StringValue": trace}}
        sqs.send_message(QueueUrl=url, MessageBody=text, **extra)
    messages: list[Any] = []
    while len(messages) < len(texts):
        got = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, AttributeNames=["All"], MessageSystemAttributeNames=["All"]
        )
        messages += got.get("Messages", [])
    messages.sort(key=lambda m: texts.index(m["Body"]))
    return sqs_event(messages, queue_arn=arn, region=REGION)


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message waiting on the queue at ``url``, parsed, in the order received; the queue is left empty."""
    out: list[dict[str, Any]] = []
    while messages := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
        for message in messages:
            out.append(json.loads(message["Body"]))
            sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])
    return out


class Harness:
    """One actor runtime wired to the moto mesh, plus helpers to feed it and read the queues.

    ``handler`` names a function of ``module`` (in ``HANDLERS``); ``runtime`` holds extra ``ActorRuntime`` arguments
    (``random``, ``environ``, an ``s3`` client in place of the mesh's)."""

    def __init__(
        self,
        mesh: Any,
        handler: str,
        *,
        actor: str = "normalize",
        module: str = "sidecar_handlers",
        clock: Callable[[], datetime],
        env: dict[str, str] | None = None,
        **runtime: Any,
    ) -> None:
        self.mesh = mesh
        self.sqs = mesh.aws.sqs
        self.actor = actor
        config = ActorConfig.from_env(
            actor_env(mesh, actor, f"{module}.{handler}", **{"ASYA_ACTOR_TIMEOUT": "30", **(env or {})})
        )
        self.runtime = ActorRuntime(
            config,
            sqs=self.sqs,
            dynamodb=mesh.aws.dynamodb,
            clock=clock,
            sleep=lambda _s: None,
            **{"s3": mesh.aws.s3, **runtime},
        )
        self.store = TaskStore(
            table=mesh.resources.table,
            bucket=mesh.resources.bucket,
            dynamodb=mesh.aws.dynamodb,
            s3=mesh.aws.s3,
            clock=clock,
        )

    def url(self, actor: str) -> str:
        return str(self.mesh.resources.queue_urls[actor])

    def event(self, *bodies: str | dict[str, Any], traces: Sequence[str | None] = ()) -> dict[str, Any]:
        """Put ``bodies`` on this actor's queue and receive them as one Lambda SQS event."""
        return deliver(self.sqs, self.url(self.actor), bodies, arn=queue_arn(self.mesh, self.actor), traces=traces)

    def run(self, *bodies: str | dict[str, Any], context: Context | None = None) -> tuple[dict[str, Any], list[str]]:
        """Handle ``bodies`` as one batch: the response and the positions (as strings) of the failed records."""
        event = self.event(*bodies)
        response = self.runtime.handle(event, context or Context())
        failed = [f["itemIdentifier"] for f in response["batchItemFailures"]]
        ids = [r["messageId"] for r in event["Records"]]
        return response, [str(ids.index(f)) for f in failed]

    def drain(self, actor: str) -> list[dict[str, Any]]:
        """Every message waiting on ``actor``'s queue, as parsed JSON, in the order received."""
        return drain(self.sqs, self.url(actor))


def envelope(
    env_id: str | None = None,
    *,
    curr: str = "normalize",
    prev: list[str] | None = None,
    nxt: list[str] | None = None,
    headers: dict[str, Any] | None = None,
    deadline: datetime | None = NOW + timedelta(minutes=5),
    payload: Any = None,
    parent_id: str | None = None,
) -> dict[str, Any]:
    """A pending envelope at ``curr``, created 5 s before ``NOW``, of flow ``text-pipeline`` unless ``headers``."""
    status: dict[str, Any] = {
        "phase": "pending",
        "actor": curr,
        "attempt": 1,
        "max_attempts": 1,
        "created_at": format_ts(NOW - timedelta(seconds=5)),
        "updated_at": format_ts(NOW - timedelta(seconds=5)),
    }
    if deadline is not None:
        status["deadline_at"] = format_ts(deadline)
    env: dict[str, Any] = {
        "id": env_id or str(uuid.uuid4()),
        "route": {"prev": prev or [], "curr": curr, "next": ["analyze"] if nxt is None else nxt},
        "headers": headers if headers is not None else {"x-asya-flow": "text-pipeline"},
        "status": status,
        "payload": {"text": "hello big world"} if payload is None else payload,
    }
    if parent_id:
        env["parent_id"] = parent_id
    return env


def run_sink(mesh: Any, bodies: Sequence[dict[str, Any]], *, clock: Callable[[], datetime]) -> dict[str, Any]:
    """Deliver ``bodies`` to x-sink's queue and run the real x-sink runtime on them as one batch; its response."""
    from asya_crew.sink import SinkRuntime

    config = ActorConfig.from_env(actor_env(mesh, naming.SINK))
    sink = SinkRuntime(
        config,
        sqs=mesh.aws.sqs,
        dynamodb=mesh.aws.dynamodb,
        s3=mesh.aws.s3,
        clock=clock,
        logger=logging.getLogger("test.x-sink"),
    )
    url = str(mesh.resources.queue_urls[naming.SINK])
    response: dict[str, Any] = sink.handle(deliver(mesh.aws.sqs, url, bodies, arn=queue_arn(mesh, naming.SINK)), None)
    return response


class TaskWrites:
    """Every DynamoDB write request a client makes to one task's partition (``requests``: ``(operation, params)``)
    and, for each accepted ``UpdateItem`` of its task item, the item it left (``states``: the ``ALL_NEW`` attributes,
    decoded to plain values). Status changes are stored as no item (spec revision 2), so this is how a test sees the
    intermediate states of a hop. Use as a context manager around the run."""

    _WRITES = ("UpdateItem", "PutItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")

    def __init__(self, client: Any, task_id: str) -> None:
        self._client = client
        self._pk = {"S": f"TASK#{task_id}"}
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.states: list[dict[str, Any]] = []

    def __enter__(self) -> TaskWrites:
        self._client.meta.events.register("provide-client-params.dynamodb", self._request)
        self._client.meta.events.register("after-call.dynamodb.UpdateItem", self._after)
        return self

    def __exit__(self, *_: object) -> None:
        self._client.meta.events.unregister("provide-client-params.dynamodb", self._request)
        self._client.meta.events.unregister("after-call.dynamodb.UpdateItem", self._after)

    def _request(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        keys = (params.get("Key", {}).get("pk"), params.get("Item", {}).get("pk"))
        if model.name in self._WRITES and self._pk in keys:
            self.requests.append((model.name, dict(params)))

    def _after(self, parsed: dict[str, Any], **_: Any) -> None:
        item = parsed.get("Attributes") or {}
        if item.get("pk") == self._pk and item.get("sk") == {"S": "TASK"}:
            self.states.append({name: _plain(name, value) for name, value in item.items()})

    def steps(self) -> list[tuple[str, str | None]]:
        """``(status, step)`` left by each accepted task-item write, in order."""
        return [(state["status"], state.get("step")) for state in self.states]

    def operations(self) -> list[str]:
        return [name for name, _ in self.requests]


def _plain(name: str, value: dict[str, Any]) -> Any:
    """A stored attribute as a plain value; ``data`` is stored as JSON text."""
    (kind, raw), *_ = value.items()
    if kind == "N":
        number = float(raw)
        return int(number) if number.is_integer() else number
    return json.loads(raw) if name == "data" else raw


class LogLines(logging.Handler):
    """The records one runtime's Powertools logger (named after the actor's queue) emits while attached, and each as
    the JSON line Powertools writes for it: formatted at emit time by the logger's own Powertools formatter, which
    holds the keys the runtime appended for the record being processed (P-TRACE-4). Reading these instead of stdout
    keeps the test independent of the stream the shared logger's handler captured when it was first built."""

    def __init__(self, h: Harness) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []
        self.lines: list[dict[str, Any]] = []
        self._logger = logging.getLogger(h.runtime.config.queue_name)
        self.setFormatter(self._logger.powertools_handler.formatter)  # type: ignore[attr-defined]

    def __enter__(self) -> LogLines:
        self._logger.addHandler(self)
        return self

    def __exit__(self, *_: object) -> None:
        self._logger.removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)
        self.lines.append(json.loads(self.format(record)))

    def named(self, message: str) -> list[logging.LogRecord]:
        return [r for r in self.records if r.getMessage() == message]

    def record_failure(self, message_id: str) -> logging.LogRecord:
        """The one WARNING line of a failed record (P-ACK-3): it names the record and carries no traceback."""
        [failed] = self.named("record failed: SQS delivers it again")
        assert failed.levelno == logging.WARNING and failed.exc_info is None
        assert failed.__dict__["message_id"] == message_id
        return failed


def fail_one_record(h: Harness, env: dict[str, Any]) -> logging.LogRecord:
    """Run a batch of ``env`` alone, check that its record is the one failure, and return its log line (P-ACK-3)."""
    event = h.event(env)
    with LogLines(h) as logs:
        response = h.runtime.handle(event, Context())
    message_id = event["Records"][0]["messageId"]
    assert [f["itemIdentifier"] for f in response["batchItemFailures"]] == [message_id]
    return logs.record_failure(message_id)
