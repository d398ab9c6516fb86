"""A small synchronous MCP client for the CLI (``asya mcp``): Streamable HTTP against the gateway's ``/mcp``
(GW-MCP-1..9), one session per :class:`McpClient`.

``initialize`` (protocol ``2025-11-25``) then ``notifications/initialized``; every later request carries
``Mcp-Session-Id`` and ``MCP-Protocol-Version``; ``close()`` ends the session with ``DELETE /mcp``.
``call_tool`` asks for an SSE answer with a progress token and hands each ``notifications/progress`` and
``notifications/message`` to the callbacks as they arrive, then returns the result. A JSON-RPC error raises
:class:`McpError` (code and message); HTTP errors raise :class:`~asya_local.exceptions.GatewayHttpError` with the
gateway's message (the JSON-RPC error's, or ``{"error"}``'s for auth).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Final

import httpx

from asya.exceptions import AsyaError
from asya_local.exceptions import GatewayHttpError
from asya_local.sse import error_message, parse_lines, unreachable

__all__ = ["PROTOCOL_VERSION", "McpClient", "McpError"]

PROTOCOL_VERSION: Final = "2025-11-25"
#: The gateway ends a call by 840 s (GW-MCP-8); the read timeout leaves room for the answer.
_READ_TIMEOUT: Final = 900.0


class McpError(AsyaError):
    """A JSON-RPC error answered by the MCP endpoint."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"MCP error {code}: {message}")
        self.code = code
        self.message = message


class McpClient:
    def __init__(self, url: str, *, auth: httpx.Auth | None = None, http: httpx.Client | None = None) -> None:
        self.url = url.rstrip("/")
        self._http = http or httpx.Client(auth=auth, timeout=httpx.Timeout(30.0, read=_READ_TIMEOUT))
        self._session: str | None = None
        self._next_id = 0

    def __enter__(self) -> McpClient:
        try:
            self.initialize()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            if self._session is not None:
                self._http.delete(f"{self.url}/mcp", headers=self._headers())
        except httpx.TransportError:
            pass  # the session expires on its own (24 h)
        finally:
            self._session = None
            self._http.close()

    def _headers(self, *, stream: bool = False) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream" if stream else "application/json"}
        if self._session is not None:
            headers["Mcp-Session-Id"] = self._session
            headers["MCP-Protocol-Version"] = PROTOCOL_VERSION
        return headers

    def _body(self, method: str, params: Mapping[str, Any] | None) -> dict[str, Any]:
        self._next_id += 1
        return {"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": dict(params or {})}

    def _post(self, body: Mapping[str, Any], *, stream: bool = False) -> httpx.Response:
        url = f"{self.url}/mcp"
        try:
            request = self._http.build_request("POST", url, json=dict(body), headers=self._headers(stream=stream))
            response = self._http.send(request, stream=stream)
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from exc
        if response.status_code >= 400:
            response.read()
            raise GatewayHttpError(response.status_code, _rpc_error_text(response), url)
        return response

    def initialize(self) -> dict[str, Any]:
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "asya-cli", "version": "1"},
        }
        response = self._post(self._body("initialize", params))
        result = _result(response.json())
        self._session = response.headers.get("mcp-session-id")
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return _result(self._post(self._body(method, params)).json())

    def list_tools(self) -> list[dict[str, Any]]:
        tools = self.request("tools/list").get("tools")
        return list(tools) if isinstance(tools, list) else []

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any],
        *,
        on_progress: Callable[[Mapping[str, Any]], None] | None = None,
        on_message: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> dict[str, Any]:
        params = {"name": name, "arguments": dict(arguments), "_meta": {"progressToken": str(uuid.uuid4())}}
        response = self._post(self._body("tools/call", params), stream=True)
        try:
            if not response.headers.get("content-type", "").startswith("text/event-stream"):
                response.read()
                return _result(response.json())
            for event in parse_lines(response.iter_lines()):
                message = json.loads(event.data)
                method = message.get("method") if isinstance(message, dict) else None
                if method == "notifications/progress" and on_progress is not None:
                    on_progress(message.get("params") or {})
                elif method == "notifications/message" and on_message is not None:
                    on_message(message.get("params") or {})
                elif method is None:
                    return _result(message)
        finally:
            response.close()
        raise McpError(-32603, "the stream ended without a result (the gateway's 840 s limit, or a dropped connection)")


def _result(body: Any) -> dict[str, Any]:
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        raise McpError(int(error.get("code", -32603)), str(error.get("message", "")))
    result = body.get("result") if isinstance(body, dict) else None
    if not isinstance(result, dict):
        raise McpError(-32603, "the answer carries no result object")
    return result


def _rpc_error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return error_message(response)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("message", ""))
    return error_message(response)
