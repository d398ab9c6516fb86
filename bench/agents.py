"""Benchmark 8: what an MCP ``tools/call`` costs over a direct REST create-and-wait of the same flow.

One ``LocalMesh`` of the example manifest (batch size 10, progress ``hops``): ``tasks`` tasks of ``text-pipeline``
created one after another through ``POST /api/v1/mesh/?flow=`` and followed over SSE to their terminal status, then
as many through one MCP session's streamed ``tools/call`` (the gateway creates the task and waits on the task item
through the same follower, GW-MCP-8). The meter (:mod:`bench.meter`, with shadow reads, so write units are exact for
one task at a time) counts every AWS call of each phase; wall time is the client's, per task. The overhead is the
MCP phase's figure less the REST phase's, per task: what speaking MCP adds to the mesh's own work.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from asya_local.mcp_client import McpClient
from bench.meshes import FLOW, PAYLOAD, TaskCreator, follow_to_terminal, manifest_variant, running_mesh
from bench.meter import Meter, Usage
from bench.stats import summarize

__all__ = ["run", "summarize_phase"]


def summarize_phase(usage: dict[tuple[str, str, str], Usage], *, tasks: int, wall_ms: list[float]) -> dict[str, Any]:
    """Requests by service, DynamoDB write units and wall time per task of one phase. Pure."""
    services: dict[str, float] = {}
    wru = 0
    for (_, service, _), value in usage.items():
        services[service] = services.get(service, 0.0) + (value.requests - value.empty_receives) / tasks
        wru += value.wru
    return {
        "tasks": tasks,
        "requests_per_task": {name: round(count, 2) for name, count in sorted(services.items())},
        "requests_total_per_task": round(sum(services.values()), 2),
        "wru_per_task": wru / tasks,
        "wall_ms": summarize(wall_ms).to_dict(),
    }


def _rest(http: httpx.Client, url: str, tasks: int) -> list[float]:
    creator = TaskCreator(http, url)
    wall: list[float] = []
    for _ in range(tasks):
        started = time.monotonic()
        follow_to_terminal(http, url, creator.create({**PAYLOAD, "stream": False}))
        wall.append((time.monotonic() - started) * 1000)
    return wall


def _mcp(client: McpClient, tasks: int) -> list[float]:
    wall: list[float] = []
    for _ in range(tasks):
        started = time.monotonic()
        result = client.call_tool(FLOW, {**PAYLOAD, "stream": False})
        if result.get("isError"):
            raise RuntimeError(f"agents benchmark: tools/call failed: {result}")
        wall.append((time.monotonic() - started) * 1000)
    return wall


def run(*, quick: bool = False) -> dict[str, Any]:
    """Both phases on one mesh; keys ``rest``, ``mcp`` and ``mcp_over_rest`` (per-task differences)."""
    from asya_local.moto_server import make_clients

    tasks = 5 if quick else 20
    with running_mesh(manifest_variant()) as mesh, httpx.Client(timeout=60) as http:
        shadow = make_clients(mesh.clients.endpoint_url).dynamodb
        meter = Meter(shadow_dynamodb=shadow)
        for client in (mesh.clients.sqs, mesh.clients.dynamodb, mesh.clients.s3):
            meter.attach(client)
        with McpClient(mesh.url) as mcp:
            mcp.initialize()
            _rest(http, mesh.url, 2)  # warm-up: containers, queue URLs, the gateway's first requests
            _mcp(mcp, 2)
            meter.reset()
            rest_wall = _rest(http, mesh.url, tasks)
            rest = summarize_phase(meter.snapshot(), tasks=tasks, wall_ms=rest_wall)
            meter.reset()
            mcp_wall = _mcp(mcp, tasks)
            over_mcp = summarize_phase(meter.snapshot(), tasks=tasks, wall_ms=mcp_wall)
    return {
        "rest": rest,
        "mcp": over_mcp,
        "mcp_over_rest": {
            "requests_per_task": round(over_mcp["requests_total_per_task"] - rest["requests_total_per_task"], 2),
            "wru_per_task": over_mcp["wru_per_task"] - rest["wru_per_task"],
            "wall_ms_median": over_mcp["wall_ms"]["median"] - rest["wall_ms"]["median"],
        },
    }
