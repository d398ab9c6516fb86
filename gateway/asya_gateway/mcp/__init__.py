"""MCP over Streamable HTTP at ``/mcp`` (GATEWAY section 11): see ``asya_gateway.mcp.endpoint``."""

from __future__ import annotations

from asya_gateway.mcp.endpoint import LOG_LEVELS, PROTOCOL_VERSIONS, mcp_endpoint
from asya_gateway.mcp.tools import list_tools, mcp_flows

__all__ = ["LOG_LEVELS", "PROTOCOL_VERSIONS", "list_tools", "mcp_endpoint", "mcp_flows"]
