"""The MCP protocol versions ``/mcp`` serves (GW-MCP-1) and the wire names both eras share. Pure, no I/O.

Two eras:

- the handshake era (``2025-11-25``, ``2025-06-18``, ``2025-03-26``, ``2024-11-05``): ``initialize`` negotiates the
  version and answers ``Mcp-Session-Id``; later requests carry that header and ``MCP-Protocol-Version``
  (``asya_gateway.mcp.endpoint``);
- the per-request era (``2026-07-28``): no handshake and no session; every request carries its version, client
  capabilities and (optionally) client info in ``params._meta`` plus the headers ``MCP-Protocol-Version``,
  ``Mcp-Method`` and, for ``tools/call``, ``Mcp-Name`` (``asya_gateway.mcp.modern``).

A request belongs to the per-request era when its ``params._meta`` carries the protocol-version key, its
``MCP-Protocol-Version`` header names a per-request version, or its method is ``server/discover``; any other
request is of the handshake era.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "CLIENT_CAPABILITIES_META",
    "HANDSHAKE_VERSIONS",
    "LOG_LEVEL_META",
    "METHOD_HEADER",
    "MODERN_VERSIONS",
    "NAME_HEADER",
    "PROTOCOL_VERSIONS",
    "PROTOCOL_VERSION_META",
    "SERVER_INFO_META",
    "SESSION_HEADER",
    "VERSION_HEADER",
    "is_modern_request",
]

#: Per-request (session-less) versions, newest first.
MODERN_VERSIONS: Final = ("2026-07-28",)
#: Versions reached through ``initialize``, newest first; ``initialize`` falls back to the first.
HANDSHAKE_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: Every served version, newest first.
PROTOCOL_VERSIONS: Final = (*MODERN_VERSIONS, *HANDSHAKE_VERSIONS)

SESSION_HEADER: Final = "mcp-session-id"
VERSION_HEADER: Final = "mcp-protocol-version"
METHOD_HEADER: Final = "mcp-method"
NAME_HEADER: Final = "mcp-name"

PROTOCOL_VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_META: Final = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_META: Final = "io.modelcontextprotocol/logLevel"
SERVER_INFO_META: Final = "io.modelcontextprotocol/serverInfo"


def is_modern_request(method: str | None, params: Mapping[str, Any], headers: Mapping[str, str]) -> bool:
    """Whether a message is of the per-request era (see the module docstring)."""
    meta = params.get("_meta")
    return (
        method == "server/discover"
        or headers.get(VERSION_HEADER) in MODERN_VERSIONS
        or (isinstance(meta, Mapping) and PROTOCOL_VERSION_META in meta)
    )
