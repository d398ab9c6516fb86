"""The local run history: what each actor received and sent, per task, recorded by ``asya dev`` only.

Two taps feed :class:`RunHistory`, both in the local mode's own process, so nothing of it exists in AWS:

- :meth:`RunHistory.wrap` wraps an actor's Lambda handler as the event source mapping emulator calls it: each SQS
  record of the event opens a *step* (actor, attempt, envelope id, parent id, message id, input payload), closed with
  its duration when the invocation returns (the whole invocation's duration: the records of one batch run in one
  call); an invocation that raises records its error on each of its steps.
- :meth:`RunHistory.attach` registers botocore hooks on the mesh's SQS client (``SendMessage`` and
  ``SendMessageBatch``, after the call, only the entries SQS accepted): each envelope sent is an *output* of the open
  step whose envelope it continues: the one with the same id (the next hop, a retry, the hand-off to ``x-sink``),
  with the id of its ``parent_id`` (a fan-out child), or, for an envelope carrying an error, a fan-out slice's step
  whose ``parent_id`` is its id (a flow going on for its task after a slice failed); the steps of the invocation
  running in the sending thread are preferred. A send with no open step, or of a ``pending`` envelope with an
empty ``route.prev`` (which SQS may deliver before the sender's call returns), is the gateway creating a task.

A flow's fan-out slice that an invocation sends back, unchanged, to its own queue for another invocation (P-MAP-3)
drops that delivery's step: it ran nothing; the copy's delivery is the slice's step.

A step's ``error`` comes from what it sent (``asya.history.output_error``, shared with the run history in S3): a
``retrying`` or ``failed`` status's error, the error a flow's ``except`` caught (marked as caught), an
``x-sink``/``x-sump`` envelope's ``error`` payload, or the crash of its invocation.

Served as ``GET /api/v1/dev/history/{id}`` -> ``{"id", "steps": [{"actor", "attempt", "envelope_id", "parent_id",
"message_id", "started_at", "duration_ms", "input", "outputs": [{"actor", "envelope_id", "payload"}], "error"}],
"truncated"}`` (steps oldest first; a fan-out child's steps are under its root task's id; 404 for an unknown id).

Bounds (memory): the latest ``max_tasks`` tasks (default 500; the least recently active is dropped first), at most
``max_steps`` steps per task (default 200; the oldest are dropped and ``truncated`` is set), and payloads over
``max_payload_bytes`` encoded (default 16 KiB) kept as ``{"__truncated__": "<n> bytes"}``. With the defaults a
session holds a few tens of MB at most, whatever its length.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from asya.envelope import dumps
from asya.history import output_error

__all__ = ["HISTORY_PATH", "RunHistory"]

HISTORY_PATH: Final = "/api/v1/dev/history/{task_id}"
_CONTEXT_KEY: Final = "asya_history_params"
_SEND_OPERATIONS: Final = ("SendMessage", "SendMessageBatch")


@dataclass(slots=True)
class _Step:
    actor: str
    attempt: int | None
    envelope_id: str
    parent_id: str | None
    message_id: str
    started_at: str
    input: Any
    outputs: list[dict[str, Any]] = field(default_factory=list)
    duration_ms: float | None = None
    error: str | None = None
    #: the thread that runs the step's invocation, where its own sends happen
    thread: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "actor": self.actor,
            "attempt": self.attempt,
            "envelope_id": self.envelope_id,
            "parent_id": self.parent_id,
            "message_id": self.message_id,
            "started_at": self.started_at,
            "duration_ms": self.duration_ms,
            "input": self.input,
            "outputs": list(self.outputs),
            "error": self.error,
        }


@dataclass(slots=True)
class _Task:
    steps: deque[_Step]
    truncated: bool = False


class RunHistory:
    """A bounded, thread-safe record of the mesh's deliveries and sends, by task id."""

    def __init__(
        self,
        *,
        namespace: str,
        max_tasks: int = 500,
        max_steps: int = 200,
        max_payload_bytes: int = 16 * 1024,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_tasks < 1 or max_steps < 1 or max_payload_bytes < 1:
            raise ValueError(
                f"history bounds must be >= 1, got max_tasks={max_tasks!r}, max_steps={max_steps!r}, "
                f"max_payload_bytes={max_payload_bytes!r}"
            )
        self._prefix = f"asya-{namespace}-"
        self._max_tasks = max_tasks
        self._max_steps = max_steps
        self._max_payload = max_payload_bytes
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._tasks: OrderedDict[str, _Task] = OrderedDict()
        #: envelope id -> root task id, for the children of fan-outs (bounded with the tasks)
        self._roots: OrderedDict[str, str] = OrderedDict()
        self._open: dict[str, list[_Step]] = {}

    # -- reading -------------------------------------------------------------------------------------------------

    def get(self, task_id: str) -> dict[str, Any] | None:
        """The history of ``task_id`` (the contract in the module docstring), ``None`` when unknown."""
        with self._lock:
            task = self._tasks.get(task_id)
            if task is None:
                return None
            return {"id": task_id, "steps": [step.to_dict() for step in task.steps], "truncated": task.truncated}

    # -- recording -----------------------------------------------------------------------------------------------

    def wrap(self, actor: str, handler: Callable[[dict[str, Any], Any], Any]) -> Callable[[dict[str, Any], Any], Any]:
        """``handler`` recording one step per record of each event it is called with."""

        def recorded(event: dict[str, Any], context: Any) -> Any:
            steps = [self._open_step(actor, record) for record in event.get("Records") or []]
            started = self._monotonic()
            try:
                return handler(event, context)
            except BaseException as exc:
                for step in steps:
                    if step is not None and step.error is None:
                        step.error = f"invocation crashed: {type(exc).__name__}: {exc}"
                raise
            finally:
                elapsed = round((self._monotonic() - started) * 1000, 1)
                for step in steps:
                    if step is not None:
                        self._close_step(step, elapsed)

        return recorded

    def attach(self, sqs: Any) -> None:
        """Record every envelope sent through ``sqs`` (a boto3 SQS client) once SQS has accepted it."""
        for operation in _SEND_OPERATIONS:
            sqs.meta.events.register(f"before-parameter-build.sqs.{operation}", self._remember_params)
            sqs.meta.events.register(f"after-call.sqs.{operation}", self._on_sent)

    @staticmethod
    def _remember_params(params: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        context[_CONTEXT_KEY] = dict(params)

    def _on_sent(self, parsed: dict[str, Any], context: dict[str, Any], **_: Any) -> None:
        params = context.get(_CONTEXT_KEY)
        if not isinstance(params, dict):
            return
        destination = self._actor_of(str(params.get("QueueUrl", "")))
        if "Entries" in params:
            accepted = {str(entry.get("Id")) for entry in parsed.get("Successful") or []}
            bodies = [entry.get("MessageBody") for entry in params["Entries"] if str(entry.get("Id")) in accepted]
        elif parsed.get("MessageId"):
            bodies = [params.get("MessageBody")]
        else:
            return
        for body in bodies:
            envelope = _envelope(body)
            if envelope is not None:
                self._record_output(destination, envelope)

    def _actor_of(self, queue_url: str) -> str:
        name = queue_url.rstrip("/").rsplit("/", 1)[-1]
        return name.removeprefix(self._prefix)

    def _open_step(self, actor: str, record: dict[str, Any]) -> _Step | None:
        envelope = _envelope(record.get("body"))
        if envelope is None:
            return None
        status = envelope.get("status") if isinstance(envelope.get("status"), dict) else {}
        attempt = status.get("attempt") if isinstance(status, dict) else None
        step = _Step(
            actor=actor,
            attempt=attempt if isinstance(attempt, int) else None,
            envelope_id=str(envelope.get("id")),
            parent_id=_str_or_none(envelope.get("parent_id")),
            message_id=str(record.get("messageId", "")),
            started_at=datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            input=self._bounded(envelope.get("payload")),
            thread=threading.get_ident(),
        )
        with self._lock:
            task = self._task_for(step.envelope_id, step.parent_id)
            if len(task.steps) == self._max_steps:
                task.truncated = True
            task.steps.append(step)
            self._open.setdefault(step.envelope_id, []).append(step)
        return step

    def _close_step(self, step: _Step, elapsed_ms: float) -> None:
        with self._lock:
            step.duration_ms = elapsed_ms
            steps = self._open.get(step.envelope_id, [])
            if step in steps:
                steps.remove(step)
            if not steps:
                self._open.pop(step.envelope_id, None)

    def _record_output(self, destination: str, envelope: dict[str, Any]) -> None:
        envelope_id = str(envelope.get("id"))
        parent_id = _str_or_none(envelope.get("parent_id"))
        payload = envelope.get("payload")
        with self._lock:
            if self._drop_handed_back(destination, envelope):
                return
            candidates = self._open.get(envelope_id, []) + (self._open.get(parent_id, []) if parent_id else [])
            slices: list[_Step] = []
            if _carries_error(envelope):
                # a fan-out slice's step sending under its task's id: a flow's except, or its failure, going on for
                # the task (P-FLOW-10, P-FLOW-13), while the task's own aggregator step may be open too
                slices = [s for steps in self._open.values() for s in steps if s.parent_id == envelope_id]
            # the sender runs in this thread: its invocation's steps come first
            here = threading.get_ident()
            candidates = [s for s in candidates + slices if s.thread == here] or candidates or slices
            step = None if _is_creation(envelope) else _sender(candidates, destination, envelope)
            if step is None:
                self._task_for(envelope_id, parent_id)  # the gateway created a task: known from now on
                return
            step.outputs.append({"actor": destination, "envelope_id": envelope_id, "payload": self._bounded(payload)})
            if step.error is None:
                step.error = _error_of(destination, envelope)
            if parent_id and envelope_id != step.envelope_id:
                self._link(envelope_id, self._roots.get(step.envelope_id, step.envelope_id))

    def _drop_handed_back(self, destination: str, envelope: dict[str, Any]) -> bool:
        """A flow's fan-out slice the invocation running in this thread sent back, unchanged, to its own queue for
        another invocation (P-MAP-3): that delivery ran nothing and is no step; the copy's delivery will be. Holds the
        lock."""
        status, headers = envelope.get("status"), envelope.get("headers")
        fan_in = headers.get("x-asya-fan-in") if isinstance(headers, dict) else None
        if not (isinstance(fan_in, dict) and fan_in.get("set") and isinstance(status, dict)):
            return False
        if status.get("phase") != "pending":
            return False
        here = threading.get_ident()
        envelope_id = str(envelope.get("id"))
        steps = self._open.get(envelope_id, [])
        mine = [s for s in steps if s.actor == destination and s.thread == here and not s.outputs]
        if not mine:
            return False
        step = mine[-1]
        steps.remove(step)
        if not steps:
            self._open.pop(envelope_id, None)
        task = self._task_for(step.envelope_id, step.parent_id)
        if step in task.steps:
            task.steps.remove(step)
        return True

    def _task_for(self, envelope_id: str, parent_id: str | None) -> _Task:
        """The task an envelope belongs to (its root's, for a child), created and made most recent. Holds the lock."""
        root = self._roots.get(envelope_id)
        if root is None:
            root = self._roots.get(parent_id, parent_id) if parent_id else envelope_id
            self._link(envelope_id, root)
        task = self._tasks.get(root)
        if task is None:
            task = _Task(steps=deque(maxlen=self._max_steps))
            self._tasks[root] = task
            while len(self._tasks) > self._max_tasks:
                dropped, _ = self._tasks.popitem(last=False)
                self._forget(dropped)
        self._tasks.move_to_end(root)
        return task

    def _link(self, envelope_id: str, root: str) -> None:
        self._roots[envelope_id] = root
        self._roots.move_to_end(envelope_id)
        # every task keeps its own id and a bounded number of children: the map cannot outgrow the tasks
        while len(self._roots) > self._max_tasks * (self._max_steps + 1):
            self._roots.popitem(last=False)

    def _forget(self, root: str) -> None:
        for envelope_id in [key for key, value in self._roots.items() if value == root]:
            del self._roots[envelope_id]

    def _bounded(self, value: Any) -> Any:
        try:
            size = len(dumps(value).encode("utf-8"))
        except (TypeError, ValueError):
            return {"__truncated__": "not JSON"}
        return value if size <= self._max_payload else {"__truncated__": f"{size} bytes"}


def _envelope(body: object) -> dict[str, Any] | None:
    if not isinstance(body, str):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("id"), str) else None


def _sender(candidates: list[_Step], destination: str, envelope: dict[str, Any]) -> _Step | None:
    """Which open step sent ``envelope`` to ``destination``. The next actor may already have received an envelope
    (same id, step open too) before its sender's call returned, so a step never counts as the sender of what goes to
    its own queue, unless that is a retry; the actors the envelope's route names (``curr``, the last of ``prev``)
    are preferred, the latest step first."""
    status, route = envelope.get("status"), envelope.get("route")
    retry = isinstance(status, dict) and status.get("phase") == "retrying"
    hints: set[object] = set()
    if isinstance(route, dict):
        hints.add(route.get("curr"))
        prev = route.get("prev")
        if isinstance(prev, list) and prev:
            hints.add(prev[-1])
    possible = [step for step in candidates if retry or step.actor != destination]
    named = [step for step in possible if step.actor in hints]
    chosen = named or possible
    return chosen[-1] if chosen else None


def _is_creation(envelope: dict[str, Any]) -> bool:
    """The gateway's first envelope of a task: nothing behind it on the route, still ``pending``. Its send can be
    seen after the first actor already received it, so it must never count as that actor's output."""
    route, status = envelope.get("route"), envelope.get("status")
    return (
        not envelope.get("parent_id")
        and isinstance(route, dict)
        and not route.get("prev")
        and isinstance(status, dict)
        and status.get("phase") == "pending"
    )


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _carries_error(envelope: dict[str, Any]) -> bool:
    status = envelope.get("status")
    return isinstance(status, dict) and bool(status.get("error"))


def _error_of(destination: str, envelope: dict[str, Any]) -> str | None:
    status = envelope.get("status")
    return output_error(destination, status if isinstance(status, dict) else None, envelope.get("payload"))
