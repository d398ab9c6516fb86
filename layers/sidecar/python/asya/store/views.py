"""What clients see of a task: the task view (GW-TASK-1), the status data object (GW-TASK-2) and the list
summary (GW-LIST-2), rebuilt from the task item and the values of its body, result and pause items.

The task item stores only the small extra members of the last status change's data (``data``); the rest of the status
data object is rebuilt from the item's fields and the large values, so no value is stored twice (GW-DATA-6,
GW-DATA-8). Large values arrive already in client form: ``{field: value}`` inline, or ``{field}_url`` /
``{field}_s3`` when held in S3.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from asya.store import records as rec
from asya.store.transition import StoredState

__all__ = ["child_entry", "fence_of", "status_data", "stored_state", "summary", "task_view"]

_BODY_FORMS: Final = ("", "_url", "_s3")


def stored_state(item: Mapping[str, Any]) -> StoredState:
    return StoredState(
        status=rec.get_str(item, "status") or "pending",
        created_at=rec.get_str(item, "created_at") or "",
        last_seq=rec.get_int(item, "last_seq") or 0,
        progress=rec.get_num(item, "progress_percent") or 0.0,
        current_actor=rec.get_str(item, "current_actor"),
        step=rec.get_str(item, "step"),
        checkpoint_key=rec.get_str(item, "checkpoint_key"),
        deadline_at=rec.get_str(item, "deadline_at"),
        fence=fence_of(item),
        lease_until=rec.get_int(item, "lease_until") or 0,
        terminal_by=rec.get_str(item, "terminal_by"),
    )


def fence_of(item: Mapping[str, Any]) -> tuple[int, int] | None:
    """The hop fence ``(h, a)`` stored on a task or child item (P-ACK-8), ``None`` when none is."""
    hop, attempt = rec.get_int(item, "fence_h"), rec.get_int(item, "fence_a")
    return None if hop is None or attempt is None else (hop, attempt)


def _checkpoint(out: dict[str, Any], item: Mapping[str, Any]) -> str | None:
    checkpoint = _copy_str(out, item, "checkpoint_key")
    if checkpoint is not None:
        line = rec.get_int(item, "checkpoint_line")
        if line is not None:
            out["checkpoint_line"] = line
    return checkpoint


def _copy_str(out: dict[str, Any], item: Mapping[str, Any], name: str) -> str | None:
    """Copy the string attribute ``name`` into ``out`` when the item has it (absent, not null, when it does not)."""
    value = rec.get_str(item, name)
    if value is not None:
        out[name] = value
    return value


def _copy_body(out: dict[str, Any], body: Mapping[str, Any], field: str) -> None:
    for suffix in _BODY_FORMS:
        if field + suffix in body:
            out[field + suffix] = body[field + suffix]
            return


def status_data(item: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """The status data object of the task's last accepted status event (GW-TASK-2)."""
    status = rec.get_str(item, "status") or "pending"
    out: dict[str, Any] = {
        "id": rec.get_str(item, "id"),
        "status": status,
        "progress_percent": rec.get_num(item, "progress_percent") or 0.0,
        "current_actor": rec.get_str(item, "current_actor"),
        "step": rec.get_str(item, "step"),
        "message": rec.get_str(item, "message"),
    }
    for name, value in rec.get_json(item, "data", {}).items():
        out.setdefault(name, value)
    _outcome(out, item, body, status)
    if status == "paused":
        _copy_body(out, body, "pause_metadata")
        out["remaining_seconds"] = rec.get_int(item, "remaining_seconds")
    _checkpoint(out, item)
    out["timestamp"] = rec.get_str(item, "updated_at")
    return out


def _outcome(out: dict[str, Any], item: Mapping[str, Any], body: Mapping[str, Any], status: str) -> None:
    """A terminal outcome's fields, the same in the task view and the status data: ``result`` of a succeeded task;
    ``error`` (``"task failed"`` when none was stored), ``error_details`` and ``failed_actor`` of a failed one."""
    if status == "succeeded":
        _copy_body(out, body, "result")
    elif status == "failed":
        out["error"] = rec.get_str(item, "error") or "task failed"
        out["error_details"] = None
        _copy_body(out, body, "error_details")
        out["failed_actor"] = rec.get_str(item, "failed_actor")


def task_view(
    item: Mapping[str, Any],
    body: Mapping[str, Any],
    *,
    bucket: str | None,
    children: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The task view (GW-TASK-1); ``body`` holds the decoded values of the body, result and pause items, ``children``
    the task's child fence items (listed as ``children``, issue: children in the parent's view)."""
    status = rec.get_str(item, "status") or "pending"
    view: dict[str, Any] = {
        "id": rec.get_str(item, "id"),
        "status": status,
        "created_at": rec.get_str(item, "created_at"),
        "updated_at": rec.get_str(item, "updated_at"),
        "flow": rec.get_str(item, "flow"),
        "actor": rec.get_str(item, "actor"),
        "current_actor": rec.get_str(item, "current_actor"),
        "step": rec.get_str(item, "step"),
        "progress_percent": rec.get_num(item, "progress_percent") or 0.0,
        "message": rec.get_str(item, "message"),
        "deadline_at": rec.get_str(item, "deadline_at"),
        "last_event_id": rec.get_int(item, "last_seq") or 0,
    }
    timed_out = rec.get_str(item, "pause_timed_out_at")
    if timed_out is not None and status != "paused":  # P-WAIT-2: why a resume of that pause is refused
        view["pause_timed_out_at"] = timed_out
    if status == "paused":
        view["remaining_seconds"] = rec.get_int(item, "remaining_seconds")
        _copy_body(view, body, "pause_metadata")
        # absent, not null, while x-pause has not stored its file (it writes the status first): a reader tells
        # "not stored yet" from a state of null (GW-TASK-10)
        _copy_body(view, body, "paused_state")
    _copy_body(view, body, "payload")
    if "payload" not in view and "payload_url" not in view:
        view["payload"] = None
    _outcome(view, item, body, status)
    checkpoint = _checkpoint(view, item)
    if checkpoint is not None and bucket:
        view["checkpoint_uri"] = f"s3://{bucket}/{checkpoint}"
    if children:
        view["children"] = [child_entry(child) for child in children]
        for node in view["children"]:
            if "checkpoint_key" in node and bucket:
                node["checkpoint_uri"] = f"s3://{bucket}/{node['checkpoint_key']}"
    _copy_str(view, item, "context_id")
    _copy_str(view, item, "owner")
    view["data"] = status_data(item, body)
    return view


def child_entry(child: Mapping[str, Any]) -> dict[str, Any]:
    """One node of the task's child tree (P-FAN-7), from its child item: ``id``; ``status`` (``running``,
    ``retrying``, ``succeeded``, ``failed``, ``canceled``; ``finished`` for an item finished before the tree was
    recorded);
    ``current_actor`` (the actor of its last claim, or where it ended); ``attempt`` (of its current or last hop, or
    the one it ended with);
    ``hop``; ``error`` (its last handler error, or ``null``); once finished at x-sink, ``checkpoint_key`` and
    ``checkpoint_line`` of its checkpoint (P-FAN-9). ``actor`` repeats ``current_actor`` for older readers."""
    done = rec.get_str(child, "done_by") is not None
    status = rec.get_str(child, "child_status") or ("finished" if done else "running")
    hop = rec.get_int(child, "fence_h")
    attempt = rec.get_int(child, "fence_a")
    actor = rec.get_str(child, "actor")
    entry: dict[str, Any] = {
        "id": (rec.get_str(child, "sk") or "")[len(rec.CHILD_PREFIX) :],
        "status": status,
        "current_actor": actor,
        "actor": actor,
        # a finished child's fence is raised above every hop (P-ACK-7): its hop is no longer known
        "hop": None if done else hop,
        "attempt": rec.get_int(child, "attempt") if done else attempt,
        "error": rec.get_str(child, "error"),
    }
    _checkpoint(entry, child)
    return entry


def summary(item: Mapping[str, Any]) -> dict[str, Any]:
    """One entry of the task list (GW-LIST-2)."""
    status = rec.get_str(item, "status") or "pending"
    out: dict[str, Any] = {
        "id": rec.get_str(item, "id"),
        "status": status,
        "flow": rec.get_str(item, "flow"),
        "actor": rec.get_str(item, "actor"),
        "created_at": rec.get_str(item, "created_at"),
        "updated_at": rec.get_str(item, "updated_at"),
        "progress_percent": rec.get_num(item, "progress_percent") or 0.0,
        "current_actor": rec.get_str(item, "current_actor"),
        "deadline_at": rec.get_str(item, "deadline_at"),
    }
    if status == "failed":
        out["error"] = rec.get_str(item, "error") or "task failed"
    return out
