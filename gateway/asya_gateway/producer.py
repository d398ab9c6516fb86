"""Bodies of ``POST /api/v1/mesh/{id}/events`` (GW-EVT-1 .. GW-EVT-4) turned into store updates: pure, no I/O.

The route is a reporter's (GW-EVT-1, authenticated by ``asya_gateway.auth``): ``{"type": "status", "status": s,
"data"?: object}`` takes ``s`` in ``received``/``processing``/``completed``/``retrying``/``running`` only;
``paused``, ``succeeded``, ``failed`` and ``canceled`` answer 400 ``status '<s>' is written by the crew only``
(GW-EVT-3: x-pause, x-sink and x-sump write them). The four steps become ``running`` with that step; progress comes
from ``data.prev``/``data.next`` (P-STAT-8) for the first three steps, else from ``data.progress_percent``, else it is
unchanged; ``data.curr`` becomes ``current_actor``. An event whose ``data.prev`` is an array of names is for hop
``len(prev) + 1`` (the fence numbering of P-ACK-8): it applies only while the task item's fence is at that hop or
before, and is stale once a later hop claimed (GW-EVT-3). Of the other members of ``data`` only the
status-data extras of GW-TASK-2 are kept (the task item stays small, GW-DATA-8); ``data.message`` (a string) is the
event's message. Bounds (``asya.store.limits``, GW-DATA-8): a longer ``data.message`` (128 bytes) or ``data.error``
(256 bytes) is cut with an ellipsis; a longer ``data.curr`` or ``data.failed_actor`` (256 characters), or extras over
384 bytes as JSON, is a 400 naming it.
``data`` that is a storage reference (``{"__ref__": ...}``) is 400 (GW-REF-1).
``{"type": "fly", "data"?: any}`` is one FLY value with ``actor`` null and ``envelope_id`` = the task id. Malformed
input raises :class:`~asya_gateway.errors.HttpError` 400 naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, TypeGuard

from asya.envelope import dumps
from asya.progress import hop_progress
from asya.store import FlyValue, StatusUpdate, StatusUpdateError
from asya_gateway.errors import HttpError
from asya_gateway.requestmodels import ProducerEvent, parse_body

__all__ = ["parse_producer_event"]

_STEPS: Final = ("received", "processing", "completed", "retrying")
#: Members of the status data object a producer may add (GW-TASK-2).
_EXTRAS: Final = ("prev", "curr", "next", "message_size_kb", "duration_ms", "frames", "attempt", "delay_seconds")
#: Where each size-limited field of a status update comes from in the body (``asya.store.limits``).
_SIZED_FIELDS: Final = {
    "message": "data.message",
    "error": "data.error",
    "failed_actor": "data.failed_actor",
    "actor": "data.curr",
    "data": f"data ({', '.join(_EXTRAS)})",
}


def parse_producer_event(body: Mapping[str, Any], task_id: str) -> StatusUpdate | FlyValue:
    event = parse_body(ProducerEvent, body)
    if event.type == "fly":
        return FlyValue(payload=event.data, actor=None, envelope_id=task_id)
    assert event.status is not None  # the model refuses a status event without one
    try:
        return _status_update(event.status, {} if event.data is None else event.data, task_id)
    except StatusUpdateError as exc:
        if exc.field in _SIZED_FIELDS:
            raise HttpError(400, f"{_SIZED_FIELDS[exc.field]}: {exc.detail}") from None
        raise HttpError(400, f"data: {exc}") from None


def _status_update(status: str, data: Mapping[str, Any], task_id: str) -> StatusUpdate:
    message = data.get("message")
    if message is not None and not isinstance(message, str):
        raise HttpError(400, f"data.message must be a string, got {dumps(message)}")
    extras = {key: data[key] for key in _EXTRAS if key in data}
    step = status if status in _STEPS else None
    curr = data.get("curr")
    prev = data.get("prev")
    return StatusUpdate(
        status="running",
        step=step,
        actor=curr if isinstance(curr, str) and curr else None,
        progress=_progress(step, data),
        message=message,
        data=extras,
        envelope_id=task_id,
        # the fence numbering of P-ACK-8: hop h = len(route.prev) + 1
        if_fence_at_most=len(prev) + 1 if _str_list(prev) else None,
    )


def _progress(step: str | None, data: Mapping[str, Any]) -> float | None:
    prev, nxt = data.get("prev"), data.get("next")
    if step in ("received", "processing", "completed") and _str_list(prev) and _str_list(nxt):
        return hop_progress(step, prev, nxt)
    value = data.get("progress_percent")
    if value is None:
        return None
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not (0 <= value <= 100)
    ):
        raise HttpError(400, f"data.progress_percent must be a number between 0 and 100, got {dumps(value)}")
    return float(value)


def _str_list(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
