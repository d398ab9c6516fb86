"""The run history's writer in an actor runtime (P-HIST-1..6): one JSON Lines object per invocation.

Which hops are recorded: those whose envelope carries ``x-asya-history`` (``asya.headers.HISTORY``), which the
gateway sets at creation for a flow with ``history: steps`` (its value: the flow's ``history_body_bytes``) and which
every frame, retry and fan-out child inherits. Hook copies are not recorded. Nothing else changes for a task without
the header: no object, no header, no attribute.

Per invocation (one SQS batch) an :class:`InvocationHistory`:

- names ONE object ``history/{shard}/{YYYY-MM-DD}/{uuid4}.jsonl`` (``asya.tableschema.history_key``, today's UTC
  date, a fresh UUID4: no id from an envelope steers a key), chosen at the first recorded hop, before its claim;
- :meth:`~InvocationHistory.open` starts one line per recorded hop right before its handler call (after the claim):
  ``{"v": 1, "envelope_id", "parent_id", "actor", "attempt", "hop", "message_id", "started_at", "duration_ms",
  "input", "input_bytes", "input_cut", "input_ref", "route", "headers", "outputs", "error", "prev"}``; ``prev`` is
  the envelope's ``x-asya-history-prev`` (the object that recorded the hop which sent it: the chain a reader walks
  backwards);
- :meth:`~InvocationHistory.encode` wraps the transport's encoder: every envelope sent for a recorded hop (same id:
  the next hop, a retry, x-sink or x-sump; a child whose ``parent_id`` is the hop's envelope; or, from a fan-out
  slice's hop, an envelope with the slice's ``parent_id`` as its id: a flow going on for its task) leaves with
  ``x-asya-history-prev`` = this invocation's key and is added to the hop's ``outputs`` as ``{"actor",
  "envelope_id", "payload", "bytes", "ref"}``; its ``error`` is set from a ``retrying``/``failed`` status, the error
  a flow's ``except`` caught (:func:`output_error`), or an x-sink/x-sump error payload;
- bodies (``input``, output ``payload``) over the cut size (the header's value) are kept as
  ``{"__truncated__": "<n> bytes"}``, and ``input_cut`` / the output's ``cut`` say so (P-HIST-7: a payload may look
  like the marker); a payload offloaded to S3 (P-LARGE-2) keeps its reference in ``input_ref`` /
  ``ref`` (``s3://bucket/key``), so the whole body stays reachable while the payload object lives (P-LARGE-6);
- :meth:`~InvocationHistory.flush`, at the end of the batch, writes every line in ONE ``PutObject`` through
  ``asya.jsonlines`` (the checkpoints' writer): at most one PUT per invocation, whatever the batch size, so at full
  batches of 10 at most 0.1 PUT per hop. The history is an observation, not the durability path: a failed PUT is
  logged at WARNING and the records still succeed (re-running handlers to write a history line would cost more than
  the line); the chain then skips that invocation.

The task item holds the chain's head (``history_key``, ``history_prev``), written by the hop claim's own UpdateItem
(P-ACK-8) for a root, and by the child fence item's claim for a child: no write of its own (GW-DATA-8's budget).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from asya import headers as hdr
from asya import naming, tableschema
from asya.envelope import Envelope, Phase, dumps
from asya.jsonlines import JsonlWriter, escape_line_breaks
from asya.payloads import REFERENCE_KEY, is_reference

__all__ = [
    "CAUGHT_SUFFIX",
    "HistoryError",
    "HistoryMark",
    "InvocationHistory",
    "body_limit",
    "cut_body",
    "output_error",
    "was_cut",
]

#: The line format's version (``v``).
VERSION: Final = 1
_MARKER: Final = "__truncated__"
_MIN_BODY: Final = 64
_CREW_ERRORS: Final = frozenset({naming.SINK, naming.SUMP})
#: After the error of a call that a flow's ``except`` caught: the step failed, the task went on.
CAUGHT_SUFFIX: Final = "(caught by the flow's except)"

#: ``(history_key, history_prev)``: what the hop claim stores on the task or child item.
HistoryMark = tuple[str, str | None]


class HistoryError(Exception):
    """A history object could not be written (logged; the records it described still succeed)."""


def body_limit(headers: Mapping[str, Any]) -> int | None:
    """The cut size of a recorded envelope (``x-asya-history``), ``None`` when its history is off. A value that is
    not a positive integer falls back to the minimum: the gateway writes the header, a client cannot (GW-CREATE-5)."""
    raw = headers.get(hdr.HISTORY)
    if raw is None or hdr.is_hook_copy(headers):
        return None
    try:
        return max(_MIN_BODY, int(str(raw)))
    except ValueError:
        return _MIN_BODY


def cut_body(value: Any, limit: int) -> tuple[Any, int, bool]:
    """``(value or its truncation marker, encoded size in bytes, whether it was cut)``: the flag, not the marker's
    shape, says a body was cut, since a payload may look exactly like the marker (P-HIST-7)."""
    try:
        size = len(dumps(value).encode("utf-8"))
    except (TypeError, ValueError):
        return {_MARKER: "not JSON"}, 0, True
    if size <= limit:
        return value, size, False
    return {_MARKER: f"{size} bytes"}, size, True


def was_cut(line: Mapping[str, Any], body: str, size: str, flag: str) -> bool:
    """Whether the body ``line[body]`` was cut (P-HIST-7): ``line[flag]`` when the writer set it, else, for a line
    written before the flag existed, a body with the marker's shape whose recorded size (``line[size]``) is not its
    own: a cut body's size is the whole body's, which the short marker never equals."""
    recorded, flagged = line.get(body), line.get(flag)
    if isinstance(flagged, bool):
        return flagged
    if not (isinstance(recorded, dict) and set(recorded) == {_MARKER}):
        return False
    return line.get(size) != len(dumps(recorded).encode("utf-8"))


class _Line:
    __slots__ = ("data", "limit")

    def __init__(self, data: dict[str, Any], limit: int) -> None:
        self.data = data
        self.limit = limit


class InvocationHistory(JsonlWriter[str | None]):
    """The history lines of one invocation (see the module docstring); ``bucket`` None turns it off. Thread-safe:
    frames may be encoded by the outbox while the next record already runs."""

    _error = HistoryError
    _what = "history"

    def _start(self) -> None:
        self._key: str | None = None
        self._lines: list[_Line] = []
        self._by_envelope: dict[str, _Line] = {}
        self._by_parent: dict[str, _Line] = {}
        self._by_message: dict[str, _Line] = {}
        self._lock = threading.Lock()

    @property
    def key(self) -> str | None:
        """This invocation's object key, once a hop was marked or opened."""
        return self._key

    def mark(self, envelope: Envelope) -> HistoryMark | None:
        """The claim's ``(history_key, history_prev)`` for ``envelope``, ``None`` when it is not recorded."""
        if self._bucket is None or body_limit(envelope.headers) is None:
            return None
        prev = envelope.headers.get(hdr.HISTORY_PREV)
        return self._object_key(), prev if isinstance(prev, str) and prev else None

    def open(self, envelope: Envelope, *, actor: str, message_id: str, payload: Any, started_at: str) -> bool:
        """Start the line of a hop about to run (``payload``: the input the handler gets, rehydrated)."""
        limit = body_limit(envelope.headers)
        if self._bucket is None or limit is None:
            return False
        body, size, cut = cut_body(payload, limit)
        prev = envelope.headers.get(hdr.HISTORY_PREV)
        route = envelope.route
        headers = {k: v for k, v in envelope.headers.items() if k not in (hdr.HISTORY_PREV, hdr.TRACEPARENT)}
        data: dict[str, Any] = {
            "v": VERSION,
            "envelope_id": envelope.id,
            "parent_id": envelope.parent_id,
            "actor": actor,
            "attempt": envelope.status.attempt if envelope.status is not None else 1,
            "hop": len(route.prev),
            "message_id": message_id,
            "started_at": started_at,
            "duration_ms": None,
            "input": body,
            "input_bytes": size,
            "input_cut": cut,
            "input_ref": envelope.payload[REFERENCE_KEY] if is_reference(envelope.payload) else None,
            "route": route.to_dict(),
            "headers": headers,
            "outputs": [],
            "error": None,
            "prev": prev if isinstance(prev, str) and prev else None,
        }
        line = _Line(data, limit)
        with self._lock:
            self._object_key()
            self._lines.append(line)
            self._by_envelope[envelope.id] = line
            if envelope.parent_id:
                self._by_parent[envelope.parent_id] = line  # the latest child line opened under that parent
            self._by_message[message_id] = line
        return True

    def close(self, message_id: str, duration_ms: float) -> None:
        with self._lock:
            line = self._by_message.get(message_id)
            if line is not None:
                line.data["duration_ms"] = duration_ms

    def fail(self, message_id: str, error: BaseException) -> None:
        """The record failed (SQS delivers it again): the line says why."""
        with self._lock:
            line = self._by_message.get(message_id)
            if line is not None and line.data["error"] is None:
                line.data["error"] = f"record failed: {type(error).__name__}: {error}"

    def encode(self, actor: str, envelope: Envelope, inner: Callable[[str, Envelope], str]) -> str:
        """``inner(actor, envelope)``, the envelope first given ``x-asya-history-prev`` when it continues a
        recorded hop, which then lists it as an output."""
        with self._lock:
            line = self._by_envelope.get(envelope.id)
            if line is None and envelope.parent_id:
                line = self._by_envelope.get(envelope.parent_id)
            if line is None:
                # a fan-out slice's hop sending under its task's id: a flow's except, or its failure, going on for
                # the task (P-FLOW-10, P-FLOW-13); sent while that hop runs, after its line was opened
                line = self._by_parent.get(envelope.id)
            key = self._key
        if line is None or key is None:
            return inner(actor, envelope)
        marked = Envelope(
            id=envelope.id,
            route=envelope.route,
            payload=envelope.payload,
            parent_id=envelope.parent_id,
            headers={**envelope.headers, hdr.HISTORY_PREV: key},
            status=envelope.status,
        )
        body = inner(actor, marked)
        payload, size, cut = cut_body(envelope.payload, line.limit)
        ref = envelope.payload[REFERENCE_KEY] if is_reference(envelope.payload) else None
        if ref is None and size > line.limit and f'"{REFERENCE_KEY}"' in body:
            ref = _sent_reference(body)
        output = {"actor": actor, "envelope_id": envelope.id, "payload": payload, "bytes": size, "cut": cut, "ref": ref}
        with self._lock:
            line.data["outputs"].append(output)
            if line.data["error"] is None:
                line.data["error"] = _error_of(actor, envelope)
        return body

    def flush(self) -> str | None:
        """Write the invocation's lines as one object; its key, or ``None`` when nothing was recorded. Raises
        :class:`HistoryError` when the PUT fails."""
        with self._lock:
            lines = [escape_line_breaks(dumps(line.data)) for line in self._lines]
            key = self._key
            self._lines = []
        if not lines or key is None or self._bucket is None:
            return None
        self._put(self._bucket, key, lines)
        return key

    def _object_key(self) -> str:
        if self._key is None:
            self._key = tableschema.history_key(self._clock().date().isoformat(), self._new_id())
        return self._key


def _sent_reference(body: str) -> str | None:
    import json  # only for an output over the cut size that was offloaded

    payload = json.loads(body).get("payload")
    return payload[REFERENCE_KEY] if is_reference(payload) else None


def _error_of(actor: str, envelope: Envelope) -> str | None:
    status = envelope.status.to_dict() if envelope.status is not None else None
    return output_error(actor, status, envelope.payload)


def output_error(destination: str, status: Mapping[str, Any] | None, payload: Any) -> str | None:
    """The error an output sent to ``destination`` reports (both run histories, this one and ``asya dev``'s): a
    retry's or failure's status error; the error a flow's ``except`` caught, which its continuation carries on an
    otherwise ``pending`` or ``succeeded`` status (P-FLOW-9), marked as caught; or the error payload sent to the
    crew."""
    phase = status.get("phase") if status is not None else None
    error = status.get("error") if status is not None else None
    if error and phase in (Phase.RETRYING.value, Phase.FAILED.value):
        return _error_text(error)
    if error and phase in (Phase.PENDING.value, Phase.SUCCEEDED.value):
        return f"{_error_text(error)} {CAUGHT_SUFFIX}"
    if destination in _CREW_ERRORS and isinstance(payload, dict) and isinstance(payload.get("error"), str):
        return str(payload["error"])
    return None


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        kind, message = error.get("type"), error.get("message")
        return f"{kind}: {message}" if kind and message else str(message or kind or dict(error))
    return str(error)
