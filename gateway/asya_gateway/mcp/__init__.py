"""MCP over Streamable HTTP at ``/mcp`` (GW-MCP-1..9): see ``asya_gateway.mcp.endpoint``."""

from __future__ import annotations

from asya_gateway.mcp.cancel import call_task_id
from asya_gateway.mcp.endpoint import LOG_LEVELS, mcp_endpoint
from asya_gateway.mcp.tools import list_tools, mcp_flows
from asya_gateway.mcp.versions import HANDSHAKE_VERSIONS, MODERN_VERSIONS, PROTOCOL_VERSIONS

__all__ = [
    "HANDSHAKE_VERSIONS",
    "LOG_LEVELS",
    "MODERN_VERSIONS",
    "PROTOCOL_VERSIONS",
    "call_task_id",
    "list_tools",
    "mcp_endpoint",
    "mcp_flows",
]
