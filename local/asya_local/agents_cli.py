"""``asya mcp`` and ``asya a2a``: the agent protocol commands of the CLI (GW-MCP-1..9, GW-A2A-1..14).

::

    asya mcp list                                 the MCP tools (name and description; --json for the raw list)
    asya mcp call TOOL [--args '{...}']           call a tool: progress bar and FLY text on stderr, result on stdout
    asya a2a card                                 the agent card, pretty JSON

``--url`` and authentication are those of ``asya call`` (env ``ASYA_URL``, ``ASYA_API_KEY``, IAM signing for
``execute-api`` URLs). ``mcp call`` prints the tool result's ``structuredContent`` when it has one, else its text;
exit code 0 when the result is not an error, 1 when it is (a failed, canceled or timed-out task, invalid arguments),
2 for protocol and HTTP errors (an unknown tool: the gateway's -32602 message).
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from asya_local.auth import gateway_auth
from asya_local.client import GatewayClient
from asya_local.mcp_client import McpClient, McpError
from asya_local.progress import ProgressView
from asya_local.sse import SseEvent

if TYPE_CHECKING:
    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["add_agent_parsers"]


class _Io(Protocol):
    out: TextIO
    err: TextIO

    def print_json(self, value: Any) -> None: ...

    def error(self, message: str) -> None: ...


def add_agent_parsers(commands: _Commands, *, remote: argparse.ArgumentParser) -> None:
    """Add ``mcp`` and ``a2a`` to the CLI's sub-commands; ``remote`` holds the shared ``--url`` option."""
    mcp = commands.add_parser("mcp", help="list and call the gateway's MCP tools")
    actions = mcp.add_subparsers(dest="mcp_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[remote], help="the MCP tools of the gateway")
    listing.add_argument("--json", action="store_true", help="print the tools/list answer as JSON")
    listing.set_defaults(run=_mcp_list)
    call = actions.add_parser("call", parents=[remote], help="call a tool, show progress and partial output")
    call.add_argument("tool", help="tool (flow) name")
    call.add_argument("--args", type=_json_object, default={}, help="the arguments as a JSON object (default {})")
    call.set_defaults(run=_mcp_call)

    a2a = commands.add_parser("a2a", help="the gateway's A2A agent")
    a2a_actions = a2a.add_subparsers(dest="a2a_command", required=True, metavar="ACTION")
    card = a2a_actions.add_parser("card", parents=[remote], help="print the agent card")
    card.set_defaults(run=_a2a_card)


def _json_object(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON {raw!r}: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"must be a JSON object, got {raw!r}")
    return value


def _client(args: argparse.Namespace) -> McpClient:
    return McpClient(args.url, auth=gateway_auth(args.url, args.env))


def _mcp_list(args: argparse.Namespace, io: _Io) -> int:
    try:
        with _client(args) as client:
            tools = client.list_tools()
    except McpError as exc:
        io.error(str(exc))
        return 2
    if args.json:
        io.print_json(tools)
        return 0
    width = max((len(str(tool.get("name"))) for tool in tools), default=0)
    for tool in tools:
        io.out.write(f"{str(tool.get('name')).ljust(width)}  {tool.get('description') or ''}".rstrip() + "\n")
    io.out.flush()
    return 0


def _mcp_call(args: argparse.Namespace, io: _Io) -> int:
    view = ProgressView(io.err, tty=io.err.isatty(), columns=shutil.get_terminal_size((100, 24)).columns)
    try:
        with _client(args) as client:
            result = client.call_tool(
                args.tool,
                args.args,
                on_progress=lambda params: view.on_event(_progress_event(params)),
                on_message=lambda params: view.on_event(_fly_event(params)),
            )
    except McpError as exc:
        io.error(exc.message)
        return 2
    finally:
        view.finish()
    if "structuredContent" in result:
        io.print_json(result["structuredContent"])
    else:
        for item in result.get("content") or []:
            if isinstance(item, dict) and item.get("type") == "text":
                io.out.write(str(item.get("text")) + "\n")
    meta = result.get("_meta")
    if isinstance(meta, dict) and meta.get("asya/task_id"):
        io.err.write(f"task: {meta['asya/task_id']}\n")
    io.out.flush()
    return 1 if result.get("isError") else 0


def _progress_event(params: Mapping[str, Any]) -> SseEvent:
    """A ``notifications/progress`` as the ``status`` event the progress bar draws (``message`` is
    ``<current_actor>: <step>``, GW-MCP-9)."""
    actor, _, step = str(params.get("message") or "").partition(": ")
    data = {"status": "running", "progress_percent": params.get("progress"), "current_actor": actor, "step": step}
    return SseEvent(event="status", data=json.dumps(data))


def _fly_event(params: Mapping[str, Any]) -> SseEvent:
    data = params.get("data")
    payload = data.get("payload") if isinstance(data, dict) else data
    return SseEvent(event="fly", data=json.dumps({"payload": payload}))


def _a2a_card(args: argparse.Namespace, io: _Io) -> int:
    with GatewayClient(args.url, auth=gateway_auth(args.url, args.env)) as client:
        io.print_json(client.agent_card())
    return 0
