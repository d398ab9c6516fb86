"""asya_local: the local mode (moto server, resources, ESM emulator, dev server) and the ``asya`` CLI.

Importing this package starts nothing and creates no clients; ``LocalMesh`` (``asya_local.mesh``) imports the
runtimes and the gateway only when it starts.
"""

from __future__ import annotations

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
from asya_local.history import RunHistory
from asya_local.lambda_event import LambdaContext, sqs_event, sqs_record
from asya_local.mesh import LocalMesh, runtime_entry_point, runtime_environment
from asya_local.moto_server import AwsClients, MotoServer, make_clients
from asya_local.preflight import check_mesh, mesh_problems
from asya_local.provision import MeshResources, provision
from asya_local.reload import CodeChange, CodeWatcher, ReloadingHandler
from asya_local.scaffold import scaffold
from asya_local.sources import source_root
from asya_local.sse import SseEvent, SseParser, SseStream, parse_lines
from asya_local.testing import MeshClient, run_mesh

__all__ = [
    "AwsClients",
    "BackstopLoop",
    "CodeChange",
    "CodeWatcher",
    "DeadLetters",
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
    "RunHistory",
    "SseEvent",
    "SseParser",
    "SseStream",
    "SseStreamError",
    "Target",
    "batch_failures",
    "check_mesh",
    "discover",
    "gateway_auth",
    "make_clients",
    "mesh_problems",
    "parse_lines",
    "provision",
    "run_mesh",
    "runtime_entry_point",
    "runtime_environment",
    "scaffold",
    "source_root",
    "sqs_event",
    "sqs_record",
]
