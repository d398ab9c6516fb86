"""Dead-letter queues of a mesh (P-ACK-6): depth, peek and redrive, for the local mesh and a deployed stack alike.

Queue names come from the manifest (``asya.naming`` through ``Manifest.queue_name``/``dlq_name``); URLs are looked up
with ``GetQueueUrl`` on the given SQS client, so the same code serves moto and AWS.

- :meth:`DeadLetters.depths`: per actor, the DLQ's ``ApproximateNumberOfMessages`` (visible) and
  ``ApproximateNumberOfMessagesNotVisible`` (in flight, e.g. being peeked or redriven).
- :meth:`DeadLetters.peek`: receives up to ``limit`` messages with a short visibility timeout, then makes each of
  them visible again at once (``ChangeMessageVisibility`` 0). Nothing is deleted; if the release fails the messages
  come back when the short timeout ends. Each peek adds one to a message's ``ApproximateReceiveCount`` (the DLQ has no
  redrive policy, so that is harmless). The task status of each message is read from the task store (unknown ids and
  read errors show as ``None``).
- :meth:`DeadLetters.redrive`: moves messages back to the actor's queue, where they get a fresh receive count.
  ``copy`` (works everywhere): receive a batch of up to 10 with a visibility timeout of ``REDRIVE_VISIBILITY``
  seconds, ``SendMessageBatch`` the bodies (with their message attributes and trace header) to the actor queue, then
  delete from the DLQ only the entries whose send succeeded; a failed send leaves its message in the DLQ. It stops
  at an empty receive or after ``limit`` messages (default: the DLQ depth when it started, so messages that fail
  again and come back during the run are not moved twice). ``move-task``: SQS ``StartMessageMoveTask`` from the DLQ
  to the actor queue, then ``ListMessageMoveTasks`` until the task ends or ``wait_seconds`` pass (AWS only: moto 5.2
  does not implement it). ``auto`` picks ``move-task`` for an AWS endpoint without ``limit``, else ``copy``.

A redriven envelope past its task's deadline is not handled: the layer's SLA check sends it to x-sink as failed
(P-TIME-3), and a task the backstop already failed keeps that status (first terminal write wins, P-STAT-2).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final, Literal
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError

from asya.exceptions import AsyaError
from asya.manifest import Manifest
from asya.redrive import REDRIVE_VISIBILITY, RedriveError, copy_back
from asya.store import TaskStore

__all__ = [
    "PEEK_VISIBILITY",
    "REDRIVE_VISIBILITY",
    "DeadLetters",
    "DlqDepth",
    "DlqError",
    "DlqMessage",
    "RedriveMethod",
    "RedriveResult",
]

RedriveMethod = Literal["auto", "copy", "move-task"]

#: Seconds a peeked message stays hidden if releasing it fails.
PEEK_VISIBILITY: Final = 30
#: Seconds a message being copied stays hidden: long enough for one send + delete round trip, short enough that a
#: message whose send failed is soon back in the DLQ.
_BATCH: Final = 10
_WAIT_SECONDS: Final = 1
_MOVE_TASK_POLL_SECONDS: Final = 2.0
_MOVE_TASK_ACTIVE: Final = frozenset({"RUNNING", "CANCELLING"})
_NO_QUEUE: Final = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


class DlqError(AsyaError):
    """A dead-letter operation could not be done; the message says which queue and why."""


@dataclass(frozen=True, slots=True)
class DlqDepth:
    actor: str
    dlq: str
    visible: int
    in_flight: int


@dataclass(frozen=True, slots=True)
class DlqMessage:
    """One peeked DLQ message: ``task_id``/``actor``/``phase`` from the envelope (``None`` when the body is not
    one), the SQS receive count and first-sent time, why it is there, and the task's current status."""

    message_id: str
    task_id: str | None
    actor: str | None
    phase: str | None
    receive_count: int
    sent_at: str | None
    reason: str
    task_status: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class RedriveResult:
    """``moved``: messages now on the actor queue; ``failed``: sends refused (left in the DLQ); ``not_deleted``: sent
    but still in the DLQ (they will be redriven again: a duplicate, P-ACK-7); ``status``: ``done`` for ``copy``, the
    move task's last status for ``move-task``."""

    actor: str
    method: str
    moved: int
    failed: int = 0
    not_deleted: int = 0
    status: str = "done"
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class DeadLetters:
    """DLQ operations on the mesh described by ``manifest``. ``store`` (optional) supplies task statuses to
    :meth:`peek`; ``sleep``/``monotonic`` pace the move-task wait."""

    def __init__(
        self,
        manifest: Manifest,
        *,
        sqs: Any,
        store: TaskStore | None = None,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.manifest = manifest
        self._sqs = sqs
        self._store = store
        self._sleep = sleep
        self._monotonic = monotonic
        self._urls: dict[str, str] = {}

    # -- queries -------------------------------------------------------------------------------------------

    def actors(self, actor: str | None = None) -> list[str]:
        """Every deployed actor, or ``[actor]`` after checking the manifest deploys it."""
        names = [deployed.name for deployed in self.manifest.deployed_actors()]
        if actor is None:
            return names
        if actor not in names:
            raise DlqError(
                f"unknown actor {actor!r}: mesh {self.manifest.namespace!r} deploys {', '.join(sorted(names))}"
            )
        return [actor]

    def depths(self, actor: str | None = None) -> list[DlqDepth]:
        out = []
        for name in self.actors(actor):
            attributes = self._call(
                self.manifest.dlq_name(name),
                self._sqs.get_queue_attributes,
                QueueUrl=self._dlq_url(name),
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"],
            )["Attributes"]
            out.append(
                DlqDepth(
                    actor=name,
                    dlq=self.manifest.dlq_name(name),
                    visible=int(attributes.get("ApproximateNumberOfMessages", 0)),
                    in_flight=int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0)),
                )
            )
        return out

    def peek(self, actor: str, *, limit: int = 10) -> list[DlqMessage]:
        """Up to ``limit`` messages of ``actor``'s DLQ, left in the queue (see the module docstring)."""
        if limit < 1:
            raise DlqError(f"limit must be >= 1, got {limit!r}")
        [name] = self.actors(actor)
        url, dlq = self._dlq_url(name), self.manifest.dlq_name(name)
        seen: dict[str, dict[str, Any]] = {}
        try:
            while len(seen) < limit:
                batch = self._receive(url, dlq, min(_BATCH, limit - len(seen)), PEEK_VISIBILITY)
                fresh = [message for message in batch if message["MessageId"] not in seen]
                if not fresh:
                    break
                seen.update((message["MessageId"], message) for message in fresh)
        finally:
            self._release(url, dlq, list(seen.values()))
        return self._describe(name, list(seen.values()))

    # -- redrive -------------------------------------------------------------------------------------------

    def redrive(
        self,
        actor: str,
        *,
        method: RedriveMethod = "auto",
        limit: int | None = None,
        wait_seconds: float = 300.0,
    ) -> RedriveResult:
        """Move ``actor``'s DLQ messages back to its queue (see the module docstring)."""
        if limit is not None and limit < 1:
            raise DlqError(f"limit must be >= 1, got {limit!r}")
        [name] = self.actors(actor)
        if method == "auto":
            method = "move-task" if limit is None and _is_aws(self._sqs.meta.endpoint_url) else "copy"
        if method == "move-task":
            if limit is not None:
                raise DlqError("a move task moves every message: limit works only with method 'copy'")
            return self._move_task(name, wait_seconds)
        if method != "copy":
            raise DlqError(f"method must be one of auto, copy, move-task, got {method!r}")
        return self._copy(name, limit)

    def _copy(self, name: str, limit: int | None) -> RedriveResult:
        dlq, queue = self.manifest.dlq_name(name), self.manifest.queue_name(name)
        cap = limit if limit is not None else self.depths(name)[0].visible
        try:
            done = copy_back(
                self._sqs,
                dlq_url=self._dlq_url(name),
                dlq=dlq,
                queue_url=self._queue_url(name),
                queue=queue,
                limit=cap,
                wait_seconds=_WAIT_SECONDS,
            )
        except RedriveError as exc:
            if exc.operation == "SendMessageBatch":
                raise DlqError(
                    f"redrive of {dlq} stopped after {exc.moved} messages: SendMessageBatch to {queue} failed: "
                    f"{exc.code}; the unsent messages stay in the DLQ"
                ) from exc
            raise DlqError(str(exc)) from exc
        return RedriveResult(
            actor=name, method="copy", moved=done.moved, failed=done.failed, not_deleted=done.not_deleted
        )

    def _move_task(self, name: str, wait_seconds: float) -> RedriveResult:
        dlq = self.manifest.dlq_name(name)
        source = self._arn(self._dlq_url(name), dlq)
        destination = self._arn(self._queue_url(name), self.manifest.queue_name(name))
        self._call(dlq, self._sqs.start_message_move_task, SourceArn=source, DestinationArn=destination)
        deadline = self._monotonic() + wait_seconds
        while True:
            tasks = self._call(dlq, self._sqs.list_message_move_tasks, SourceArn=source, MaxResults=1).get(
                "Results", []
            )
            task: dict[str, Any] = tasks[0] if tasks else {}
            status = str(task.get("Status", "UNKNOWN"))
            if status not in _MOVE_TASK_ACTIVE or self._monotonic() >= deadline:
                break
            self._sleep(_MOVE_TASK_POLL_SECONDS)
        detail = str(task.get("FailureReason", ""))
        if status in _MOVE_TASK_ACTIVE:
            detail = f"still {status.lower()} after {wait_seconds:.0f} s; `asya dlq list` shows the progress"
        return RedriveResult(
            actor=name,
            method="move-task",
            moved=int(task.get("ApproximateNumberOfMessagesMoved", 0)),
            status=status.lower(),
            detail=detail,
        )

    # -- plumbing ------------------------------------------------------------------------------------------

    def _receive(self, url: str, queue: str, count: int, visibility: int) -> list[dict[str, Any]]:
        response = self._call(
            queue,
            self._sqs.receive_message,
            QueueUrl=url,
            MaxNumberOfMessages=count,
            VisibilityTimeout=visibility,
            WaitTimeSeconds=_WAIT_SECONDS,
            MessageSystemAttributeNames=["All"],
            MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    def _release(self, url: str, queue: str, messages: Sequence[dict[str, Any]]) -> None:
        for start in range(0, len(messages), _BATCH):
            chunk = messages[start : start + _BATCH]
            entries = [
                {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"], "VisibilityTimeout": 0}
                for index, message in enumerate(chunk)
            ]
            self._call(queue, self._sqs.change_message_visibility_batch, QueueUrl=url, Entries=entries)

    def _describe(self, actor: str, messages: Sequence[dict[str, Any]]) -> list[DlqMessage]:
        parsed = [(message, _envelope_fields(message.get("Body", ""))) for message in messages]
        ids = [fields["task_id"] for _, fields in parsed if fields["task_id"]]
        statuses = self._store.statuses(ids) if self._store is not None and ids else {}
        max_receives = next(a.max_receive_count for a in self.manifest.deployed_actors() if a.name == actor)
        out = []
        for message, fields in parsed:
            attributes = message.get("Attributes", {})
            sent = attributes.get("SentTimestamp")
            reason = fields["problem"] or (
                f"not acknowledged in {max_receives} deliveries (max_receive_count): the invocation crashed or "
                "timed out, or the record failed each time"
            )
            out.append(
                DlqMessage(
                    message_id=message["MessageId"],
                    task_id=fields["task_id"],
                    actor=fields["actor"],
                    phase=fields["phase"],
                    receive_count=int(attributes.get("ApproximateReceiveCount", 0)),
                    sent_at=_iso_ms(sent) if sent else None,
                    reason=reason,
                    task_status=statuses.get(fields["task_id"] or ""),
                )
            )
        return out

    def _dlq_url(self, actor: str) -> str:
        return self._url(self.manifest.dlq_name(actor))

    def _queue_url(self, actor: str) -> str:
        return self._url(self.manifest.queue_name(actor))

    def _url(self, queue: str) -> str:
        if queue not in self._urls:
            try:
                self._urls[queue] = self._sqs.get_queue_url(QueueName=queue)["QueueUrl"]
            except ClientError as exc:
                if exc.response["Error"]["Code"] in _NO_QUEUE:
                    raise DlqError(
                        f"queue {queue} does not exist at {self._sqs.meta.endpoint_url}: deploy the mesh "
                        "(or start `asya dev` and pass --local)"
                    ) from None
                raise DlqError(f"GetQueueUrl {queue} failed: {_code(exc)}") from exc
            except BotoCoreError as exc:
                raise DlqError(f"GetQueueUrl {queue} failed: {exc}") from exc
        return self._urls[queue]

    def _arn(self, url: str, queue: str) -> str:
        response = self._call(queue, self._sqs.get_queue_attributes, QueueUrl=url, AttributeNames=["QueueArn"])
        return str(response["Attributes"]["QueueArn"])

    @staticmethod
    def _call(queue: str, operation: Callable[..., Any], **kwargs: Any) -> Any:
        """``operation(**kwargs)`` with AWS errors turned into a :class:`DlqError` naming the call and the queue."""
        try:
            return operation(**kwargs)
        except (ClientError, BotoCoreError) as exc:
            name = "".join(part.title() for part in operation.__name__.split("_"))
            raise DlqError(f"{name} on {queue} failed: {_code(exc)}") from exc


def _envelope_fields(body: str) -> dict[str, str | None]:
    """Task id, current actor and phase of an envelope body, or a ``problem`` when the body is not one."""
    fields: dict[str, str | None] = {"task_id": None, "actor": None, "phase": None, "problem": None}
    try:
        data = json.loads(body)
    except ValueError:
        fields["problem"] = "body is not JSON (not an envelope)"
        return fields
    if not isinstance(data, dict) or not isinstance(data.get("id"), str):
        fields["problem"] = "body is not an envelope (no string 'id')"
        return fields
    route, status = data.get("route"), data.get("status")
    fields["task_id"] = data["id"]
    if isinstance(route, dict) and isinstance(route.get("curr"), str):
        fields["actor"] = route["curr"]
    if isinstance(status, dict) and isinstance(status.get("phase"), str):
        fields["phase"] = status["phase"]
    return fields


def _iso_ms(epoch_ms: str) -> str:
    seconds, millis = divmod(int(epoch_ms), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def _is_aws(endpoint_url: str) -> bool:
    host = urlsplit(endpoint_url).hostname or ""
    return host.endswith((".amazonaws.com", ".amazonaws.com.cn"))


def _code(exc: ClientError | BotoCoreError) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", "unknown error"))
    return str(exc)
