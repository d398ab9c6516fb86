"""The artifact mesh's API front runs Lambda authorizers as API Gateway does (GW-EDGE-1, GW-EDGE-2 (R3)): the
authorizer before the method, a refusal answered 401/403 without reaching the method's function, answers cached per
identity-source value and evaluated per method, Cognito authorizers refused at start with the reason. The authorizer
is the gateway's own code (``asya_gateway.authorizer``), invoked in-process as the Lambda would run it; the method's
function is a counting web server.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from asya.manifest import GatewayAuth
from asya_gateway.auth import StaticKeys
from asya_gateway.authorizer import EdgeAuthorizer, UnauthorizedError
from asya_local.artifact.apifront import ApiFront
from asya_local.artifact.authorizers import EdgeAuthorizers
from asya_local.artifact.model import ApiMethod
from asya_local.artifact.process import FunctionError
from asya_local.exceptions import LocalModeError

pytestmark = pytest.mark.functional

GATEWAY = "arn:aws:lambda:us-east-1:123456789012:function:gateway"
AUTHORIZER = "arn:aws:lambda:us-east-1:123456789012:function:authorizer"
URI = f"arn:aws:apigateway:us-east-1:lambda:path/2015-03-31/functions/{AUTHORIZER}/invocations"
CLIENT = {"Type": "REQUEST", "AuthorizerUri": URI, "IdentitySource": "method.request.header.X-API-Key"}
REPORTER = {"Type": "REQUEST", "AuthorizerUri": URI, "IdentitySource": "method.request.header.X-Asya-Reporter-Key"}
METHODS = [
    ApiMethod("/health", "GET", "NONE", None, GATEWAY),
    ApiMethod("/{proxy+}", "ANY", "CUSTOM", CLIENT, GATEWAY),
    ApiMethod("/api/v1/mesh/{task_id}/events", "ANY", "CUSTOM", CLIENT, GATEWAY),
    ApiMethod("/api/v1/mesh/{task_id}/events", "POST", "CUSTOM", REPORTER, GATEWAY),
]


@pytest.fixture
def front(serve_asgi: Callable[[Any], str]) -> tuple[httpx.Client, list[str], EdgeAuthorizers]:
    reached: list[str] = []

    async def anything(request: Request) -> JSONResponse:
        reached.append(f"{request.method} {request.url.path}")
        # the front's relay client would keep the connection for the next request, open past the test
        return JSONResponse({"ok": True}, headers={"Connection": "close"})

    upstream = serve_asgi(Starlette(routes=[Route("/{path:path}", anything, methods=["GET", "POST", "DELETE"])]))
    edge = EdgeAuthorizer(
        GatewayAuth(mode="api_key", api_key_secret="keys"),
        keys=StaticKeys(["client-key"]),
        reporter_keys=StaticKeys(["reporter-key"]),
    )

    def invoke(function: str, event: dict[str, Any]) -> Any:
        assert function == AUTHORIZER
        try:
            return edge.decide(event)
        except UnauthorizedError as exc:  # as the Lambda runtime reports a handler's exception
            raise FunctionError("authorizer", "UnauthorizedError", str(exc)) from None

    authorizers = EdgeAuthorizers(invoke, api_arn="arn:aws:execute-api:us-east-1:123456789012:local", stage="prod")
    app = ApiFront(
        METHODS,
        upstreams={GATEWAY: upstream},
        principals={},
        stage="prod",
        api_arn="arn:aws:execute-api:us-east-1:123456789012:local",
        authorizers=authorizers,
    )
    return httpx.Client(base_url=serve_asgi(app) + "/prod"), reached, authorizers


def test_gw_edge_1_a_refused_request_never_reaches_the_method(
    front: tuple[httpx.Client, list[str], EdgeAuthorizers],
) -> None:
    client, reached, authorizers = front
    with client:
        missing = client.get("/api/v1/mesh/t-1")
        assert (missing.status_code, missing.json()) == (401, {"message": "Unauthorized"})
        assert authorizers.invocations == {}, "a missing identity source is refused without an invocation"
        wrong = client.get("/api/v1/mesh/t-1", headers={"X-API-Key": "wrong"})
        assert (wrong.status_code, wrong.json()) == (401, {"message": "Unauthorized"})
        assert reached == []
        assert client.get("/health").status_code == 200, "public methods stay open"
        assert reached == ["GET /health"]


def test_gw_edge_1_an_allowed_answer_is_cached_per_key_and_reused_on_other_methods(
    front: tuple[httpx.Client, list[str], EdgeAuthorizers],
) -> None:
    client, reached, authorizers = front
    key = {"X-API-Key": "client-key"}
    with client:
        assert client.get("/api/v1/mesh/t-1", headers=key).status_code == 200
        assert client.post("/api/v1/mesh/", headers=key, json={}).status_code == 200
        assert client.get("/api/v1/mesh/t-1/events", headers=key).status_code == 200
    assert authorizers.invocations == {AUTHORIZER: 1}, "one invocation, then the cached policy"
    assert reached == ["GET /api/v1/mesh/t-1", "POST /api/v1/mesh/", "GET /api/v1/mesh/t-1/events"]


def test_gw_edge_2_the_producer_route_takes_the_reporter_key_and_its_policy_covers_only_it(
    front: tuple[httpx.Client, list[str], EdgeAuthorizers],
) -> None:
    client, reached, _ = front
    with client:
        client_key = client.post("/api/v1/mesh/t-1/events", headers={"X-API-Key": "client-key"}, json={})
        assert client_key.status_code == 401, "a client credential is no reporter credential"
        posted = client.post("/api/v1/mesh/t-1/events", headers={"X-Asya-Reporter-Key": "reporter-key"}, json={})
        assert posted.status_code == 200
        assert reached == ["POST /api/v1/mesh/t-1/events"]


def test_cognito_authorizers_are_refused_at_start_with_the_reason() -> None:
    cognito = ApiMethod("/{proxy+}", "ANY", "COGNITO_USER_POOLS", {"Type": "COGNITO_USER_POOLS"}, GATEWAY)
    authorizers = EdgeAuthorizers(lambda f, e: None, api_arn="arn", stage="prod")
    with pytest.raises(LocalModeError, match="Cognito user-pool authorizers are not emulated"):
        ApiFront(
            [cognito],
            upstreams={GATEWAY: "http://x"},
            principals={},
            stage="prod",
            api_arn="a",
            authorizers=authorizers,
        )
