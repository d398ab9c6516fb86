"""asya_local: the local mode (moto server, resources, ESM emulator, dev server) and the ``asya`` CLI.

Importing this package starts nothing and creates no clients; ``LocalMesh`` (``asya_local.mesh``) imports the
runtimes and the gateway only when it starts.
"""

from __future__ import annotations

from asya_local.client import GatewayClient
from asya_local.esm import EsmConfig, EsmStats, EventSourceMapping, batch_failures
from asya_local.exceptions import GatewayHttpError, GatewayUnreachableError, LocalModeError, SseStreamError
from asya_local.lambda_event import LambdaContext, sqs_event, sqs_record
from asya_local.mesh import LocalMesh, actor_environment, runtime_entry_point
from asya_local.moto_server import AwsClients, MotoServer, make_clients
from asya_local.provision import MeshResources, provision
from asya_local.sse import SseEvent, SseParser, SseStream, parse_lines

__all__ = [
    "AwsClients",
    "EsmConfig",
    "EsmStats",
    "EventSourceMapping",
    "GatewayClient",
    "GatewayHttpError",
    "GatewayUnreachableError",
    "LambdaContext",
    "LocalMesh",
    "LocalModeError",
    "MeshResources",
    "MotoServer",
    "SseEvent",
    "SseParser",
    "SseStream",
    "SseStreamError",
    "actor_environment",
    "batch_failures",
    "make_clients",
    "parse_lines",
    "provision",
    "runtime_entry_point",
    "sqs_event",
    "sqs_record",
]
