"""The MCP tool ``asya.signal`` (GW-SIGNAL-1): listed when an MCP flow waits for an event, never otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from asya.manifest import load_manifest
from asya_gateway.mcp.tools import SIGNAL_TOOL, list_tools, signals_events

pytestmark = pytest.mark.unit

WAITING = """
from asya.flows import flow, wait_for


@flow
async def order(state):
    state = await charge(state)
    state = await wait_for(state, event="paid", timeout=60)
    return state
"""


def _manifest(tmp_path: Path, source: str, *, mcp: bool) -> Path:
    (tmp_path / "flows").mkdir(exist_ok=True)
    (tmp_path / "flows" / "order.py").write_text(source)
    (tmp_path / "handlers.py").write_text("def f(p):\n    return p\n")
    (tmp_path / "asya.yaml").write_text(
        "namespace: t\nactors:\n  charge:\n    handler: handlers.f\n"
        f"flows:\n  order:\n    source: flows/order.py\n    mcp: {str(mcp).lower()}\n"
    )
    return tmp_path / "asya.yaml"


def test_gw_signal_1_the_signal_tool_is_listed_with_an_mcp_flow_that_waits_for_an_event(tmp_path: Path) -> None:
    manifest = load_manifest(_manifest(tmp_path, WAITING, mcp=True))
    assert signals_events(manifest)
    tools = {tool["name"]: tool for tool in list_tools(manifest)}
    assert set(tools) == {"order", SIGNAL_TOOL}
    assert tools[SIGNAL_TOOL]["inputSchema"]["required"] == ["task_id", "event"]


def test_gw_signal_1_no_signal_tool_without_a_waiting_mcp_flow(tmp_path: Path) -> None:
    assert [t["name"] for t in list_tools(load_manifest(_manifest(tmp_path, WAITING, mcp=False)))] == []
    plain = WAITING.replace('    state = await wait_for(state, event="paid", timeout=60)\n', "")
    assert [t["name"] for t in list_tools(load_manifest(_manifest(tmp_path, plain, mcp=True)))] == ["order"]
