"""Pause and resume as pure functions, shared by x-pause, x-resume and the gateway (P-PAUSE-1..6, P-RESUME-1..6;
GW-RESUME-1..4).

- :func:`parse_metadata`: the pause metadata of P-PAUSE-3 (header ``x-asya-pause``, else
  ``{"prompt": "Task paused", "fields": []}``), checked: ``prompt`` a string; ``fields`` a list of
  ``{name, type?, prompt?, payload_key?, required?}`` with unique names, ``type`` one of :data:`FIELD_TYPES` (default
  ``string``), ``payload_key`` a JSON Pointer; ``merge`` ``shallow`` (default) or ``deep``; ``timeout`` a positive
  integer of seconds after which nobody's resume ends the pause with ``TimeoutError`` (P-WAIT-2); ``event``, the
  name of the signal a ``wait_for`` waits for, and ``path``, the JSON Pointer its data goes to (default
  ``/<event>``, P-WAIT-4). A bad value raises :class:`PauseMetadataError` naming the member and the value.
- :func:`expiry_envelope`: the message x-pause sends to x-resume when a pause has a ``timeout`` (P-WAIT-2), and
  :func:`expiry_of` reads it back.
- :func:`input_problem`: GW-RESUME-1's check of a resume input against the fields: the 400 message, else ``None``.
- :func:`paused_document` / :func:`restored_envelope`: the stored file ``paused/{id}.json`` (P-PAUSE-4: transient
  headers dropped, P-HDR-4; ``route.next`` without a leading ``x-resume``) and the envelope x-resume sends on from it
  (P-RESUME-5).
- :func:`merge_input`: P-RESUME-4: with fields, each input key naming a field is set at its ``payload_key`` (default
  ``/<name>``), creating intermediate objects, other keys ignored; without fields, ``shallow`` replaces top-level keys
  and ``deep`` merges objects recursively. A wait for an event takes the signal's data, any JSON value, at its
  ``path`` (P-WAIT-4): merged into an object found there when both are objects (shallow), else set. Raises
  :class:`ResumeMergeError`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from asya import headers as hdr
from asya import naming, tableschema
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.exceptions import AsyaError
from asya.naming import is_event_name
from asya.payloads import is_reference
from asya.store.transition import StatusUpdate
from asya.timeutil import format_ts, parse_ts

__all__ = [
    "DEFAULT_METADATA",
    "FIELD_TYPES",
    "MERGE_MODES",
    "PAUSED_PREFIX",
    "TRANSIENT_HEADERS",
    "PauseExpiry",
    "PauseField",
    "PauseMetadata",
    "PauseMetadataError",
    "ResumeMergeError",
    "expiry_due",
    "expiry_envelope",
    "expiry_of",
    "input_problem",
    "merge_input",
    "parse_metadata",
    "paused_document",
    "paused_key",
    "remaining_seconds",
    "restored_envelope",
    "resume_envelope",
    "resume_write",
]

PAUSED_PREFIX: Final = tableschema.PAUSED_PREFIX
#: The S3 key of a paused envelope (P-PAUSE-4, GW-DATA-7), from the bucket layout of ``asya.tableschema``.
paused_key: Final = tableschema.paused_key
FIELD_TYPES: Final = ("string", "number", "integer", "boolean", "object", "array")
MERGE_MODES: Final = ("shallow", "deep")
DEFAULT_METADATA: Final[Mapping[str, Any]] = {"prompt": "Task paused", "fields": []}
#: P-HDR-4: never stored with a paused envelope.
TRANSIENT_HEADERS: Final = frozenset(
    {
        hdr.FAN_IN,
        hdr.ROUTE_RESOLVED,
        hdr.DELAY_UNTIL,
        hdr.PAUSE,
        hdr.PAUSE_EXPIRY,
        hdr.RESUME_TASK,
        hdr.RESUME_TIMEOUT,
    }
)
_FIELD_KEYS: Final = frozenset({"name", "type", "prompt", "payload_key", "required"})


class PauseMetadataError(AsyaError):
    """Pause metadata that does not follow P-PAUSE-3; the message names the member and the bad value."""


class ResumeMergeError(AsyaError):
    """A resume input that cannot be merged into the stored payload (P-RESUME-4)."""


@dataclass(frozen=True, slots=True)
class PauseField:
    name: str
    type: str = "string"
    prompt: str | None = None
    payload_key: str | None = None
    required: bool = False

    @property
    def pointer(self) -> str:
        return self.payload_key if self.payload_key is not None else "/" + _escape(self.name)


@dataclass(frozen=True, slots=True)
class PauseMetadata:
    prompt: str
    fields: tuple[PauseField, ...] = ()
    merge: str = "shallow"
    #: P-WAIT-2: seconds until the pause ends with ``TimeoutError`` when nobody resumes it; ``None``: no expiry
    timeout: int | None = None
    #: P-WAIT-4: the event a ``wait_for`` waits for (a signal ends the pause, not a resume), and where its data goes
    event: str | None = None
    path: str | None = None

    @property
    def event_pointer(self) -> str:
        """Where a signal's data goes: ``path``, else ``/<event>``."""
        return self.path if self.path is not None else "/" + _escape(self.event or "")

    #: the metadata as given (stored as ``pause_metadata``, shown to clients)
    raw: Mapping[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.raw) if self.raw is not None else {"prompt": self.prompt, "fields": []}


def parse_metadata(value: object) -> PauseMetadata:
    """P-PAUSE-3: ``value`` is the ``x-asya-pause`` header (``None`` when absent)."""
    if value is None:
        value = DEFAULT_METADATA
    if not isinstance(value, Mapping):
        raise PauseMetadataError(f"{hdr.PAUSE}: pause metadata must be an object, got {value!r}")
    prompt = value.get("prompt")
    if not isinstance(prompt, str):
        raise PauseMetadataError(f"{hdr.PAUSE}.prompt: must be a string, got {prompt!r}")
    merge = value.get("merge", "shallow")
    if merge not in MERGE_MODES:
        raise PauseMetadataError(f"{hdr.PAUSE}.merge: must be one of {', '.join(MERGE_MODES)}, got {merge!r}")
    raw_fields = value.get("fields", [])
    if not isinstance(raw_fields, list):
        raise PauseMetadataError(f"{hdr.PAUSE}.fields: must be a list, got {raw_fields!r}")
    fields: list[PauseField] = []
    for index, raw in enumerate(raw_fields):
        field = _parse_field(raw, f"{hdr.PAUSE}.fields[{index}]")
        if any(f.name == field.name for f in fields):
            raise PauseMetadataError(f"{hdr.PAUSE}.fields[{index}].name: duplicate field name {field.name!r}")
        fields.append(field)
    timeout = value.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 1):
        raise PauseMetadataError(f"{hdr.PAUSE}.timeout: must be a positive integer of seconds, got {timeout!r}")
    event = value.get("event")
    if event is not None and (not isinstance(event, str) or not is_event_name(event)):
        raise PauseMetadataError(f"{hdr.PAUSE}.event: must be 1 to 64 letters, digits, '.', '_' or '-', got {event!r}")
    path = value.get("path")
    if path is not None and (event is None or not isinstance(path, str) or not (path == "" or path.startswith("/"))):
        raise PauseMetadataError(f"{hdr.PAUSE}.path: must be a JSON Pointer of an event's data, got {path!r}")
    raw_copy = {"prompt": prompt, "fields": list(raw_fields), **({"merge": merge} if "merge" in value else {})}
    for name, member in (("timeout", timeout), ("event", event), ("path", path)):
        if member is not None:
            raw_copy[name] = member
    return PauseMetadata(
        prompt=prompt, fields=tuple(fields), merge=str(merge), timeout=timeout, event=event, path=path, raw=raw_copy
    )


def _parse_field(raw: object, where: str) -> PauseField:
    if not isinstance(raw, Mapping):
        raise PauseMetadataError(f"{where}: a field must be an object, got {raw!r}")
    unknown = sorted(set(raw) - _FIELD_KEYS)
    if unknown:
        raise PauseMetadataError(f"{where}: unknown member {unknown[0]!r}")
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        raise PauseMetadataError(f"{where}.name: must be a non-empty string, got {name!r}")
    kind = raw.get("type", "string")
    if kind not in FIELD_TYPES:
        raise PauseMetadataError(f"{where}.type: must be one of {', '.join(FIELD_TYPES)}, got {kind!r}")
    prompt = raw.get("prompt")
    if prompt is not None and not isinstance(prompt, str):
        raise PauseMetadataError(f"{where}.prompt: must be a string, got {prompt!r}")
    pointer = raw.get("payload_key")
    if pointer is not None and (not isinstance(pointer, str) or not pointer.startswith("/")):
        raise PauseMetadataError(f"{where}.payload_key: must be a JSON Pointer starting with '/', got {pointer!r}")
    required = raw.get("required", False)
    if not isinstance(required, bool):
        raise PauseMetadataError(f"{where}.required: must be true or false, got {required!r}")
    return PauseField(name=name, type=str(kind), prompt=prompt, payload_key=pointer, required=required)


def _matches(kind: str, value: object) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if kind == "integer":
        if isinstance(value, bool):
            return False
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "object":
        return isinstance(value, dict)
    return isinstance(value, list)


def input_problem(metadata: Mapping[str, Any] | None, value: object) -> str | None:
    """GW-RESUME-1: the 400 message for a resume ``input`` that does not fit the pause fields, else ``None``."""
    if not isinstance(value, dict):
        return "input must be an object"
    try:
        parsed = parse_metadata(metadata if metadata is not None else DEFAULT_METADATA)
    except PauseMetadataError:
        return None  # x-pause checked it before storing: a task paused through the producer route is not refused
    for field in parsed.fields:
        if field.name not in value:
            if field.required:
                return f"missing required field '{field.name}'"
            continue
        if not _matches(field.type, value[field.name]):
            return f"field '{field.name}' must be {field.type}"
    return None


def remaining_seconds(deadline_at: str | None, now: datetime) -> int | None:
    """``floor(deadline_at - now)``, at least 0, or ``None`` without a deadline (P-PAUSE-4)."""
    deadline = parse_ts(deadline_at)
    if deadline is None:
        return None
    return max(0, math.floor((deadline - now).total_seconds()))


def paused_document(
    envelope: Envelope, payload: Any, metadata: PauseMetadata, *, now: datetime, remaining: int | None
) -> dict[str, Any]:
    """The paused file of P-PAUSE-4 for ``envelope`` arriving at x-pause (``payload`` rehydrated)."""
    status = envelope.status or Status()
    next_actors = list(envelope.route.next)
    if next_actors and next_actors[0] == naming.RESUME:
        next_actors = next_actors[1:]
    doc: dict[str, Any] = {"id": envelope.id}
    if envelope.parent_id:
        doc["parent_id"] = envelope.parent_id
    doc["route"] = {"prev": [*envelope.route.prev, naming.PAUSE], "curr": "", "next": next_actors}
    doc["headers"] = {k: v for k, v in envelope.headers.items() if k not in TRANSIENT_HEADERS}
    doc["status"] = {"created_at": status.created_at or format_ts(now)}
    if status.deadline_at:
        doc["status"]["deadline_at"] = status.deadline_at
    doc["payload"] = payload
    doc["pause"] = {"metadata": metadata.to_dict(), "paused_at": format_ts(now), "remaining_seconds": remaining}
    return doc


def merge_input(document: Mapping[str, Any], value: object) -> Any:
    """P-RESUME-4: the stored payload with the resume input merged in. A merge that ends as a storage reference is
    refused (GW-REF-2): the gateway refuses such inputs, and this holds whatever produced one."""
    merged = _merged(document, value)
    if is_reference(merged):
        raise ResumeMergeError("the merged payload is a storage reference ('__ref__'): only the mesh writes them")
    return merged


def _merged(document: Mapping[str, Any], value: object) -> Any:
    stored = document.get("payload")
    pause = document.get("pause")
    raw = pause.get("metadata") if isinstance(pause, Mapping) else None
    try:
        metadata = parse_metadata(raw)
    except PauseMetadataError as exc:
        raise ResumeMergeError(str(exc)) from None
    if metadata.event is not None:
        return _signal_merged(stored, metadata.event_pointer, value)
    if not isinstance(value, dict):
        raise ResumeMergeError(f"resume input must be an object, got {type(value).__name__}")
    if not isinstance(stored, dict):
        raise ResumeMergeError(f"paused payload must be an object to merge a resume input, got {type(stored).__name__}")
    if metadata.fields:
        out = _deep_copy(stored)
        for field in metadata.fields:
            if field.name in value:
                _set_pointer(out, field.pointer, value[field.name])
        return out
    if metadata.merge == "deep":
        return _deep_merge(stored, value)
    return {**stored, **value}


def _signal_merged(stored: Any, pointer: str, data: Any) -> Any:
    """P-WAIT-4: ``data`` at ``pointer`` of the paused state: merged (shallow) into an object found there when it is
    one, else set; ``""`` is the whole state."""
    if pointer == "":
        return {**stored, **data} if isinstance(stored, dict) and isinstance(data, dict) else data
    if not isinstance(stored, dict):
        raise ResumeMergeError(f"paused payload must be an object to take a signal at {pointer!r}")
    out = _deep_copy(stored)
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
    node: Any = out
    for token in tokens[:-1]:
        child = node.get(token) if isinstance(node, dict) else None
        node = child if isinstance(child, dict) else None
        if node is None:
            break
    current = node.get(tokens[-1]) if isinstance(node, dict) else None
    merged = {**current, **data} if isinstance(current, dict) and isinstance(data, dict) else data
    _set_pointer(out, pointer, merged)
    return out


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        current = out.get(key)
        out[key] = _deep_merge(current, value) if isinstance(current, dict) and isinstance(value, dict) else value
    return out


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _set_pointer(target: dict[str, Any], pointer: str, value: Any) -> None:
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in pointer.split("/")[1:]]
    node: Any = target
    for depth, token in enumerate(tokens[:-1]):
        child = node.get(token)
        if child is None:
            child = node[token] = {}
        if not isinstance(child, dict):
            where = "/" + "/".join(_escape(t) for t in tokens[: depth + 1])
            raise ResumeMergeError(f"payload_key {pointer!r}: {where!r} is not an object in the paused payload")
        node = child
    node[tokens[-1]] = value


def restored_envelope(
    document: Mapping[str, Any], payload: Any, *, trace_headers: Mapping[str, Any], now: datetime, timeout: int | None
) -> tuple[str, Envelope]:
    """P-RESUME-5: ``(destination, envelope)`` x-resume sends on: the stored ``next`` minus a leading ``x-resume``,
    or x-sink with ``Completed`` when that is empty."""
    route = document.get("route") if isinstance(document.get("route"), Mapping) else {}
    assert isinstance(route, Mapping)
    prev = [str(a) for a in route.get("prev") or []]
    remaining = [str(a) for a in route.get("next") or []]
    if remaining and remaining[0] == naming.RESUME:
        remaining = remaining[1:]
    status_in = document.get("status") if isinstance(document.get("status"), Mapping) else {}
    assert isinstance(status_in, Mapping)
    stamp = format_ts(now)
    deadline_at = format_ts(now + timedelta(seconds=timeout)) if timeout is not None else None
    headers = dict(document.get("headers") or {})
    headers.update(trace_headers)
    prev = [*prev, naming.RESUME]
    created_at = str(status_in.get("created_at") or stamp)
    if remaining:
        destination = remaining[0]
        out_route = Route(prev=prev, curr=destination, next=remaining[1:])
        phase, reason, actor = Phase.PENDING, None, destination
    else:
        destination = naming.SINK
        out_route = Route(prev=prev[:-1], curr=naming.RESUME, next=[])
        phase, reason, actor = Phase.SUCCEEDED, Reason.COMPLETED.value, naming.RESUME
    status = Status(
        phase=phase.value,
        reason=reason,
        actor=actor,
        attempt=1,
        max_attempts=1,
        created_at=created_at,
        updated_at=stamp,
        deadline_at=deadline_at,
    )
    parent = document.get("parent_id")
    envelope = Envelope(
        id=str(document["id"]),
        route=out_route,
        payload=payload,
        parent_id=parent if isinstance(parent, str) and parent else None,
        headers=headers,
        status=status,
    )
    return destination, envelope


@dataclass(frozen=True, slots=True)
class PauseExpiry:
    """What a pause's expiry message names (P-WAIT-2): the pause's fence ``(hop, attempt)``, which tells this pause
    from a later one of the same task, its timeout in seconds, and when it comes due."""

    fence: tuple[int, int]
    seconds: int
    due_at: str

    def to_header(self) -> dict[str, Any]:
        return {"fence": list(self.fence), "seconds": self.seconds, "due_at": self.due_at}


def expiry_envelope(task_id: str, expiry: PauseExpiry, *, now: datetime) -> Envelope:
    """The envelope x-pause sends to x-resume for a pause with a timeout (P-WAIT-2): delivered when ``due_at``
    comes (SQS ``DelaySeconds``, chained through ``x-asya-delay-until`` past 900 s, P-RES-9)."""
    headers = {hdr.RESUME_TASK: task_id, hdr.PAUSE_EXPIRY: expiry.to_header(), hdr.DELAY_UNTIL: expiry.due_at}
    return _to_resume(task_id, {}, headers, now=now, deadline_at=None)


def expiry_of(headers: Mapping[str, Any]) -> PauseExpiry | None:
    """The :class:`PauseExpiry` of an x-resume envelope, ``None`` for a resume; raises :class:`PauseMetadataError`
    for a malformed header."""
    raw = headers.get(hdr.PAUSE_EXPIRY)
    if raw is None:
        return None
    try:
        fence = raw["fence"]
        expiry = PauseExpiry(
            fence=(int(fence[0]), int(fence[1])), seconds=int(raw["seconds"]), due_at=str(raw["due_at"])
        )
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise PauseMetadataError(f"{hdr.PAUSE_EXPIRY}: malformed: {exc!r}") from None
    if parse_ts(expiry.due_at) is None:
        raise PauseMetadataError(f"{hdr.PAUSE_EXPIRY}.due_at: must be a timestamp, got {expiry.due_at!r}")
    return expiry


def expiry_due(now: datetime, seconds: int) -> str:
    """When a pause of ``seconds`` made at ``now`` expires."""
    return format_ts(now + timedelta(seconds=seconds))


def resume_envelope(
    task_id: str, given: Any, *, seconds: int | None, deadline_at: str | None, now: datetime, trace: Mapping[str, Any]
) -> Envelope:
    """The envelope that resumes a paused task (P-RESUME-1): ``given`` (a resume's input, a signal's data) to
    x-resume, ``x-asya-resume-timeout`` the seconds of the new deadline when there is one."""
    headers: dict[str, Any] = {hdr.RESUME_TASK: task_id}
    if seconds is not None:
        headers[hdr.RESUME_TIMEOUT] = str(seconds)
    headers.update(trace)
    return _to_resume(task_id, given, headers, now=now, deadline_at=deadline_at)


def _to_resume(
    task_id: str, payload: Any, headers: dict[str, Any], *, now: datetime, deadline_at: str | None
) -> Envelope:
    """A new envelope of task ``task_id`` for x-resume (a resume, a signal, a pause's expiry): first attempt, created
    ``now``."""
    stamp = format_ts(now)
    return Envelope(
        id=task_id,
        route=Route(prev=[], curr=naming.RESUME, next=[]),
        payload=payload,
        headers=headers,
        status=Status(
            phase=Phase.PENDING.value,
            actor=naming.RESUME,
            attempt=1,
            max_attempts=1,
            created_at=stamp,
            updated_at=stamp,
            deadline_at=deadline_at,
        ),
    )


def resume_write(
    task_id: str,
    *,
    seconds: float | None,
    now: datetime,
    message: str | None,
    pause_fence: tuple[int, int] | None = None,
    pause_timed_out: bool = False,
) -> tuple[StatusUpdate, str | None]:
    """P-RESUME-1's one conditional write ``paused -> running`` that every end of a pause makes (a resume, a signal
    delivered by the gateway or by x-pause, a pause timeout), and the deadline it gives: ``now`` plus ``seconds``
    (the budget frozen at the pause, or a resume's own timeout; ``None``: the task has no deadline)."""
    deadline_at = format_ts(now + timedelta(seconds=seconds)) if seconds is not None else None
    update = StatusUpdate(
        status="running",
        resume=True,
        deadline_at=deadline_at,
        actor=naming.RESUME,
        message=message,
        envelope_id=task_id,
        pause_fence=pause_fence,
        pause_timed_out=pause_timed_out,
    )
    return update, deadline_at
