"""The gateway version, reported by ``/health`` (GW-OPS-1) and the MCP/A2A server info."""

from __future__ import annotations

from typing import Final

__all__ = ["VERSION"]

VERSION: Final = "0.1.0"
