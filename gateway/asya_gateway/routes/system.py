"""``GET /api/v1/system/mesh``: what the manifest tells a client about this mesh, without any AWS call (chosen; the
web console's mesh page and "new task" forms are built from it).

Answer 200::

    {"namespace": "demo", "auth": "api_key",
     "flows": [{"name", "description", "route", "timeout", "progress", "input_schema", "graph"}, ...],  # by name
     "actors": ["analyze", ...],          # user actors, sorted: the ones ?actor= accepts (GW-CREATE-2)
     "queues": ["analyze", ..., "x-sink", "x-sump"]}   # every actor the diagnostic checks (GW-OPS-3)

A flow's ``graph`` is the drawing of a flow written as Python: ``asya.flows.render.graph_json`` of its program, the
nodes and edges the DOT and Mermaid text are made from; ``null`` for a static route (GW-MESH-1).

It needs the same credentials as every other API route (GW-AUTH-1): the flows and their schemas are the caller's
business, not the public's.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya.flows.render import graph_json
from asya.manifest import Manifest
from asya_gateway.context import context_of
from asya_gateway.diagnostic import diagnostic_actors

__all__ = ["mesh_summary", "mesh_summary_of"]


def mesh_summary_of(manifest: Manifest) -> dict[str, Any]:
    """The ``GET /api/v1/system/mesh`` body for ``manifest``."""
    flows = [
        {
            "name": name,
            "description": flow.description,
            "route": list(flow.route),
            "timeout": flow.timeout,
            "progress": flow.progress,
            "input_schema": flow.input_schema,
            "graph": graph_json(flow.program) if flow.program is not None else None,
        }
        for name, flow in sorted(manifest.flows.items())
    ]
    return {
        "namespace": manifest.namespace,
        "auth": manifest.gateway.auth.mode,
        "flows": flows,
        "actors": sorted(manifest.actors),
        "queues": diagnostic_actors(manifest),
    }


async def mesh_summary(request: Request) -> Response:
    return JSONResponse(mesh_summary_of(context_of(request).manifest))
