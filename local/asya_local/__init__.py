"""asya_local: the local mode (moto server, resources, ESM emulator, dev server) and the ``asya`` CLI.

Importing this package starts nothing, creates no clients and imports none of its modules: each public name is
imported from its module on first use (PEP 562), so ``asya --help`` does not pay for the gateway app and the
runtimes; ``LocalMesh`` (``asya_local.mesh``) imports the runtimes and the gateway only when it starts.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from asya_local.auth import gateway_auth
    from asya_local.backstop_loop import BackstopLoop
    from asya_local.client import GatewayClient
    from asya_local.devloop import DevLoop, DevOptions
    from asya_local.discovery import Target, discover
    from asya_local.dlq import DeadLetters, DlqError
    from asya_local.esm import EsmConfig, EsmStats, EventSourceMapping, batch_failures
    from asya_local.exceptions import (
        GatewayAuthError,
        GatewayHttpError,
        GatewayUnreachableError,
        LocalModeError,
        SseStreamError,
    )
    from asya_local.lambda_event import LambdaContext, sqs_event, sqs_record
    from asya_local.mesh import LocalMesh, runtime_entry_point, runtime_environment
    from asya_local.moto_server import AwsClients, MotoServer, make_clients
    from asya_local.plan import DeployPlan, deploy_plan, render_plan
    from asya_local.preflight import check_mesh, mesh_problems
    from asya_local.provision import MeshResources, provision
    from asya_local.reload import CodeChange, CodeWatcher, ReloadingHandler
    from asya_local.scaffold import scaffold
    from asya_local.sources import source_root
    from asya_local.sse import SseEvent, SseParser, SseStream, parse_lines
    from asya_local.testing import MeshClient, run_mesh

#: Each public name's module.
_MODULES = {
    "AwsClients": "asya_local.moto_server",
    "BackstopLoop": "asya_local.backstop_loop",
    "CodeChange": "asya_local.reload",
    "CodeWatcher": "asya_local.reload",
    "DeadLetters": "asya_local.dlq",
    "DeployPlan": "asya_local.plan",
    "DevLoop": "asya_local.devloop",
    "DevOptions": "asya_local.devloop",
    "DlqError": "asya_local.dlq",
    "EsmConfig": "asya_local.esm",
    "EsmStats": "asya_local.esm",
    "EventSourceMapping": "asya_local.esm",
    "GatewayAuthError": "asya_local.exceptions",
    "GatewayClient": "asya_local.client",
    "GatewayHttpError": "asya_local.exceptions",
    "GatewayUnreachableError": "asya_local.exceptions",
    "LambdaContext": "asya_local.lambda_event",
    "LocalMesh": "asya_local.mesh",
    "LocalModeError": "asya_local.exceptions",
    "MeshClient": "asya_local.testing",
    "MeshResources": "asya_local.provision",
    "MotoServer": "asya_local.moto_server",
    "ReloadingHandler": "asya_local.reload",
    "SseEvent": "asya_local.sse",
    "SseParser": "asya_local.sse",
    "SseStream": "asya_local.sse",
    "SseStreamError": "asya_local.exceptions",
    "Target": "asya_local.discovery",
    "batch_failures": "asya_local.esm",
    "check_mesh": "asya_local.preflight",
    "deploy_plan": "asya_local.plan",
    "discover": "asya_local.discovery",
    "gateway_auth": "asya_local.auth",
    "make_clients": "asya_local.moto_server",
    "mesh_problems": "asya_local.preflight",
    "parse_lines": "asya_local.sse",
    "provision": "asya_local.provision",
    "render_plan": "asya_local.plan",
    "run_mesh": "asya_local.testing",
    "runtime_entry_point": "asya_local.mesh",
    "runtime_environment": "asya_local.mesh",
    "scaffold": "asya_local.scaffold",
    "source_root": "asya_local.sources",
    "sqs_event": "asya_local.lambda_event",
    "sqs_record": "asya_local.lambda_event",
}

__all__ = [
    "AwsClients",
    "BackstopLoop",
    "CodeChange",
    "CodeWatcher",
    "DeadLetters",
    "DeployPlan",
    "DevLoop",
    "DevOptions",
    "DlqError",
    "EsmConfig",
    "EsmStats",
    "EventSourceMapping",
    "GatewayAuthError",
    "GatewayClient",
    "GatewayHttpError",
    "GatewayUnreachableError",
    "LambdaContext",
    "LocalMesh",
    "LocalModeError",
    "MeshClient",
    "MeshResources",
    "MotoServer",
    "ReloadingHandler",
    "SseEvent",
    "SseParser",
    "SseStream",
    "SseStreamError",
    "Target",
    "batch_failures",
    "check_mesh",
    "deploy_plan",
    "discover",
    "gateway_auth",
    "make_clients",
    "mesh_problems",
    "parse_lines",
    "provision",
    "render_plan",
    "run_mesh",
    "runtime_entry_point",
    "runtime_environment",
    "scaffold",
    "source_root",
    "sqs_event",
    "sqs_record",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'asya_local' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
