"""The artifact mesh's API front plays API Gateway under load (docs/http.md GW-OVL-6): the stage throttle of the
template refuses requests beyond its token bucket with the ``THROTTLED`` gateway response, and a function it cannot
reach answers the ``INTEGRATION_FAILURE`` one (else ``DEFAULT_5XX``), each with the template's ``Retry-After``."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya_local.artifact.apifront import ApiFront
from asya_local.artifact.edgelimits import EdgeLimits, GatewayAnswer, StageThrottle
from asya_local.artifact.model import ApiMethod, read_mesh
from asya_local.artifact.template import load_assembly
from asya_local.serving import UvicornThread

pytestmark = pytest.mark.functional

GATEWAY = "arn:aws:lambda:us-east-1:123456789012:function:gw"
METHODS = [ApiMethod("/{proxy+}", "ANY", "NONE", None, GATEWAY)]
OVERLOADED = GatewayAnswer(503, '{"error": "overloaded"}', {"Retry-After": "2"})
THROTTLED = GatewayAnswer(429, '{"error": "throttled"}', {"Retry-After": "2"})


async def _upstream(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def _front(upstream: str, limits: EdgeLimits) -> UvicornThread:
    front = ApiFront(
        METHODS, upstreams={GATEWAY: upstream}, principals={}, stage="prod", api_arn="arn:api", limits=limits
    )
    server = UvicornThread(front, name="test-front")
    server.start()
    return server


def test_gw_ovl_6_the_stage_throttle_answers_the_throttled_gateway_response() -> None:
    """A bucket of 2 that refills once in 1,000 s: two requests pass, the third is throttled."""
    upstream = UvicornThread(_upstream, name="test-upstream")
    upstream.start()
    limits = EdgeLimits(throttle=StageThrottle(rate=0.001, burst=2), responses={"THROTTLED": THROTTLED})
    front = _front(upstream.url, limits)
    try:
        with httpx.Client(base_url=f"{front.url}/prod", timeout=30) as client:
            assert [client.get("/health").status_code for _ in range(2)] == [200, 200]
            refused = client.get("/health")
    finally:
        front.stop()
        upstream.stop()
    assert refused.status_code == 429
    assert refused.headers["retry-after"] == "2"
    assert refused.json() == {"error": "throttled"}


@pytest.mark.parametrize("kind", ["INTEGRATION_FAILURE", "DEFAULT_5XX"])
def test_gw_ovl_6_an_unreachable_function_answers_503_with_retry_after(kind: str) -> None:
    front = _front(_closed_port(), EdgeLimits(responses={kind: OVERLOADED}))
    try:
        with httpx.Client(base_url=f"{front.url}/prod", timeout=30) as client:
            answer = client.get("/api/v1/mesh/x")
    finally:
        front.stop()
    assert (answer.status_code, answer.headers["retry-after"], answer.json()) == (503, "2", {"error": "overloaded"})


def test_without_gateway_responses_the_front_answers_as_api_gateway_does() -> None:
    front = _front(_closed_port(), EdgeLimits())
    try:
        with httpx.Client(base_url=f"{front.url}/prod", timeout=30) as client:
            answer = client.get("/api/v1/mesh/x")
    finally:
        front.stop()
    assert answer.status_code == 502 and "retry-after" not in answer.headers


def test_the_templates_stage_throttle_and_gateway_responses_are_read(tmp_path: Path) -> None:
    """As CDK writes them: the stage's ``MethodSettings`` for ``*`` on ``/*``, static headers in single quotes."""
    template = {
        "Resources": {
            "Stage": {
                "Type": "AWS::ApiGateway::Stage",
                "Properties": {
                    "StageName": "prod",
                    "MethodSettings": [
                        {"HttpMethod": "*", "ResourcePath": "/*", "ThrottlingRateLimit": 5, "ThrottlingBurstLimit": 10}
                    ],
                },
            },
            "Throttled": {
                "Type": "AWS::ApiGateway::GatewayResponse",
                "Properties": {
                    "ResponseType": "THROTTLED",
                    "StatusCode": "429",
                    "RestApiId": "api",
                    "ResponseParameters": {"gatewayresponse.header.Retry-After": "'2'"},
                    "ResponseTemplates": {"application/json": json.dumps({"error": "throttled"})},
                },
            },
        }
    }
    (tmp_path / "manifest.json").write_text(
        json.dumps({"artifacts": {"s": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "s.json"}}}})
    )
    (tmp_path / "s.json").write_text(json.dumps(template))
    spec = read_mesh(load_assembly(tmp_path, account_id="111122223333", endpoint_url="http://e"))
    assert spec.edge_limits.throttle == StageThrottle(rate=5.0, burst=10)
    assert spec.edge_limits.answer("THROTTLED") == THROTTLED
    assert spec.edge_limits.answer("INTEGRATION_FAILURE").status == 502  # AWS's own: no response configured
