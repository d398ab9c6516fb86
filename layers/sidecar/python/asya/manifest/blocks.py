"""The blocks of an ``asya.yaml`` manifest: actor settings, retry policies, flows, crew, gateway and storage, plus
the deployment sizing rules (P-MAN-4). :mod:`asya.manifest.model` assembles them into the whole manifest.

A check that spans several members of one block raises :class:`MemberError` naming the member it blames, so the
error reads ``actors.a.resiliency.rules[0].policy: ...`` rather than blaming the whole block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from asya import naming
from asya.flows.ir import DEFAULT_MAX_PAUSE, Program
from asya.gatewayurl import is_gateway_url
from asya.manifest.dataplane import BackupConfig, CheckpointLifecycle, VpcConfig
from asya.manifest.problems import MemberError
from asya.timeutil import parse_duration

__all__ = [
    "CREW_SETTINGS",
    "DEFAULT_ACCOUNT_CONCURRENCY",
    "DEFAULT_ACTOR_STACKS",
    "HISTORY_BODY_DEFAULT",
    "HISTORY_BODY_MAX",
    "HISTORY_BODY_MIN",
    "LOG_RETENTION_DAYS",
    "MAX_ACTOR_STACKS",
    "MAX_MAX_CONCURRENCY",
    "MAX_STACK_ACTORS",
    "MIN_MAX_CONCURRENCY",
    "UNRESERVED_CONCURRENCY",
    "A2ASkillOptions",
    "ActorSettings",
    "ActorSpec",
    "CrewConfig",
    "DeployedActor",
    "DeploymentConfig",
    "FanIn",
    "Flow",
    "GatewayA2A",
    "GatewayAuth",
    "GatewayConfig",
    "GatewayEdge",
    "MemberError",
    "ObservabilityConfig",
    "Policy",
    "Resiliency",
    "Rule",
    "StorageConfig",
    "lambda_timeout",
    "visibility_timeout",
]


HANDLER_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
#: Seconds added to the batch's handler time for the Lambda timeout (P-MAN-4).
LAMBDA_SLACK_SECONDS: Final = 10
LAMBDA_MAX_SECONDS: Final = 900
VISIBILITY_MAX_SECONDS: Final = 43200
#: Seconds a queue's visibility timeout adds to its function's timeout (P-MAN-4): the window in which Lambda's poller
#: retries an invocation that was throttled before the batch goes back to the queue (chosen: one minute, not AWS's
#: 6 x the timeout, which kept a throttled batch invisible for up to an hour, past any flow's deadline).
THROTTLE_RETRY_SECONDS: Final = 60
#: The SQS event source's ``MaximumConcurrency`` range (AWS's).
MIN_MAX_CONCURRENCY: Final = 2
MAX_MAX_CONCURRENCY: Final = 1000
#: Lambda's default concurrency quota of an account, and what AWS keeps unreserved in every account.
DEFAULT_ACCOUNT_CONCURRENCY: Final = 1000
UNRESERVED_CONCURRENCY: Final = 100
#: The run history's body cut (``history_body_bytes``, P-HIST-1): its default and bounds.
HISTORY_BODY_DEFAULT: Final = 4096
HISTORY_BODY_MIN: Final = 64
HISTORY_BODY_MAX: Final = 262144


def _duration(field_name: str) -> BeforeValidator:
    def convert(value: object) -> object:
        try:
            return parse_duration(value, field=field_name)
        except ValueError as exc:
            # pydantic prefixes the field path; keep only the reason.
            raise ValueError(str(exc).split(": ", 1)[1]) from None

    return BeforeValidator(convert)


Duration = Annotated[float, _duration("duration")]


def _absolute_http_url(value: str | None) -> str | None:
    # the same rule as the HTTP reporter's for x-asya-gateway-url (asya.gatewayurl): a host, no user info
    if value is not None and not is_gateway_url(value):
        raise ValueError("must be an absolute http(s) URL, such as https://example.com/hook")
    return value


HttpUrl = Annotated[str | None, AfterValidator(_absolute_http_url)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Policy(_Model):
    """A retry policy (P-RES-1)."""

    max_attempts: int = Field(3, ge=1, strict=True)
    backoff: Literal["constant", "linear", "exponential"] = "exponential"
    initial_delay: Annotated[Duration, Field(ge=0)] = 1.0
    max_interval: Annotated[Duration, Field(ge=0)] = 300.0
    max_duration: Annotated[Duration, Field(ge=0)] = 0.0
    jitter: bool = Field(True, strict=True)
    on_exhausted: list[str] = Field(default_factory=list)


class Rule(_Model):
    """Maps exception patterns to a policy (P-RES-2)."""

    errors: list[str] = Field(min_length=1)
    policy: str


class Resiliency(_Model):
    policies: dict[str, Policy] = Field(default_factory=dict)
    rules: list[Rule] = Field(default_factory=list)

    @model_validator(mode="after")
    def _rules_name_declared_policies(self) -> Resiliency:
        for index, rule in enumerate(self.rules):
            if rule.policy not in self.policies:
                raise MemberError(
                    f"rules[{index}].policy",
                    f"names undeclared policy {rule.policy!r}; declared: {sorted(self.policies) or 'none'}",
                )
        return self


class FanIn(_Model):
    """Fan-in declaration (P-FANIN-1)."""

    aggregator: str | None = None
    key: str

    @field_validator("key")
    @classmethod
    def _check_key(cls, key: str) -> str:
        if not key.startswith("/"):
            raise ValueError("must be a JSON Pointer starting with '/'")
        return key

    @field_validator("aggregator")
    @classmethod
    def _check_aggregator(cls, aggregator: str | None) -> str | None:
        if aggregator is not None:
            if not aggregator.startswith("x-") or not naming.is_valid_actor_name(aggregator):
                raise ValueError("must be a valid actor name starting with 'x-'")
            if aggregator in naming.FIXED_CREW:
                raise ValueError(f"must not be a fixed crew name ({', '.join(sorted(naming.FIXED_CREW))})")
        return aggregator


class ActorSettings(_Model):
    """Settings ``defaults`` may set for every user actor (P-MAN-1)."""

    memory: int = Field(512, ge=128, le=10240, strict=True)
    timeout: Annotated[Duration, Field(ge=1, le=890)] = 60.0
    batch_size: int = Field(1, ge=1, le=10, strict=True)
    #: The SQS event source's ``ScalingConfig.MaximumConcurrency`` (AWS's range 2..1000); unset: no cap.
    max_concurrency: int | None = Field(None, ge=MIN_MAX_CONCURRENCY, le=MAX_MAX_CONCURRENCY, strict=True)
    #: Lambda reserved concurrency of the actor's function; unset: none (it shares the account's unreserved pool).
    reserved_concurrency: int | None = Field(None, ge=1, strict=True)
    max_receive_count: int = Field(5, ge=1, le=1000, strict=True)
    #: How many records of one batch an async handler runs at the same time (P-PROC-1); 1: one after another.
    #: Over 1 needs an ``async def`` or async generator handler (a sync handler then fails to load, P-ABI-2) and at
    #: most ``batch_size``; the Lambda timeout shrinks with it (P-MAN-4).
    record_concurrency: int = Field(1, ge=1, le=10, strict=True)
    env: dict[str, str] = Field(default_factory=dict)
    resiliency: Resiliency | None = None
    #: AWS X-Ray active tracing of the actor's Lambda and ``AWSTraceHeader`` on its sends (P-TRACE-3); off by
    #: default, X-Ray is billed per trace. ``defaults.tracing`` also decides the crew's (``Manifest.deployed_actors``),
    #: the gateway's, the backstop's and the API stage's.
    tracing: bool = Field(False, strict=True)

    @model_validator(mode="after")
    def _concurrency(self) -> ActorSettings:
        if self.record_concurrency > self.batch_size:
            raise MemberError(
                "record_concurrency",
                f"{self.record_concurrency} is over batch_size {self.batch_size}: an invocation holds at most "
                "batch_size records; lower record_concurrency or raise batch_size",
            )
        cap, reserved = self.max_concurrency, self.reserved_concurrency
        if cap is not None and reserved is not None and cap > reserved:
            raise MemberError(
                "max_concurrency",
                f"{cap} is over reserved_concurrency {reserved}: the event source would be throttled; lower "
                "max_concurrency to at most reserved_concurrency, or raise reserved_concurrency",
            )
        return self


class ActorSpec(ActorSettings):
    """A user actor after ``defaults`` were applied."""

    handler: str
    code: str = "functions/"
    fan_in: FanIn | None = None

    @field_validator("handler")
    @classmethod
    def _check_handler(cls, handler: str) -> str:
        if not HANDLER_RE.match(handler):
            raise ValueError("must be 'module.function' or 'module.Class.method'")
        return handler


class A2ASkillOptions(_Model):
    """``flows.{name}.a2a`` as an object (GW-A2A-2): the skill's card entries; ``tags`` default ``[<flow name>]``."""

    tags: list[str] | None = Field(None, min_length=1)
    examples: list[str] | None = None
    input_modes: list[str] | None = None
    output_modes: list[str] | None = None


def _a2a_option(value: object) -> object:
    """``a2a: true`` is a skill with the default entries, ``false``/absent is none, an object sets the entries."""
    if value is True:
        return {}
    if value is False or value is None:
        return None
    if isinstance(value, dict):
        return value
    raise ValueError("must be true, false or an object (tags, examples, input_modes, output_modes)")


class Flow(_Model):
    """A flow: a static ``route``, or ``source``, a Python flow file (docs/flows.md) that the manifest compiles once
    into :attr:`program` (P-FLOW-1); its ``route`` is then the program's initial route."""

    route: list[str] = Field(default_factory=list)
    #: a flow file relative to the manifest's directory, compiled by ``asya.flows`` (exclusive with ``route``)
    source: str | None = None
    #: the compiled program's JSON, filled by validation; a manifest dumped for a deployment (the gateway's
    #: ``manifest.json``) carries it, so loading that dump needs no flow file and compiles nothing
    compiled: dict[str, Any] | None = None
    description: str = ""
    timeout: Annotated[Duration, Field(ge=1, le=604800)] = 300.0
    #: (P-WAIT-1) the longest any pause of a compiled flow waits before it raises ``TimeoutError`` in the flow;
    #: ``null`` lets a pause without ``timeout=`` wait until resumed
    max_pause: Annotated[Duration, Field(ge=1)] | None = float(DEFAULT_MAX_PAUSE)
    input_schema: dict[str, Any] | None = None
    progress: Literal["hops", "detailed", "final"] = "hops"
    #: (P-HIST-1) ``steps``: every hop of every task of the flow is recorded in S3 (``asya.history``)
    history: Literal["off", "steps"] = "off"
    #: (P-HIST-1) recorded input and output bodies over this size are cut (the whole body stays by reference
    #: when it was offloaded)
    history_body_bytes: int = Field(HISTORY_BODY_DEFAULT, ge=HISTORY_BODY_MIN, le=HISTORY_BODY_MAX, strict=True)
    mcp: bool = Field(False, strict=True)
    #: ``None``: not an A2A skill (GW-A2A-2).
    a2a: Annotated[A2ASkillOptions | None, BeforeValidator(_a2a_option)] = None
    _program: Program | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _route_or_source(self) -> Flow:
        if self.source is None and not self.route:
            raise MemberError("route", "give a route of at least one actor, or a source (a flow file)")
        if self.source is not None and self.route and self.compiled is None:
            raise MemberError("source", f"{self.source!r} and a route are exclusive: the route is compiled from it")
        return self

    @property
    def program(self) -> Program | None:
        """The compiled flow of ``source`` (``None`` for a static route), set once by the manifest's validation."""
        return self._program


class CrewConfig(_Model):
    sink_hooks: list[str] = Field(default_factory=list)


_LOOPBACK_HOSTS: Final = frozenset({"127.0.0.1", "localhost", "::1"})


def _matching(pattern: re.Pattern[str], example: str) -> AfterValidator:
    def check(value: str | None) -> str | None:
        if value is not None and not pattern.match(value):
            raise ValueError(f"{value!r} is not an ARN of the form {example}")
        return value

    return AfterValidator(check)


class GatewayAuth(_Model):
    mode: Literal["iam", "api_key", "jwt", "none"] = "iam"
    api_key_secret: str | None = None
    jwks_url: HttpUrl = None
    issuer: str | None = None
    audience: str | None = None
    allow_unauthenticated: bool = Field(False, strict=True)
    #: How long API Gateway caches the edge authorizer's answer per credential (GW-EDGE-1); 0 turns caching off.
    authorizer_cache_seconds: int = Field(300, ge=0, le=3600, strict=True)
    #: ``jwt`` only: the scopes a token must grant to create a task of each flow (GW-EDGE-4), by flow name.
    flow_scopes: dict[str, list[Annotated[str, Field(min_length=1)]]] = Field(default_factory=dict)
    #: ``jwt`` only: a task is visible to the subject (``sub``) that created it only (GW-EDGE-5).
    owner_only: bool = Field(False, strict=True)

    @model_validator(mode="after")
    def _check(self) -> GatewayAuth:
        if self.mode == "api_key" and not self.api_key_secret:
            raise MemberError("api_key_secret", "required when mode is 'api_key'")
        if self.mode != "jwt":
            for member in ("flow_scopes", "owner_only"):
                if getattr(self, member):
                    raise MemberError(member, f"needs mode 'jwt' (claims come from the token), not {self.mode!r}")
        if self.mode == "jwt":
            for member in ("jwks_url", "issuer", "audience"):
                value = getattr(self, member)
                if not value or not value.strip():
                    raise MemberError(member, "required when mode is 'jwt' (with jwks_url, issuer and audience)")
            parts = urlsplit(self.jwks_url or "")
            if parts.scheme != "https" and parts.hostname not in _LOOPBACK_HOSTS:
                raise MemberError(
                    "jwks_url", f"{self.jwks_url!r} must be an https URL (http only on loopback, for the local mode)"
                )
        return self


class GatewayA2A(_Model):
    """``gateway.a2a`` (GW-A2A-2): the agent card's values. ``public_url`` is the gateway's external base URL
    (the card's ``url`` is it plus ``/a2a/``; default: the request's base URL)."""

    name: str = Field("Asya Gateway", min_length=1)
    description: str = "Asya actor mesh on AWS"
    version: str = Field("1.0.0", min_length=1)
    public_url: HttpUrl = None
    provider_organization: str | None = None
    provider_url: HttpUrl = None


WAF_WEB_ACL_ARN_RE: Final = re.compile(
    r"^arn:aws[a-z-]*:wafv2:[a-z0-9-]+:\d{12}:regional/webacl/[A-Za-z0-9_-]+/[a-f0-9-]+$"
)
ACM_CERTIFICATE_ARN_RE: Final = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[A-Za-z0-9-]+$")
DOMAIN_NAME_RE: Final = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")
#: A method of the API as the stage's method settings name it: ``/api/v1/mesh/POST``, ``/*/*`` for every one.
METHOD_KEY_RE: Final = re.compile(r"^(/\*|(/[A-Za-z0-9_.{}+-]+)+|/)/(\*|GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS|ANY)$")


class Throttle(_Model):
    """A steady rate (requests per second) and a burst, as API Gateway throttles a stage or a method."""

    rate_limit: float = Field(100, ge=0)
    burst_limit: int = Field(200, ge=0, strict=True)


class EdgeThrottle(Throttle):
    #: Per-method limits below the stage's, keyed ``/resource/path/METHOD`` (``/api/v1/mesh/POST``).
    methods: dict[str, Throttle] = Field(default_factory=dict)

    @field_validator("methods")
    @classmethod
    def _keys(cls, methods: dict[str, Throttle]) -> dict[str, Throttle]:
        for key in methods:
            if not METHOD_KEY_RE.match(key):
                raise ValueError(
                    f"{key!r} is not a method key such as '/api/v1/mesh/POST' (resource path, then method)"
                )
        return methods


def _domain(value: str) -> str:
    if not DOMAIN_NAME_RE.match(value):
        raise ValueError(f"{value!r} is not a lower-case DNS name such as api.example.com")
    return value


class EdgeDomain(_Model):
    """A custom domain name for the API (a regional endpoint, TLS 1.2), mapped at ``base_path``."""

    name: Annotated[str, AfterValidator(_domain)]
    certificate_arn: Annotated[
        str, _matching(ACM_CERTIFICATE_ARN_RE, "arn:aws:acm:REGION:ACCOUNT:certificate/ID (in the API's region)")
    ]
    base_path: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]*$")] = ""


class GatewayEdge(_Model):
    """``gateway.edge``: what API Gateway does before a request reaches the gateway (docs/deploy.md, "Edge")."""

    throttle: EdgeThrottle = Field(default_factory=EdgeThrottle)
    #: A regional WAFv2 web ACL to associate with the API's stage.
    waf_web_acl_arn: Annotated[
        str | None, _matching(WAF_WEB_ACL_ARN_RE, "arn:aws:wafv2:REGION:ACCOUNT:regional/webacl/NAME/ID")
    ] = None
    domain: EdgeDomain | None = None
    #: The Secrets Manager secret (name or ARN) of the reporter keys (GW-EVT-6); unset: the CDK app creates one.
    reporter_key_secret: str | None = Field(None, min_length=1)


class GatewayConfig(_Model):
    auth: GatewayAuth = Field(default_factory=GatewayAuth)
    edge: GatewayEdge = Field(default_factory=GatewayEdge)
    callback_url: HttpUrl = None
    cors_origins: list[str] = Field(default_factory=list)
    a2a: GatewayA2A = Field(default_factory=GatewayA2A)
    #: Lambda reserved concurrency of the stream function (SSE, MCP, A2A), so watchers cannot take the actors'
    #: concurrency; unset (default): none, since a reservation fails the deploy in an account without room for it.
    stream_reserved_concurrency: int | None = Field(None, ge=1, strict=True)


KMS_KEY_ARN_RE: Final = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+$")
BUCKET_NAME_RE: Final = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
#: Deployed actors the mesh's own stack holds under ``placement: stack`` (500 resources, 11 per actor, ~90 shared; the
#: actors' function alarms live in the nested stack OperatorAlarms).
MAX_STACK_ACTORS: Final = 36
DEFAULT_ACTOR_STACKS: Final = 8
#: Each nested stack is one resource of the mesh's stack, which holds ~60 of its own.
MAX_ACTOR_STACKS: Final = 100
SNS_TOPIC_ARN_RE: Final = re.compile(r"^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,256}$")
#: The retention periods CloudWatch Logs accepts, in days.
LOG_RETENTION_DAYS: Final = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557)


class StorageConfig(_Model):
    offload_threshold_kb: int = Field(240, ge=1, le=1024, strict=True)
    #: A customer-managed KMS key for the table and the queues; unset: the AWS-owned keys (no KMS charge).
    kms_key_arn: Annotated[
        str | None, _matching(KMS_KEY_ARN_RE, "arn:aws:kms:REGION:ACCOUNT:key/KEY-ID (a key ARN, not an alias)")
    ] = None
    #: Create a customer-managed key for the mesh (rotated yearly, retained) instead of naming one.
    create_kms_key: bool = Field(False, strict=True)
    #: Keep old versions of overwritten or deleted objects, for ``noncurrent_expire_days`` days.
    versioning: bool = Field(False, strict=True)
    noncurrent_expire_days: int = Field(30, ge=1, strict=True)
    checkpoints: CheckpointLifecycle = Field(default_factory=CheckpointLifecycle)
    #: An AWS Backup plan for the task table; unset: point-in-time recovery only.
    backup: BackupConfig | None = None

    @model_validator(mode="after")
    def _one_key(self) -> StorageConfig:
        if self.create_kms_key and self.kms_key_arn is not None:
            raise MemberError("create_kms_key", "true together with kms_key_arn; name a key or create one, not both")
        return self


class DeploymentConfig(_Model):
    """How the mesh is deployed to AWS (read by the CDK app only)."""

    #: The Lambda Python runtime of every function and layer; unset: the CDK app's (context ``asya:pythonVersion``,
    #: else 3.14). When it matches the interpreter that synthesizes, the layers ship compiled bytecode.
    python_version: Literal["3.11", "3.12", "3.13", "3.14"] | None = None
    #: Where the actors' resources live (docs/deploy.md, "Placement"): ``stack``, the mesh's own stack (at most
    #: :data:`MAX_STACK_ACTORS` deployed actors); ``nested``, ``actor_stacks`` nested stacks, each actor in the one its
    #: name hashes to. Either rule keeps an actor where it is when others are added or removed; switching rule, or
    #: changing ``actor_stacks``, moves actors and so needs a fresh deployment.
    placement: Literal["stack", "nested"] = "stack"
    #: Number of nested stacks under ``placement: nested`` (ignored under ``stack``: a rendered manifest carries every
    #: field); fixed from the first deployment.
    actor_stacks: int = Field(DEFAULT_ACTOR_STACKS, ge=1, le=MAX_ACTOR_STACKS, strict=True)
    #: Keep the task table and the bucket when the stack is deleted (and protect the table from deletion).
    retain_data: bool = Field(True, strict=True)
    #: Use the table ``asya-{namespace}-tasks`` a deleted stack retained instead of creating it.
    existing_table: bool = Field(False, strict=True)
    #: Use this bucket (one a deleted stack retained: its ``BucketName`` output) instead of creating one.
    existing_bucket: str | None = None
    #: The VPC every function runs in (docs/deploy.md, "VPC"); unset: no VPC.
    vpc: VpcConfig | None = None
    #: The account's Lambda concurrency quota (Service Quotas, "Concurrent executions"): the mesh's reserved
    #: concurrency must leave :data:`UNRESERVED_CONCURRENCY` of it unreserved, checked at synthesis.
    account_concurrency: int = Field(DEFAULT_ACCOUNT_CONCURRENCY, ge=1, strict=True)
    #: Quotas the account has raised (Service Quotas), by the capacity model's names (``asya/capacity/quotas.toml``,
    #: docs/capacity.md); unset: AWS's defaults. ``lambda_concurrency`` defaults to ``account_concurrency``.
    quotas: dict[str, float] = Field(default_factory=dict)

    @field_validator("quotas")
    @classmethod
    def _quotas(cls, value: dict[str, float]) -> dict[str, float]:
        from asya.capacity.quotas import load_quotas

        load_quotas(value)  # unknown names, hard limits and non-positive values are refused here
        return value

    @field_validator("existing_bucket")
    @classmethod
    def _bucket(cls, value: str | None) -> str | None:
        if value is not None and not BUCKET_NAME_RE.match(value):
            raise ValueError(f"{value!r} is not an S3 bucket name (3-63 of a-z, 0-9, '.', '-'; the BucketName output)")
        return value


class ObservabilityConfig(_Model):
    """The deployed mesh's dashboard, alarms and logs."""

    log_retention_days: int = Field(30, strict=True)
    #: Alarms notify this SNS topic; unset: the alarms exist with no action.
    alarm_topic_arn: Annotated[str | None, _matching(SNS_TOPIC_ARN_RE, "arn:aws:sns:REGION:ACCOUNT:NAME")] = None
    dashboard: bool = Field(True, strict=True)

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"{value!r} is not a CloudWatch Logs retention; use one of {list(LOG_RETENTION_DAYS)}")
        return value


class DeployedActor(_Model):
    """One actor as deployed: a user actor or a crew actor, with everything CDK and the local mode need."""

    name: str
    crew: bool
    handler: str | None
    code_dir: Path | None
    memory: int
    timeout: float
    batch_size: int
    max_concurrency: int | None = Field(None, ge=MIN_MAX_CONCURRENCY, le=MAX_MAX_CONCURRENCY)
    reserved_concurrency: int | None = Field(None, ge=1)
    max_receive_count: int
    env: dict[str, str]
    #: records of one batch run at the same time (P-PROC-1); 1 for the crew
    record_concurrency: int = Field(1, ge=1, le=10)
    resiliency: Resiliency | None = None
    tracing: bool = False
    #: a fan-in actor's declaration with its aggregator name resolved (P-FANIN-1); ``None`` otherwise
    fan_in: FanIn | None = None

    @property
    def lambda_timeout(self) -> int:
        return lambda_timeout(self.batch_size, self.timeout, self.record_concurrency)

    @property
    def visibility_timeout(self) -> int:
        return visibility_timeout(self.lambda_timeout)


#: Settings of the built-in crew actors (chosen): small, batched, quick.
CREW_SETTINGS: Final[Mapping[str, Any]] = {
    "memory": 256,
    "timeout": 30.0,
    "batch_size": 10,
    "max_concurrency": None,
    "reserved_concurrency": None,
    "max_receive_count": 5,
}


def lambda_timeout(batch_size: int, timeout: float, record_concurrency: int = 1) -> int:
    """Deployed Lambda timeout in seconds: ``min(900, ceil(batch_size / record_concurrency) * timeout + 10)``
    (P-MAN-4): the batch runs in that many rounds of concurrent records, each at most one handler timeout."""
    rounds = -(-batch_size // max(1, record_concurrency))
    return int(min(LAMBDA_MAX_SECONDS, -(-rounds * timeout // 1) + LAMBDA_SLACK_SECONDS))


def visibility_timeout(lambda_timeout_seconds: int) -> int:
    """Queue visibility timeout: ``min(43200, Lambda timeout + 60)`` (P-MAN-4): the longest any batch stays
    invisible, a throttled one included."""
    return min(VISIBILITY_MAX_SECONDS, lambda_timeout_seconds + THROTTLE_RETRY_SECONDS)
