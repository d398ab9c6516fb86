"""Schemathesis against the gateway's own OpenAPI document (GW-OPS-2; issue 18 "Build" 2), served by the local app
over moto with ``api_key`` authentication on (so the auth checks have something to check): every operation gets
generated valid (positive) and invalid (negative) requests; no answer may be a server error, and every answer must
match the document (status code, content type, body schema, headers), and requests with bad credentials must be
refused. The example count per operation and mode is bounded (:data:`EXAMPLES`), so the tier runs in well under a
minute: 15 (25 before, which cost the fuzz tier 40% more CPU); every operation still gets its own run in each mode
(the test asserts which ran), and the seed is fixed, so the examples are the same on every run.

One check is left out: ``positive_data_acceptance`` (a schema-valid request must not answer 400). The create route's
rules that OpenAPI cannot state (exactly one of ``actor`` and ``flow``, GW-CREATE-1; a flow's own ``input_schema``,
GW-CREATE-4) make some schema-valid requests a 400 by design. On ``/a2a/`` ``negative_data_rejection`` is left out
too: A2A answers every JSON-RPC error, a parse error included, with HTTP 200 (GW-A2A-3), and the body says why.

The operations are driven through schemathesis' programmatic API (one hypothesis run per operation and mode) rather
than its pytest plugin, whose lazy-fixture loader does not run under this pytest."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance
from schemathesis.specs.openapi.schemas import OpenApiSchema

from asya.manifest import GatewayAuth
from asya.manifest import GatewayConfig as ManifestGateway
from asya.store import TaskStore
from asya_gateway import GatewayConfig, create_app

pytestmark = pytest.mark.fuzz

EXAMPLES = 15
KEY = "fuzz-key-1"


@pytest.fixture
def gateway_schema(mesh: Any) -> OpenApiSchema:
    store = TaskStore(
        table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=mesh.aws.dynamodb, s3=mesh.aws.s3
    )
    auth = GatewayAuth(mode="api_key", api_key_secret="asya/demo/api-keys")
    manifest = mesh.manifest.model_copy(update={"gateway": ManifestGateway(auth=auth)})
    config = GatewayConfig(api_keys=(KEY,), sse_max_seconds=1.0, sse_poll_fast=0.05, sse_poll_slow=0.05)
    app = create_app(config, manifest=manifest, store=store, sqs=mesh.aws.sqs, s3=mesh.aws.s3)
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    # unknown query parameters and headers are ignored, as HTTP APIs do (GW-LIST-1, chosen): not a violation
    schema.config.generation.update(allow_extra_parameters=False)
    return schema


def _run(operation: Any, mode: GenerationMode) -> bool:
    """Run ``operation``'s examples of ``mode``; False when the mode has nothing to generate for it (negative
    requests of an operation without parameters or body)."""
    excluded: list[Any] = [positive_data_acceptance]
    # JSON-RPC answers a request it refuses with an error object over HTTP 200: A2A always, MCP in the session era
    # (a request without the 2026-07-28 version header); the error's code is checked by the agents' own tests
    if operation.path in ("/a2a/", "/mcp"):
        excluded.append(negative_data_rejection)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        case.call_and_validate(headers={"X-API-Key": KEY}, excluded_checks=excluded)

    try:
        check()
    except Unsatisfiable:
        return False
    return True


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=["positive", "negative"])
def test_gateway_conforms_to_its_openapi_document_gw_ops_2(gateway_schema: OpenApiSchema, mode: GenerationMode) -> None:
    operations = [result.ok() for result in gateway_schema.get_all_operations()]
    labels = sorted(operation.label for operation in operations)
    # schemathesis leaves out the operation serving the document it loaded (GET /openapi.json)
    assert {
        "DELETE /api/v1/mesh/{task_id}",
        "GET /api/v1/mesh/",
        "GET /api/v1/mesh/{task_id}",
        "GET /api/v1/mesh/{task_id}/events",
        "GET /health",
        "POST /api/v1/mesh/",
        "POST /api/v1/mesh/{task_id}/events",
        "POST /api/v1/mesh/{task_id}/resume",
        "POST /api/v1/system/mq-diagnostic",
    } <= set(labels), labels
    ran = {operation.label for operation in operations if _run(operation, mode)}
    # GETs without parameters or body have no invalid request to generate
    parameterless = {"GET /health", "GET /console", "GET /.well-known/agent.json", "GET /.well-known/agent-card.json"}
    idle = parameterless if mode == GenerationMode.NEGATIVE else set()
    assert ran == set(labels) - idle
