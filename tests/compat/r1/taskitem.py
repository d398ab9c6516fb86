"""FROZEN copy of release 1's reader of task items (``asya.store.views`` with the getters of ``asya.store.records`` and
the inline decoding of ``asya.store.bodies``, tests/compat/r1): never edit it.

:func:`read_task` takes the items of one task as DynamoDB holds them (``{"name": {"S": ...}}``) and returns the task
view release 1 shows for them (GW-TASK-1), without the reads release 1 makes beside the items (an S3 object of a
large value is given as ``{field}_url`` naming its key; a result kept only as a checkpoint line, and the state
stored at a pause, are left out).

Release 1's getters read an attribute of the wrong type as absent, and a malformed number or JSON value breaks the
read. Both lose data without a word, so this frozen copy states them as refusals: :class:`TaskItemError` names the
item, the attribute and the value. The attributes, their types and the closed set of statuses below are what
release 1 reads; a later writer must write nothing it refuses (docs/protocol.md, P-COMPAT-1..3).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

TASK_SK: Final = "TASK"
BODY_SK: Final = "BODY"
RESULT_SK: Final = "RESULT"
PAUSE_SK: Final = "PAUSE"
CHILD_PREFIX: Final = "CHILD#"
EVENT_PREFIX: Final = "EV#"
BODY_FIELDS: Final = ("payload", "result", "error_details", "pause_metadata")
STATUSES: Final = ("pending", "running", "paused", "succeeded", "failed", "canceled")
_BODY_FORMS: Final = ("", "_url", "_s3")

#: Attributes release 1 reads from a task item, by AttributeValue type.
TASK_STRINGS: Final = (
    "pk", "sk", "id", "status", "created_at", "updated_at", "flow", "actor", "current_actor", "step", "message",
    "deadline_at", "checkpoint_key", "context_id", "owner", "error", "failed_actor", "terminal_by", "result_span",
)  # fmt: skip
TASK_NUMBERS: Final = ("progress_percent", "last_seq", "remaining_seconds", "checkpoint_line", "fence_h", "fence_a")
TASK_JSON: Final = ("data",)
CHILD_STRINGS: Final = ("sk", "child_status", "done_by", "actor", "error", "checkpoint_key")
CHILD_NUMBERS: Final = ("fence_h", "fence_a", "attempt", "checkpoint_line")


class TaskItemError(ValueError):
    """A task item release 1 cannot read as its writer meant."""


def _get(item: Mapping[str, Any], name: str, kind: str, where: str) -> Any:
    if name not in item:
        return None
    value = item[name]
    if isinstance(value, Mapping) and set(value) == {"NULL"} and value["NULL"] is True:
        return None
    if not isinstance(value, Mapping) or set(value) != {kind}:
        raise TaskItemError(f"{where}: attribute {name!r} must be of type {kind}, got {value!r}")
    return value[kind]


def _str(item: Mapping[str, Any], name: str, where: str) -> str | None:
    value = _get(item, name, "S", where)
    if value is not None and not isinstance(value, str):
        raise TaskItemError(f"{where}: attribute {name!r} must be a string, got {value!r}")
    return value


def _num(item: Mapping[str, Any], name: str, where: str, *, integer: bool = False) -> float | int | None:
    text = _get(item, name, "N", where)
    if text is None:
        return None
    try:
        return int(text) if integer else float(text)
    except (TypeError, ValueError):
        raise TaskItemError(f"{where}: attribute {name!r} is not a number: {text!r}") from None


def _json(item: Mapping[str, Any], name: str, where: str) -> Any:
    text = _str(item, name, where)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:
        raise TaskItemError(f"{where}: attribute {name!r} is not JSON: {text[:80]!r}") from None


def _check(item: Mapping[str, Any], where: str, strings: Sequence[str], numbers: Sequence[str]) -> None:
    for name in strings:
        _str(item, name, where)
    for name in numbers:
        _num(item, name, where, integer=name != "progress_percent")


def _decode(item: Mapping[str, Any] | None, where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not item:
        return out
    for field in BODY_FIELDS:
        if field in item:
            out[field] = _json(item, field, where)
            continue
        key = _str(item, f"{field}_s3", where)
        if key is not None:
            out[f"{field}_url"] = key
    return out


def _copy_body(out: dict[str, Any], body: Mapping[str, Any], field: str) -> None:
    for suffix in _BODY_FORMS:
        if field + suffix in body:
            out[field + suffix] = body[field + suffix]
            return


def _outcome(out: dict[str, Any], item: Mapping[str, Any], body: Mapping[str, Any], status: str) -> None:
    if status == "succeeded":
        _copy_body(out, body, "result")
    elif status == "failed":
        out["error"] = _str(item, "error", TASK_SK) or "task failed"
        out["error_details"] = None
        _copy_body(out, body, "error_details")
        out["failed_actor"] = _str(item, "failed_actor", TASK_SK)


def _checkpoint(out: dict[str, Any], item: Mapping[str, Any], where: str) -> str | None:
    checkpoint = _str(item, "checkpoint_key", where)
    if checkpoint is not None:
        out["checkpoint_key"] = checkpoint
        line = _num(item, "checkpoint_line", where, integer=True)
        if line is not None:
            out["checkpoint_line"] = line
    return checkpoint


def _status_data(item: Mapping[str, Any], body: Mapping[str, Any], status: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": _str(item, "id", TASK_SK),
        "status": status,
        "progress_percent": _num(item, "progress_percent", TASK_SK) or 0.0,
        "current_actor": _str(item, "current_actor", TASK_SK),
        "step": _str(item, "step", TASK_SK),
        "message": _str(item, "message", TASK_SK),
    }
    data = _json(item, "data", TASK_SK)
    if data is not None and not isinstance(data, dict):
        raise TaskItemError(f"{TASK_SK}: attribute 'data' must be a JSON object, got {data!r}")
    for name, value in (data or {}).items():
        out.setdefault(name, value)
    _outcome(out, item, body, status)
    if status == "paused":
        _copy_body(out, body, "pause_metadata")
        out["remaining_seconds"] = _num(item, "remaining_seconds", TASK_SK, integer=True)
    _checkpoint(out, item, TASK_SK)
    out["timestamp"] = _str(item, "updated_at", TASK_SK)
    return out


def _child(child: Mapping[str, Any]) -> dict[str, Any]:
    where = str(_str(child, "sk", "CHILD"))
    _check(child, where, CHILD_STRINGS, CHILD_NUMBERS)
    done = _str(child, "done_by", where) is not None
    status = _str(child, "child_status", where) or ("finished" if done else "running")
    actor = _str(child, "actor", where)
    entry: dict[str, Any] = {
        "id": where[len(CHILD_PREFIX) :],
        "status": status,
        "current_actor": actor,
        "actor": actor,
        "hop": None if done else _num(child, "fence_h", where, integer=True),
        "attempt": _num(child, "attempt" if done else "fence_a", where, integer=True),
        "error": _str(child, "error", where),
    }
    _checkpoint(entry, child, where)
    return entry


def read_task(items: Sequence[Mapping[str, Any]], *, bucket: str | None = None) -> dict[str, Any] | None:
    """The task view release 1 shows for ``items`` (one task's items), ``None`` without a task item; raises
    :class:`TaskItemError`."""
    by_sk: dict[str, Mapping[str, Any]] = {}
    for item in items:
        sk = _str(item, "sk", "item")
        if sk is None:
            raise TaskItemError(f"an item without a sort key: {item!r}")
        by_sk[sk] = item
    item = by_sk.get(TASK_SK)
    if item is None:
        return None
    _check(item, TASK_SK, TASK_STRINGS, TASK_NUMBERS)
    status = _str(item, "status", TASK_SK) or "pending"
    if status not in STATUSES:
        raise TaskItemError(f"{TASK_SK}: status {status!r} is none of {', '.join(STATUSES)}")
    body = _decode(item, TASK_SK)
    for sk in (BODY_SK, RESULT_SK, PAUSE_SK):
        body.update(_decode(by_sk.get(sk), sk))
    view: dict[str, Any] = {
        "id": _str(item, "id", TASK_SK),
        "status": status,
        "created_at": _str(item, "created_at", TASK_SK),
        "updated_at": _str(item, "updated_at", TASK_SK),
        "flow": _str(item, "flow", TASK_SK),
        "actor": _str(item, "actor", TASK_SK),
        "current_actor": _str(item, "current_actor", TASK_SK),
        "step": _str(item, "step", TASK_SK),
        "progress_percent": _num(item, "progress_percent", TASK_SK) or 0.0,
        "message": _str(item, "message", TASK_SK),
        "deadline_at": _str(item, "deadline_at", TASK_SK),
        "last_event_id": _num(item, "last_seq", TASK_SK, integer=True) or 0,
    }
    if status == "paused":
        view["remaining_seconds"] = _num(item, "remaining_seconds", TASK_SK, integer=True)
        _copy_body(view, body, "pause_metadata")
    _copy_body(view, body, "payload")
    if "payload" not in view and "payload_url" not in view:
        view["payload"] = None
    _outcome(view, item, body, status)
    checkpoint = _checkpoint(view, item, TASK_SK)
    if checkpoint is not None and bucket:
        view["checkpoint_uri"] = f"s3://{bucket}/{checkpoint}"
    children = [_child(child) for sk, child in by_sk.items() if sk.startswith(CHILD_PREFIX)]
    if children:
        view["children"] = children
        for node in children:
            if "checkpoint_key" in node and bucket:
                node["checkpoint_uri"] = f"s3://{bucket}/{node['checkpoint_key']}"
    for name in ("context_id", "owner"):
        value = _str(item, name, TASK_SK)
        if value is not None:
            view[name] = value
    view["data"] = _status_data(item, body, status)
    return view
