"""Pure pieces of the MCP endpoint: which era a message belongs to (GW-MCP-1, ``asya_gateway.mcp.versions``) and the
task id a handshake-era call is created under, which its ``notifications/cancelled`` recomputes (GW-CANCEL-1,
``asya_gateway.mcp.cancel``)."""

from __future__ import annotations

import uuid

import pytest

from asya_gateway.mcp import HANDSHAKE_VERSIONS, MODERN_VERSIONS, PROTOCOL_VERSIONS, call_task_id
from asya_gateway.mcp.versions import PROTOCOL_VERSION_META, is_modern_request

pytestmark = pytest.mark.unit


def test_gw_mcp_1_served_versions_newest_first() -> None:
    assert MODERN_VERSIONS == ("2026-07-28",)
    assert HANDSHAKE_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert PROTOCOL_VERSIONS == MODERN_VERSIONS + HANDSHAKE_VERSIONS


@pytest.mark.parametrize(
    ("method", "params", "headers", "modern"),
    [
        ("server/discover", {}, {}, True),
        ("tools/list", {"_meta": {PROTOCOL_VERSION_META: "2099-01-01"}}, {}, True),  # envelope, even unsupported
        ("tools/list", {}, {"mcp-protocol-version": "2026-07-28"}, True),
        ("tools/list", {}, {"mcp-protocol-version": "2025-11-25"}, False),
        ("tools/call", {"_meta": {"progressToken": "p"}}, {}, False),  # a handshake-era _meta
        ("initialize", {"protocolVersion": "2026-07-28"}, {}, False),  # a handshake never lands on 2026
        (None, {}, {}, False),
    ],
)
def test_gw_mcp_1_the_era_of_a_message(method: str | None, params: dict, headers: dict, modern: bool) -> None:
    assert is_modern_request(method, params, headers) is modern


def test_gw_cancel_1_a_call_task_id_is_a_uuid4_of_session_and_request_id() -> None:
    session = str(uuid.uuid4())
    task_id = call_task_id(session, 3)
    parsed = uuid.UUID(task_id)
    assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    assert call_task_id(session, 3) == task_id  # recomputed by the cancel notification
    assert call_task_id(session, "3") != task_id  # a string id is another id (JSON-RPC)
    assert call_task_id(str(uuid.uuid4()), 3) != task_id  # another session cannot name it
