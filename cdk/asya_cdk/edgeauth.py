"""Auth at the edge (GW-EDGE-1..3): the authorizer Lambda and API Gateway authorizers of ``gateway.auth.mode``
``api_key`` / ``jwt``, the reporter keys' secret, and the stage's WAF association and custom domain.

Choices (docs/deploy.md, "Edge auth"):

- ``jwt``: a ``TOKEN`` authorizer on ``Authorization`` (a token that is not ``Bearer <JWT>``-shaped is refused by API
  Gateway's validation expression without invoking anything), cached per token for
  ``gateway.auth.authorizer_cache_seconds`` (default 300). It runs :mod:`asya_gateway.jwtauth`, the app's own check,
  so Cognito user pools (ID or access tokens) and any OIDC issuer work alike, and the claims the app needs for
  scopes and owners are the ones it verified. A Cognito user-pool authorizer is not used: it checks only Cognito, and
  access tokens only against method scopes, which cannot express scopes per flow (the flow is in the body).
- ``api_key``: a ``REQUEST`` authorizer on ``X-API-Key``, cached per key, checking the keys of ``api_key_secret``.
  API Gateway API keys with a usage plan are not used: AWS documents them for metering, not for authorization, they
  would be a second key store next to the secret the app and the local mode read, and a usage plan's quota and
  throttle apply per key, not to the stage a WAF and the stage throttle protect.
- The producer route ``POST /api/v1/mesh/{task_id}/events`` gets its own ``REQUEST`` authorizer on
  ``X-Asya-Reporter-Key`` (same function, separate cache), checking the reporter keys only.

The authorizer function runs the gateway's code asset (handler ``asya_gateway.authorizer.handler``) with its
dependency layers, not the web adapter: 256 MB, arm64, 10 s. The reporter keys live in the Secrets Manager secret
``gateway.edge.reporter_key_secret`` (a name or an ARN) or, unset, one this construct creates (a random 40-character
key), encrypted with the mesh's customer-managed key when there is one; rotate by storing a JSON array
``["old", "new"]``, moving the reporters to the new key, then storing ``"new"`` (every reader caches the secret for
at most 5 minutes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

from asya import publicroutes
from asya.manifest import GatewayAuth, GatewayEdge
from asya.manifest.blocks import ACM_CERTIFICATE_ARN_RE, DOMAIN_NAME_RE, WAF_WEB_ACL_ARN_RE
from asya_cdk.errors import DeploymentError
from asya_cdk.nag import acknowledge

__all__ = [
    "AUTHORIZER_HANDLER",
    "EDGE_MODES",
    "EdgeAuth",
    "attach_domain",
    "attach_waf",
    "check_edge",
    "reporter_secret",
]

AUTHORIZER_HANDLER: Final = "asya_gateway.authorizer.handler"
#: The modes whose credentials an authorizer checks at the edge (``iam`` is API Gateway's own SigV4 check).
EDGE_MODES: Final = ("api_key", "jwt")
#: A bearer token shaped like a JWT; anything else gets 401 from API Gateway without an invocation.
_BEARER_JWT: Final = r"^Bearer [-0-9A-Za-z_]+\.[-0-9A-Za-z_]+\.[-0-9A-Za-z_]*$"


def check_edge(edge: GatewayEdge) -> list[str]:
    """The problems of ``gateway.edge`` set as construct props (the manifest model checks the same)."""
    problems: list[str] = []
    throttles = {"throttle": edge.throttle, **{f"throttle.methods[{k!r}]": v for k, v in edge.throttle.methods.items()}}
    for name, throttle in throttles.items():
        if throttle.rate_limit < 0 or throttle.burst_limit < 0:
            problems.append(
                f"gateway.edge.{name}: rate_limit {throttle.rate_limit} / burst_limit {throttle.burst_limit} "
                "must not be negative"
            )
    arn = edge.waf_web_acl_arn
    if arn is not None and not WAF_WEB_ACL_ARN_RE.match(arn):
        problems.append(
            f"gateway.edge.waf_web_acl_arn: {arn!r} is not a regional WAFv2 web ACL ARN "
            "(arn:aws:wafv2:REGION:ACCOUNT:regional/webacl/NAME/ID)"
        )
    if edge.domain is not None:
        if not DOMAIN_NAME_RE.match(edge.domain.name):
            problems.append(f"gateway.edge.domain.name: {edge.domain.name!r} is not a lower-case DNS name")
        if not ACM_CERTIFICATE_ARN_RE.match(edge.domain.certificate_arn):
            problems.append(
                f"gateway.edge.domain.certificate_arn: {edge.domain.certificate_arn!r} is not an ACM certificate ARN"
            )
    return problems


def reporter_secret(scope: Construct, given: str | None, key: kms.IKey | None = None) -> secretsmanager.ISecret:
    """The reporter keys' secret (GW-EVT-6): the one named by ``given`` (a name or an ARN), else a new one.

    With the mesh's customer-managed ``key`` the created secret is encrypted with it, and a given secret is expected
    to be (docs/deploy.md, "Reporter keys"): either way the secret carries the key, so ``grant_read`` also grants
    ``kms:Decrypt`` on it through Secrets Manager only (``kms:ViaService``)."""
    if given is None:
        secret = secretsmanager.Secret(
            scope,
            "ReporterKeys",
            description="asya reporter keys (X-Asya-Reporter-Key): a key, or a JSON array of keys while rotating",
            encryption_key=key,
            generate_secret_string=secretsmanager.SecretStringGenerator(
                password_length=40, exclude_punctuation=True, include_space=False
            ),
        )
        acknowledge(
            secret,
            "AwsSolutions-SMG4",
            "Reporter keys are shared with external reporters, so rotation is a coordinated manual step: store "
            '["old", "new"], move the reporters, store "new" (docs/deploy.md, "Reporter keys").',
        )
        return secret
    if key is not None:
        arn = given if given.startswith("arn:") else None
        return secretsmanager.Secret.from_secret_attributes(
            scope,
            "ReporterKeys",
            secret_complete_arn=arn,
            secret_partial_arn=None if arn else _partial_secret_arn(scope, given),
            encryption_key=key,
        )
    if given.startswith("arn:"):
        return secretsmanager.Secret.from_secret_complete_arn(scope, "ReporterKeys", given)
    return secretsmanager.Secret.from_secret_name_v2(scope, "ReporterKeys", given)


def _partial_secret_arn(scope: Construct, name: str) -> str:
    """The ARN of secret ``name`` without the random suffix Secrets Manager appends (as ``from_secret_name_v2``)."""
    return Stack.of(scope).format_arn(
        service="secretsmanager", resource="secret", resource_name=name, arn_format=ArnFormat.COLON_RESOURCE_NAME
    )


class EdgeAuth(Construct):
    """The authorizer function and the client and reporter authorizers of one API (module docstring)."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        auth: GatewayAuth,
        code: lambda_.Code,
        runtime: lambda_.Runtime,
        layers: Sequence[lambda_.ILayerVersion],
        environment: Mapping[str, str],
        log_retention: logs.RetentionDays,
    ) -> None:
        if auth.mode not in EDGE_MODES:
            raise DeploymentError(f"EdgeAuth: gateway.auth.mode {auth.mode!r} has no edge authorizer ({EDGE_MODES})")
        super().__init__(scope, id)
        self._log_group = logs.LogGroup(self, "Logs", retention=log_retention)
        self._function = lambda_.Function(
            self,
            "Function",
            description="asya edge authorizer",
            runtime=runtime,
            architecture=lambda_.Architecture.ARM_64,
            handler=AUTHORIZER_HANDLER,
            code=code,
            layers=list(layers),
            memory_size=256,
            timeout=Duration.seconds(10),
            environment=dict(environment),
            log_group=self._log_group,
        )
        ttl = Duration.seconds(auth.authorizer_cache_seconds)
        self._client: apigw.IAuthorizer
        if auth.mode == "jwt":
            self._client = apigw.TokenAuthorizer(
                self,
                "Client",
                handler=self._function,
                identity_source=apigw.IdentitySource.header("Authorization"),
                validation_regex=_BEARER_JWT,
                results_cache_ttl=ttl,
            )
        else:
            self._client = apigw.RequestAuthorizer(
                self,
                "Client",
                handler=self._function,
                identity_sources=[apigw.IdentitySource.header("X-API-Key")],
                results_cache_ttl=ttl,
            )
        self._reporter = apigw.RequestAuthorizer(
            self,
            "Reporter",
            handler=self._function,
            identity_sources=[apigw.IdentitySource.header(publicroutes.REPORTER_KEY_HEADER)],
            results_cache_ttl=ttl,
        )

    @property
    def function(self) -> lambda_.Function:
        return self._function

    @property
    def client(self) -> apigw.IAuthorizer:
        """The authorizer of every non-public method but the producer route."""
        return self._client

    @property
    def reporter(self) -> apigw.IAuthorizer:
        """The producer route's authorizer (``X-Asya-Reporter-Key``)."""
        return self._reporter


def attach_waf(scope: Construct, stage: apigw.Stage, web_acl_arn: str) -> wafv2.CfnWebACLAssociation:
    return wafv2.CfnWebACLAssociation(scope, "WebAcl", resource_arn=stage.stage_arn, web_acl_arn=web_acl_arn)


def attach_domain(api: apigw.RestApi, edge: GatewayEdge) -> apigw.DomainName | None:
    if edge.domain is None:
        return None
    domain = edge.domain
    scope = api.node.scope
    assert isinstance(scope, Construct)
    return api.add_domain_name(
        "Domain",
        domain_name=domain.name,
        certificate=acm.Certificate.from_certificate_arn(scope, "Certificate", domain.certificate_arn),
        base_path=domain.base_path or None,
        endpoint_type=apigw.EndpointType.REGIONAL,
        security_policy=apigw.SecurityPolicy.TLS_1_2,
    )
