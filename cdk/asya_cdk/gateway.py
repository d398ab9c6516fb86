"""The HTTP gateway: one Lambda running the ASGI app behind the AWS Lambda Web Adapter, fronted by a regional API
Gateway REST API (docs/http.md).

The function's handler is ``run.sh`` (uvicorn on port 8080), run by the adapter layer through
``AWS_LAMBDA_EXEC_WRAPPER=/opt/bootstrap`` in ``response_stream`` invoke mode. In that mode the adapter answers every
request in Lambda's streaming HTTP format, so every method is integrated with response transfer mode ``STREAM``
(the streaming invocation URI, 15-minute limit): GW-GEN-1 requires it for the SSE, MCP and A2A routes, and a
``BUFFERED`` integration could not read the adapter's responses.

Two functions run the same code asset. The **stream function** (``stream_memory``, 128 MB by default, arm64) serves
the routes that hold an invocation open while a task runs (GW-SSE-20..27): ``GET /api/v1/mesh/{id}/events``, ``GET
/api/v1/mesh/events`` (many tasks), ``ANY /mcp`` and ``ANY /a2a`` (their waits follow tasks). A waiting process
needs little memory (one measured at about 91 MB RSS, bench/REPORT.md section 10), and a Lambda environment serves
one invocation at a time, so the GB-seconds of watching are an eighth of the main function's. The **main function**
(``memory``, 1024 MB) serves everything else: creation, views, listing, the producer route, the console.

Routes: ``ANY /`` and ``ANY /{proxy+}`` reach the main function, which does its own routing, and so does every other
method of the stream resources; ``ANY /mcp`` (MCP) and ``ANY /a2a`` (A2A; the app serves ``/a2a/`` and ``/a2a``
alike) reach the stream function; the public routes of GW-AUTH-2
(``GET /health``, ``GET /openapi.json``, ``GET /.well-known/agent.json`` and the A2A 1.x card path
``/.well-known/agent-card.json``) have methods of their own without authorization (:mod:`asya.publicroutes`).
Authorization per ``gateway.auth.mode`` (GW-AUTH-1): ``iam`` -> AWS_IAM on every other method (GW-AUTH-3); ``api_key``
and ``jwt`` -> the edge authorizer (:class:`~asya_cdk.edgeauth.EdgeAuth`, GW-EDGE-1) on every other method, the
console's assets (``GET /console``, ``GET /console/{proxy+}``) open, and the producer route ``POST
/api/v1/mesh/{task_id}/events`` under the reporter authorizer; the app checks again (GW-AUTH-4, GW-AUTH-5); ``none``
-> refused unless ``allow_unauthenticated`` (GW-AUTH-6). Every mode's functions get ``ASYA_REPORTER_KEY_SECRET``, the
reporter keys' secret (:func:`~asya_cdk.edgeauth.reporter_secret`; encrypted with ``key``, the mesh's customer-managed
key, when given), and may read it (``kms:Decrypt`` on ``key`` through Secrets Manager included). With CORS origins
configured and a checked mode, ``OPTIONS`` is left open so browsers' preflight requests reach the app. The stage has
JSON access logs, ERROR execution logs and the throttling of ``edge`` (``gateway.edge``: stage and per-method limits),
and optionally a WAF web ACL and a custom domain (GW-EDGE-6). ``tracing`` (the manifest's ``defaults.tracing``)
turns on X-Ray for both functions and the stage; ``stream_reserved_concurrency`` reserves concurrency for the stream
function (``gateway.stream_reserved_concurrency``, checked by :mod:`asya_cdk.concurrency`). ``api_overrides``
(``AsyaMesh(api_gateway_props=...)``) apply over the API's defaults; with ``cloud_watch_role=False`` the account-wide
role is not created and its cdk-nag acknowledgment is not added.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from aws_cdk import Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from constructs import Construct

from asya import publicroutes
from asya.envnames import ENV
from asya.manifest import GatewayAuth, GatewayEdge
from asya.overload import DEFAULT_RETRY_AFTER_SECONDS
from asya_cdk.edgeauth import EDGE_MODES, EdgeAuth, attach_domain, attach_waf, check_edge, reporter_secret
from asya_cdk.errors import DeploymentError
from asya_cdk.nag import acknowledge

__all__ = [
    "ADAPTER_ENVIRONMENT",
    "AGENT_PATHS",
    "PUBLIC_PATHS",
    "STREAM_PATHS",
    "Gateway",
    "check_auth",
]

#: The SSE routes served by the stream function (GET only: POST to a task's events is the producer route, GW-EVT).
STREAM_PATHS: Final = ("/api/v1/mesh/{task_id}/events", "/api/v1/mesh/events")
#: Routes that never require credentials (GW-AUTH-2).
PUBLIC_PATHS: Final = publicroutes.PUBLIC_PATHS
#: The agent protocol routes (GW-GEN-1: streamed): MCP at ``/mcp`` (GW-MCP-1..9), A2A at ``/a2a/`` (GW-A2A-1..14). They
#: would reach the app through ``/{proxy+}`` too; resources of their own keep them in the API whatever else changes.
AGENT_PATHS: Final = ("/mcp", "/a2a")
ADAPTER_PORT: Final = 8080
#: Environment of the Lambda Web Adapter.
ADAPTER_ENVIRONMENT: Final[Mapping[str, str]] = {
    "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap",
    "AWS_LWA_INVOKE_MODE": "response_stream",
    "AWS_LWA_READINESS_CHECK_PATH": "/health",
    "PORT": str(ADAPTER_PORT),
}
#: API Gateway's limit for a streamed response (GW-GEN-1); the function may run as long.
_STREAM_TIMEOUT: Final = Duration.minutes(15)
_APIGW_LOGS_POLICY: Final = (
    "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"
)


def check_auth(auth: GatewayAuth) -> None:
    """Refuse an open gateway unless asked for (GW-AUTH-6). ``jwt``'s settings are checked by the manifest."""
    if auth.mode == "none" and not auth.allow_unauthenticated:
        raise DeploymentError(
            "gateway.auth.mode: 'none' would expose every route without authentication (GW-AUTH-6); "
            "use 'iam', 'api_key' or 'jwt', or set gateway.auth.allow_unauthenticated: true to deploy it anyway"
        )


class Gateway(Construct):
    """Gateway function + REST API."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        api_name: str,
        auth: GatewayAuth,
        code: lambda_.Code,
        runtime: lambda_.Runtime,
        layers: Sequence[lambda_.ILayerVersion],
        adapter_layer: lambda_.ILayerVersion,
        environment: Mapping[str, str],
        cors_origins: Sequence[str] = (),
        memory: int = 1024,
        stream_memory: int = 128,
        stage_name: str = "prod",
        edge: GatewayEdge | None = None,
        log_retention: logs.RetentionDays = logs.RetentionDays.ONE_MONTH,
        api_overrides: Mapping[str, Any] | None = None,
        tracing: bool = False,
        stream_reserved_concurrency: int | None = None,
        key: kms.IKey | None = None,
    ) -> None:
        check_auth(auth)
        edge = edge or GatewayEdge()
        problems = check_edge(edge)
        if problems:
            raise DeploymentError("gateway edge settings:\n  " + "\n  ".join(problems))
        clash = sorted(set(environment) & set(ADAPTER_ENVIRONMENT))
        if clash:
            raise DeploymentError(f"gateway environment: {clash} are set by the Lambda Web Adapter configuration")
        if not 128 <= stream_memory <= 10240:
            raise DeploymentError(
                f"gateway stream_memory: {stream_memory} MB is outside Lambda's 128..10240 MB; a stream needs about "
                "91 MB (bench/REPORT.md section 10), so 128 or 256 fits"
            )
        super().__init__(scope, id)
        self._reporter_secret = reporter_secret(self, edge.reporter_key_secret, key)
        environment = {**environment, ENV.reporter_key_secret: self._reporter_secret.secret_arn}
        self._log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self._stream_log_group = logs.LogGroup(self, "StreamLogs", retention=log_retention)
        self._function, self._stream_function = (
            lambda_.Function(
                self,
                name,
                description=f"asya gateway ({api_name}){suffix}",
                runtime=runtime,
                architecture=lambda_.Architecture.ARM_64,
                handler="run.sh",
                code=code,
                layers=[adapter_layer, *layers],
                memory_size=size,
                timeout=_STREAM_TIMEOUT,
                environment={**environment, **ADAPTER_ENVIRONMENT},
                log_group=log_group,
                tracing=lambda_.Tracing.ACTIVE if tracing else None,
                reserved_concurrent_executions=reserved,
            )
            for name, suffix, size, log_group, reserved in (
                ("Function", "", memory, self._log_group, None),
                ("StreamFunction", ", streams", stream_memory, self._stream_log_group, stream_reserved_concurrency),
            )
        )
        self._edge_auth: EdgeAuth | None = None
        if auth.mode in EDGE_MODES:
            self._edge_auth = EdgeAuth(
                self,
                "EdgeAuth",
                auth=auth,
                code=code,
                runtime=runtime,
                layers=layers,
                environment=environment,
                log_retention=log_retention,
            )
        readers = [self._function, self._stream_function]
        if self._edge_auth is not None:
            readers.append(self._edge_auth.function)
        for reader in readers:
            self._reporter_secret.grant_read(reader)
            if key is not None:
                _grant_secret_decrypt(key, reader)
        if tracing:
            acknowledge(
                self,
                "AwsSolutions-IAM5[Resource::*]",
                "xray:PutTraceSegments and xray:PutTelemetryRecords have no resource-level permissions; they only "
                "write the gateway's trace data (defaults.tracing: true in the manifest).",
            )
        if auth.mode == "api_key" and auth.api_key_secret:
            self._grant_secret(auth.api_key_secret, readers)

        self._access_logs = logs.LogGroup(self, "AccessLogs", retention=log_retention)
        extra = dict(api_overrides or {})
        self._api = apigw.RestApi(
            self,
            "Api",
            description=f"asya gateway ({api_name})",
            cloud_watch_role=extra.pop("cloud_watch_role", True),
            **extra,
            rest_api_name=api_name,
            endpoint_configuration=apigw.EndpointConfiguration(types=[apigw.EndpointType.REGIONAL]),
            deploy_options=apigw.StageOptions(
                stage_name=stage_name,
                access_log_destination=apigw.LogGroupLogDestination(self._access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=True,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=True,
                ),
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,
                throttling_rate_limit=edge.throttle.rate_limit,
                throttling_burst_limit=edge.throttle.burst_limit,
                method_options={
                    key: apigw.MethodDeploymentOptions(
                        throttling_rate_limit=limit.rate_limit, throttling_burst_limit=limit.burst_limit
                    )
                    for key, limit in edge.throttle.methods.items()
                },
                tracing_enabled=tracing,
            ),
        )
        # the gateway's own Retry-After (a declared capacity sets it, docs/capacity.md), else the default
        self._add_overload_responses(int(environment.get(ENV.retry_after) or DEFAULT_RETRY_AFTER_SECONDS))
        integration, streaming = (
            apigw.LambdaIntegration(
                function,
                proxy=True,
                allow_test_invoke=False,
                response_transfer_mode=apigw.ResponseTransferMode.STREAM,
                timeout=_STREAM_TIMEOUT,
            )
            for function in (self._function, self._stream_function)
        )
        guard = self._guard(auth)
        protected = guard["authorization_type"]
        open_preflight = protected != apigw.AuthorizationType.NONE and bool(cors_origins)
        # (resource, integration of its ANY method)
        routed: list[tuple[apigw.IResource, apigw.LambdaIntegration]] = [
            (self._api.root, integration),
            (self._api.root.add_resource("{proxy+}"), integration),
        ]
        routed.extend((self._api.root.resource_for_path(path), streaming) for path in AGENT_PATHS)
        for path in STREAM_PATHS:
            # API Gateway routes a path to its most specific resource, never on to {proxy+}: the resources on the
            # way to a stream path take every method to the main function, the stream path its GET to the streams
            resource: apigw.IResource = self._api.root.resource_for_path(path)
            streamed = resource.add_method("GET", streaming, **guard)
            if protected == apigw.AuthorizationType.NONE:
                acknowledge(streamed, "AwsSolutions-APIG4", _app_auth_reason(auth))
            node: apigw.IResource | None = resource
            while node is not None and node.path != "/":
                if all(node.path != known.path for known, _ in routed):
                    routed.append((node, integration))
                node = node.parent_resource
        for path in PUBLIC_PATHS:
            public = self._api.root.resource_for_path(path)
            method = public.add_method("GET", integration, authorization_type=apigw.AuthorizationType.NONE)
            acknowledge(
                method, "AwsSolutions-APIG4", f"GET {path} is a public route of the gateway contract (GW-AUTH-2)."
            )
            routed.append((public, integration))
        if self._edge_auth is not None:
            self._add_edge_routes(integration)
        for resource, target in routed:
            method = resource.add_method("ANY", target, **guard)
            if protected == apigw.AuthorizationType.NONE:
                acknowledge(method, "AwsSolutions-APIG4", _app_auth_reason(auth))
            if open_preflight:
                preflight = resource.add_method("OPTIONS", target, authorization_type=apigw.AuthorizationType.NONE)
                acknowledge(
                    preflight,
                    "AwsSolutions-APIG4",
                    "CORS preflight requests carry no credentials; the app answers them (GW-GEN-8).",
                )
        self._check_method_throttles(edge)
        if edge.waf_web_acl_arn is not None:
            attach_waf(self, self._api.deployment_stage, edge.waf_web_acl_arn)
        self._domain = attach_domain(self._api, edge)
        self._acknowledge_api_findings(auth, waf=edge.waf_web_acl_arn is not None)

    def _add_overload_responses(self, retry_after_seconds: int) -> None:
        """GW-OVL-6: API Gateway's own refusals under load say so. Its stage throttle answers 429, and a gateway
        function it could not invoke (a Lambda throttle, a full account) or any other 5xx of its own answers 503,
        both with ``Retry-After`` and the gateway's error shape, so a client tells overload from a bug."""
        retry_after = f"'{retry_after_seconds}'"
        for id_, kind, status, why in (
            ("Throttled", apigw.ResponseType.THROTTLED, "429", "API Gateway throttled the request"),
            ("IntegrationFailure", apigw.ResponseType.INTEGRATION_FAILURE, "503", "the gateway could not be invoked"),
            ("Default5xx", apigw.ResponseType.DEFAULT_5_XX, "503", "the gateway did not answer"),
        ):
            message = f"the mesh is overloaded ({why}); retry after {retry_after_seconds} s"
            self._api.add_gateway_response(
                f"Overload{id_}",
                type=kind,
                status_code=status,
                response_headers={"Retry-After": retry_after},
                templates={"application/json": json.dumps({"error": message})},
            )

    def _guard(self, auth: GatewayAuth) -> dict[str, Any]:
        """The authorization of every non-public method (module docstring)."""
        if self._edge_auth is not None:
            return {"authorization_type": apigw.AuthorizationType.CUSTOM, "authorizer": self._edge_auth.client}
        if auth.mode == "iam":
            return {"authorization_type": apigw.AuthorizationType.IAM}
        return {"authorization_type": apigw.AuthorizationType.NONE}

    def _add_edge_routes(self, integration: apigw.LambdaIntegration) -> None:
        """Under an edge authorizer: the console's assets open (GW-AUTH-2), the producer route on reporter keys."""
        assert self._edge_auth is not None
        console = self._api.root.resource_for_path(publicroutes.CONSOLE_PATH)
        for resource in (console, console.add_resource("{proxy+}")):
            method = resource.add_method("GET", integration, authorization_type=apigw.AuthorizationType.NONE)
            acknowledge(
                method,
                "AwsSolutions-APIG4",
                "The web console's static assets hold no data; the page calls the API with credentials (GW-AUTH-2).",
            )
        http_method, path = publicroutes.PRODUCER_ROUTE
        self._api.root.resource_for_path(path).add_method(
            http_method,
            integration,
            authorization_type=apigw.AuthorizationType.CUSTOM,
            authorizer=self._edge_auth.reporter,
        )

    def _check_method_throttles(self, edge: GatewayEdge) -> None:
        known = {(m.resource.path, m.http_method) for m in self._api.methods}
        paths = {path for path, _ in known}
        bad = []
        for key in edge.throttle.methods:
            path, _, method = key.rpartition("/")
            path = path or "/"
            if path != "/*" and (
                path not in paths
                or (method not in ("*", "ANY") and (path, method) not in known and (path, "ANY") not in known)
            ):
                bad.append(key)
        if bad:
            raise DeploymentError(
                f"gateway.edge.throttle.methods: {bad} name no method of the API; use a resource path and method "
                f"such as '/api/v1/mesh/POST' (resources: {sorted(paths)})"
            )

    def _grant_secret(self, secret_id: str, readers: Sequence[lambda_.IFunction]) -> None:
        if secret_id.startswith("arn:"):
            secret = secretsmanager.Secret.from_secret_complete_arn(self, "ApiKeys", secret_id)
        else:
            secret = secretsmanager.Secret.from_secret_name_v2(self, "ApiKeys", secret_id)
        for reader in readers:
            secret.grant_read(reader)

    def _acknowledge_api_findings(self, auth: GatewayAuth, *, waf: bool) -> None:
        if self._api.node.try_find_child("CloudWatchRole") is not None:
            acknowledge(
                self._api,
                f"AwsSolutions-IAM4[{_APIGW_LOGS_POLICY}]",
                "The account-level role API Gateway needs to write stage logs; AWS's policy is the documented one.",
            )
        acknowledge(
            self._api,
            "AwsSolutions-APIG2",
            "Every route is proxied to the ASGI app, which validates requests itself with the gateway's "
            "error format (GW-GEN-2, GW-GEN-5); API Gateway's validators would answer with another format.",
        )
        acknowledge(
            self._api,
            "AwsSolutions-COG4",
            f"Authentication mode {auth.mode!r} from the manifest (GW-AUTH-1): AWS_IAM at API Gateway, or the "
            "edge Lambda authorizer checking API keys / JWTs (Cognito user pools included) as the app does "
            "(GW-EDGE-1, docs/deploy.md 'Edge auth').",
        )
        if not waf:
            acknowledge(
                self._api,
                "AwsSolutions-APIG3",
                "WAF is an account-level choice with its own cost; set gateway.edge.waf_web_acl_arn to attach one.",
            )

    @property
    def function(self) -> lambda_.Function:
        return self._function

    @property
    def stream_function(self) -> lambda_.Function:
        """The function sized for waiting that serves the stream routes (SSE, MCP, A2A)."""
        return self._stream_function

    @property
    def api(self) -> apigw.RestApi:
        return self._api

    @property
    def log_group(self) -> logs.LogGroup:
        return self._log_group

    @property
    def access_log_group(self) -> logs.LogGroup:
        return self._access_logs

    @property
    def url(self) -> str:
        return self._api.url

    @property
    def edge_auth(self) -> EdgeAuth | None:
        """The edge authorizer under ``api_key`` / ``jwt``, else ``None``."""
        return self._edge_auth

    @property
    def reporter_secret(self) -> secretsmanager.ISecret:
        """The reporter keys' secret (GW-EVT-6)."""
        return self._reporter_secret

    @property
    def domain(self) -> apigw.DomainName | None:
        return self._domain


def _grant_secret_decrypt(key: kms.IKey, reader: lambda_.IFunction) -> iam.Grant:
    """``kms:Decrypt`` on ``key`` for a reader of a secret it encrypts, through Secrets Manager only. In the reader's
    own policy: the secret's ``grant_read`` puts it in the key policy of a created key only, never for an imported
    key (whose policy the stack cannot change)."""
    return iam.Grant.add_to_principal(
        grantee=reader,
        actions=["kms:Decrypt"],
        resource_arns=[key.key_arn],
        conditions={"StringEquals": {"kms:ViaService": f"secretsmanager.{Stack.of(key).region}.amazonaws.com"}},
    )


def _app_auth_reason(auth: GatewayAuth) -> str:
    if auth.mode == "none":
        return "The manifest sets gateway.auth.mode 'none' with allow_unauthenticated: true (GW-AUTH-6)."
    return f"gateway.auth.mode is {auth.mode!r}: the app authenticates every non-public route (GW-AUTH-4, GW-AUTH-5)."
