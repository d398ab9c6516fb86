"""MCP tools: the flows with ``mcp: true`` (GW-MCP-5) and the mapping of a task's outcome to a tool result
(GW-MCP-7). Pure functions, no I/O.

Every result carries ``_meta: {"asya/task_id": <id>}``. A succeeded task's result is the text content (the result
itself when it is a string, else compact JSON) plus ``structuredContent`` when it is an object; a result too large to
be inline (``result_url``, GW-DATA-6) is given as that URL in the text and under ``_meta["asya/result_url"]``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from asya.manifest import Manifest

__all__ = ["SIGNAL_TOOL", "TASK_ID_META", "list_tools", "mcp_flows", "signals_events", "text_result", "tool_result"]

TASK_ID_META: Final = "asya/task_id"
#: GW-SIGNAL-1: the tool that delivers a signal; a flow name never holds a ``.``, so it names no flow.
SIGNAL_TOOL: Final = "asya.signal"
_SIGNAL_SCHEMA: Final = {
    "type": "object",
    "required": ["task_id", "event"],
    "properties": {
        "task_id": {"type": "string"},
        "event": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"},
        "data": {"description": "any JSON; set at the wait_for's path"},
    },
}


def mcp_flows(manifest: Manifest) -> list[str]:
    return sorted(name for name, flow in manifest.flows.items() if flow.mcp)


def list_tools(manifest: Manifest) -> list[dict[str, Any]]:
    """GW-MCP-5: one tool per MCP flow, sorted by name; and :data:`SIGNAL_TOOL` when an MCP flow waits for an event
    (GW-SIGNAL-1)."""
    tools = []
    for name in mcp_flows(manifest):
        flow = manifest.flows[name]
        schema = flow.input_schema if flow.input_schema is not None else {"type": "object"}
        tools.append({"name": name, "description": flow.description, "inputSchema": dict(schema)})
    if signals_events(manifest):
        description = "Deliver a named event (and its data) to a task waiting for it in a flow's wait_for"
        tools.append({"name": SIGNAL_TOOL, "description": description, "inputSchema": dict(_SIGNAL_SCHEMA)})
    return tools


def signals_events(manifest: Manifest) -> bool:
    """Whether an MCP flow of ``manifest`` waits for an event (``wait_for``, P-WAIT-4)."""
    for name in mcp_flows(manifest):
        program = manifest.flows[name].program
        if program is not None and any(ins["op"] == "pause" and "event" in ins for ins in program.code):
            return True
    return False


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def text_result(text: str, *, is_error: bool, task_id: str | None = None) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if task_id is not None:
        result["_meta"] = {TASK_ID_META: task_id}
    return result


def tool_result(task_id: str, status: Mapping[str, Any]) -> dict[str, Any]:
    """GW-MCP-7 from the task's last status data (GW-TASK-2)."""
    state = status.get("status")
    if state == "succeeded":
        if "result_url" in status:
            result = text_result(f"result: {status['result_url']}", is_error=False, task_id=task_id)
            result["_meta"]["asya/result_url"] = status["result_url"]
            return result
        value = status.get("result")
        result = text_result(value if isinstance(value, str) else _compact(value), is_error=False, task_id=task_id)
        if isinstance(value, dict):
            result["structuredContent"] = value
        return result
    if state == "failed":
        return text_result(str(status.get("error") or "task failed"), is_error=True, task_id=task_id)
    if state == "canceled":
        return text_result("task was canceled", is_error=True, task_id=task_id)
    if state == "paused":
        pause = status.get("pause_metadata")
        pause = pause if isinstance(pause, dict) else {}
        body = {"status": "paused", "task_id": task_id, "prompt": pause.get("prompt"), "fields": pause.get("fields")}
        return text_result(_compact(body), is_error=False, task_id=task_id)
    return text_result(f"timeout: no result received (task {task_id} is {state})", is_error=True, task_id=task_id)
