"""A2A objects from mesh tasks and mesh payloads from A2A messages (GW-A2A-5, GW-A2A-9, GW-A2A-10): pure functions.

Shapes are A2A 0.3's (``kind`` discriminators). ``message_payload`` raises :class:`A2AParamsError` naming the bad
field of a malformed message.

Numbers (GW-A2A-5a): A2A clients built on protobuf carry a ``data`` part as a ``Struct``, whose numbers are all
doubles, so ``{"steps": 3}`` arrives as ``3.0``. JSON does not tell ``3`` from ``3.0`` (RFC 8259 section 6), and a
handler doing ``range(payload["steps"])`` must work, so an integral float of a data part (within +-2**53, where a
double is exact) becomes an ``int``. The result artifact leaves out the ``a2a`` member the gateway itself added to the
payload (GW-A2A-5): the client gave none, and its ids are the task's own.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any, Final

from asya.exceptions import AsyaError

__all__ = [
    "STATES",
    "A2AParamsError",
    "a2a_state",
    "artifact_update",
    "fly_artifact",
    "message_payload",
    "result_artifact",
    "status_update",
    "task_object",
]

#: GW-A2A-9.
STATES: Final = {
    "pending": "submitted",
    "running": "working",
    "paused": "input-required",
    "succeeded": "completed",
    "failed": "failed",
    "canceled": "canceled",
}


class A2AParamsError(AsyaError, ValueError):
    """A malformed ``params`` member (-32602)."""


#: The largest magnitude up to which every integer is exactly a double.
_EXACT: Final = 2**53


def a2a_state(status: str | None) -> str:
    return STATES.get(status or "pending", "working")


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def message_payload(message: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """GW-A2A-5: ``(payload without a2a, history entry)`` of a user message."""
    if not isinstance(message, dict):
        raise A2AParamsError("params.message must be an object")
    parts = message.get("parts")
    if not isinstance(parts, list) or not parts:
        raise A2AParamsError("params.message.parts must be a non-empty list")
    texts: list[str] = []
    datas: list[dict[str, Any]] = []
    files: list[dict[str, Any]] = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise A2AParamsError(f"params.message.parts[{index}] must be an object")
        kind = part.get("kind")
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "data" and isinstance(part.get("data"), dict):
            datas.append(_integral(part["data"]))
        elif kind == "file" and isinstance(part.get("file"), dict):
            file = part["file"]
            entry = {"name": file.get("name"), "mime_type": file.get("mimeType")}
            entry.update({k: file[k] for k in ("uri", "bytes") if k in file})
            files.append(entry)
        else:
            raise A2AParamsError(
                f"params.message.parts[{index}]: expected a text, data or file part, got kind {kind!r}"
            )
    payload: dict[str, Any]
    if len(datas) == 1 and not texts:
        payload = dict(datas[0])
    else:
        payload = {}
        for data in datas:
            payload.update(data)
        payload["query"] = "\n".join(texts)
    if files:
        payload["files"] = files
    history: dict[str, Any] = {"id": message.get("messageId"), "role": "user"}
    if texts:
        history["text"] = "\n".join(texts)
    if datas:
        history["data"] = datas[0] if len(datas) == 1 else datas
    return payload, history


def _integral(value: Any) -> Any:
    """``value`` with each integral float within +-2**53 made an ``int`` (GW-A2A-5a)."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= _EXACT:
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def _agent_message(task_id: str, context_id: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "kind": "message",
        "role": "agent",
        "messageId": str(uuid.uuid4()),
        "taskId": task_id,
        "contextId": context_id,
        "parts": parts,
    }


def _status(task_id: str, context_id: str, data: Mapping[str, Any]) -> dict[str, Any]:
    state = a2a_state(data.get("status"))
    status: dict[str, Any] = {"state": state, "timestamp": data.get("timestamp")}
    if state == "working":
        label = ": ".join(str(data[k]) for k in ("current_actor", "step") if data.get(k))
        if label:
            status["message"] = _agent_message(task_id, context_id, [{"kind": "text", "text": label}])
    elif state == "failed":
        text = str(data.get("error") or "task failed")
        status["message"] = _agent_message(task_id, context_id, [{"kind": "text", "text": text}])
    elif state == "input-required":
        pause = data.get("pause_metadata")
        pause = pause if isinstance(pause, dict) else {}
        parts: list[dict[str, Any]] = [
            {"kind": "text", "text": str(pause.get("prompt") or "")},
            {"kind": "data", "data": {"fields": pause.get("fields") or []}},
        ]
        status["message"] = _agent_message(task_id, context_id, parts)
    return status


def result_artifact(data: Mapping[str, Any]) -> dict[str, Any]:
    if "result_url" in data:
        parts: list[dict[str, Any]] = [{"kind": "text", "text": _compact({"result_url": data["result_url"]})}]
    else:
        value = data.get("result")
        if isinstance(value, dict) and "a2a" in value:
            value = {key: item for key, item in value.items() if key != "a2a"}
        parts = [{"kind": "text", "text": _compact(value)}]
        if isinstance(value, dict):
            parts.append({"kind": "data", "data": value})
    return {"artifactId": "result", "name": "Task result", "parts": parts}


def task_object(task_id: str, context_id: str, data: Mapping[str, Any], *, flow: str | None) -> dict[str, Any]:
    """GW-A2A-10 from the task's status data (GW-TASK-2)."""
    task: dict[str, Any] = {
        "kind": "task",
        "id": task_id,
        "contextId": context_id,
        "status": _status(task_id, context_id, data),
        "metadata": {
            "asya": {
                "flow": flow,
                "progress_percent": data.get("progress_percent", 0.0),
                "current_actor": data.get("current_actor"),
            }
        },
    }
    if data.get("status") == "succeeded":
        task["artifacts"] = [result_artifact(data)]
    return task


def status_update(task_id: str, context_id: str, data: Mapping[str, Any], *, final: bool) -> dict[str, Any]:
    return {
        "kind": "status-update",
        "taskId": task_id,
        "contextId": context_id,
        "status": _status(task_id, context_id, data),
        "final": final,
    }


def artifact_update(
    task_id: str, context_id: str, artifact: dict[str, Any], *, append: bool, last_chunk: bool
) -> dict[str, Any]:
    return {
        "kind": "artifact-update",
        "taskId": task_id,
        "contextId": context_id,
        "artifact": artifact,
        "append": append,
        "lastChunk": last_chunk,
    }


def fly_artifact(value: Any) -> dict[str, Any]:
    text = value if isinstance(value, str) else _compact(value)
    return {"artifactId": "fly-stream", "parts": [{"kind": "text", "text": text}]}
