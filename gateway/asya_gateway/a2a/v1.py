"""A2A 1.0 over JSON-RPC, the protocol the ``a2a-sdk`` 1.x client speaks, mapped onto the 0.3 objects the gateway
builds (``asya_gateway.a2a.mapping``): pure functions.

Methods (1.0 name -> the spec's 0.3 name): ``SendMessage`` -> ``message/send``, ``SendStreamingMessage`` ->
``message/stream``, ``GetTask`` -> ``tasks/get``, ``CancelTask`` -> ``tasks/cancel``, ``SubscribeToTask`` ->
``tasks/resubscribe``; the push notification config methods answer -32003 like 0.3's. Wire shapes are ProtoJSON:
no ``kind`` members, a part is ``{"text"}``, ``{"data"}``, ``{"url"|"raw", "filename", "mediaType"}``; roles are
``ROLE_USER``/``ROLE_AGENT``; states ``TASK_STATE_*``; a send answers ``{"task": ...}``; a stream event is
``{"task"}``, ``{"statusUpdate"}`` (no ``final``: the stream ends after the final state) or ``{"artifactUpdate"}``;
``configuration.returnImmediately`` is 0.3's ``blocking: false``. Errors keep their codes (the same in both).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["METHODS", "PUSH_METHODS", "message_from_v1", "stream_response", "task_to_v1"]

METHODS: Final = {
    "SendMessage": "message/send",
    "SendStreamingMessage": "message/stream",
    "GetTask": "tasks/get",
    "CancelTask": "tasks/cancel",
    "SubscribeToTask": "tasks/resubscribe",
}
PUSH_METHODS: Final = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)
_ROLES: Final = {"ROLE_USER": "user", "ROLE_AGENT": "agent"}


def _state(state: str) -> str:
    return "TASK_STATE_" + state.replace("-", "_").upper()


def _part_to_v1(part: Mapping[str, Any]) -> dict[str, Any]:
    kind = part.get("kind")
    if kind == "text":
        return {"text": part.get("text", "")}
    if kind == "data":
        return {"data": part.get("data")}
    raw_file = part.get("file")
    file: Mapping[str, Any] = raw_file if isinstance(raw_file, dict) else {}
    out: dict[str, Any] = {}
    if "uri" in file:
        out["url"] = file["uri"]
    if "bytes" in file:
        out["raw"] = file["bytes"]
    if file.get("name"):
        out["filename"] = file["name"]
    if file.get("mimeType"):
        out["mediaType"] = file["mimeType"]
    return out


def _message_to_v1(message: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "messageId": message["messageId"],
        "taskId": message["taskId"],
        "contextId": message["contextId"],
        "role": "ROLE_AGENT" if message.get("role") == "agent" else "ROLE_USER",
        "parts": [_part_to_v1(part) for part in message.get("parts", [])],
    }


def _status_to_v1(status: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"state": _state(str(status["state"]))}
    if status.get("message"):
        out["message"] = _message_to_v1(status["message"])
    if status.get("timestamp"):
        out["timestamp"] = status["timestamp"]
    return out


def _artifact_to_v1(artifact: Mapping[str, Any]) -> dict[str, Any]:
    out = {"artifactId": artifact["artifactId"], "parts": [_part_to_v1(p) for p in artifact.get("parts", [])]}
    if artifact.get("name"):
        out["name"] = artifact["name"]
    return out


def task_to_v1(task: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": task["id"],
        "contextId": task["contextId"],
        "status": _status_to_v1(task["status"]),
        "metadata": task.get("metadata", {}),
    }
    if task.get("artifacts"):
        out["artifacts"] = [_artifact_to_v1(a) for a in task["artifacts"]]
    return out


def stream_response(event: Mapping[str, Any]) -> dict[str, Any]:
    """A 0.3 stream event (``task``, ``status-update``, ``artifact-update``) as a 1.0 ``StreamResponse``."""
    kind = event.get("kind")
    if kind == "task":
        return {"task": task_to_v1(event)}
    if kind == "status-update":
        return {
            "statusUpdate": {
                "taskId": event["taskId"],
                "contextId": event["contextId"],
                "status": _status_to_v1(event["status"]),
            }
        }
    return {
        "artifactUpdate": {
            "taskId": event["taskId"],
            "contextId": event["contextId"],
            "artifact": _artifact_to_v1(event["artifact"]),
            "append": event["append"],
            "lastChunk": event["lastChunk"],
        }
    }


def _part_from_v1(part: Any) -> Any:
    if not isinstance(part, dict) or "kind" in part:
        return part
    if "text" in part:
        return {"kind": "text", "text": part["text"]}
    if "data" in part:
        return {"kind": "data", "data": part["data"]}
    if "url" in part or "raw" in part:
        file: dict[str, Any] = {"name": part.get("filename"), "mimeType": part.get("mediaType")}
        if "url" in part:
            file["uri"] = part["url"]
        if "raw" in part:
            file["bytes"] = part["raw"]
        return {"kind": "file", "file": file}
    return part


def message_from_v1(message: Any) -> Any:
    """A 1.0 ``Message`` in the 0.3 shape :func:`asya_gateway.a2a.mapping.message_payload` reads; anything that is
    not an object is returned as it is (the 0.3 checks name the bad field)."""
    if not isinstance(message, dict):
        return message
    out = dict(message)
    out["role"] = _ROLES.get(str(message.get("role")), message.get("role"))
    parts = message.get("parts")
    if isinstance(parts, list):
        out["parts"] = [_part_from_v1(part) for part in parts]
    return out
