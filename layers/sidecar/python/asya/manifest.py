"""The ``asya.yaml`` manifest model: the single source of truth for the CDK app, the local mode and the gateway.

``load_manifest(path)`` reads YAML, ``parse_manifest(data, base_dir=...)`` validates a mapping. Validation happens
once, before anything is created (P-MAN-1); every error is a :class:`ManifestError` whose message names the field
path (``actors.analyze.timeout``) and the bad value. ``defaults`` applies to every user actor, the actor's own fields
win, ``env`` maps are merged (P-MAN-2). Deployment sizing (Lambda timeout, visibility timeout, P-MAN-4) is computed
here so CDK and the local mode agree.

This module imports pydantic and is not used on the actor Lambda's hot path; actor Lambdas get their configuration
through environment variables (``asya.config``).
"""

from __future__ import annotations

import difflib
import io
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from asya import naming
from asya.exceptions import ManifestError, NamingError
from asya.timeutil import parse_duration

__all__ = [
    "CREW_SETTINGS",
    "ActorSettings",
    "ActorSpec",
    "CrewConfig",
    "DeployedActor",
    "FanIn",
    "Flow",
    "GatewayAuth",
    "GatewayConfig",
    "Manifest",
    "Policy",
    "Resiliency",
    "Rule",
    "StorageConfig",
    "lambda_timeout",
    "load_manifest",
    "parse_manifest",
    "visibility_timeout",
]

HANDLER_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
#: Seconds added to ``batch_size * timeout`` for the Lambda timeout (P-MAN-4).
LAMBDA_SLACK_SECONDS: Final = 10
LAMBDA_MAX_SECONDS: Final = 900
VISIBILITY_MAX_SECONDS: Final = 43200


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
    if value is not None:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
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
                raise ValueError(
                    f"rules[{index}].policy names undeclared policy {rule.policy!r}; "
                    f"declared: {sorted(self.policies) or 'none'}"
                )
        return self


class FanIn(_Model):
    """Fan-in declaration (P-FANIN-1)."""

    aggregator: str | None = None
    key: str

    @model_validator(mode="after")
    def _check(self) -> FanIn:
        if not self.key.startswith("/"):
            raise ValueError(f"key must be a JSON Pointer starting with '/', got {self.key!r}")
        if self.aggregator is not None:
            if not self.aggregator.startswith("x-") or not naming.is_valid_actor_name(self.aggregator):
                raise ValueError(f"aggregator must be a valid name starting with 'x-', got {self.aggregator!r}")
            if self.aggregator in naming.FIXED_CREW:
                raise ValueError(f"aggregator must not be a fixed crew name, got {self.aggregator!r}")
        return self


class ActorSettings(_Model):
    """Settings ``defaults`` may set for every user actor (P-MAN-1)."""

    memory: int = Field(512, ge=128, le=10240, strict=True)
    timeout: Annotated[Duration, Field(ge=1, le=890)] = 60.0
    batch_size: int = Field(1, ge=1, le=10, strict=True)
    max_concurrency: int | None = Field(None, ge=2, le=1000, strict=True)
    max_receive_count: int = Field(5, ge=1, le=1000, strict=True)
    env: dict[str, str] = Field(default_factory=dict)
    resiliency: Resiliency | None = None


class ActorSpec(ActorSettings):
    """A user actor after ``defaults`` were applied."""

    handler: str
    code: str = "functions/"
    fan_in: FanIn | None = None

    @model_validator(mode="after")
    def _check_handler(self) -> ActorSpec:
        if not HANDLER_RE.match(self.handler):
            raise ValueError(f"handler must be 'module.function' or 'module.Class.method', got {self.handler!r}")
        return self


class Flow(_Model):
    route: list[str] = Field(min_length=1)
    description: str = ""
    timeout: Annotated[Duration, Field(ge=1, le=604800)] = 300.0
    input_schema: dict[str, Any] | None = None
    progress: Literal["hops", "detailed", "final"] = "hops"
    mcp: bool = Field(False, strict=True)
    a2a: bool | dict[str, Any] = False


class CrewConfig(_Model):
    sink_hooks: list[str] = Field(default_factory=list)


class GatewayAuth(_Model):
    mode: Literal["iam", "api_key", "jwt", "none"] = "iam"
    api_key_secret: str | None = None
    jwks_url: HttpUrl = None
    issuer: str | None = None
    audience: str | None = None
    allow_unauthenticated: bool = Field(False, strict=True)

    @model_validator(mode="after")
    def _check(self) -> GatewayAuth:
        if self.mode == "api_key" and not self.api_key_secret:
            raise ValueError("api_key_secret is required when mode is 'api_key'")
        if self.mode == "jwt" and not (self.jwks_url and self.issuer and self.audience):
            raise ValueError("jwks_url, issuer and audience are required when mode is 'jwt'")
        return self


class GatewayConfig(_Model):
    auth: GatewayAuth = Field(default_factory=GatewayAuth)
    callback_url: HttpUrl = None
    cors_origins: list[str] = Field(default_factory=list)
    a2a: dict[str, Any] | None = None


class StorageConfig(_Model):
    offload_threshold_kb: int = Field(240, ge=1, le=1024, strict=True)


class DeployedActor(_Model):
    """One actor as deployed: a user actor or a crew actor, with everything CDK and the local mode need."""

    name: str
    crew: bool
    handler: str | None
    code_dir: Path | None
    memory: int
    timeout: float
    batch_size: int
    max_concurrency: int | None
    max_receive_count: int
    env: dict[str, str]
    resiliency: Resiliency | None = None

    @property
    def lambda_timeout(self) -> int:
        return lambda_timeout(self.batch_size, self.timeout)

    @property
    def visibility_timeout(self) -> int:
        return visibility_timeout(self.lambda_timeout)


#: Settings of the built-in crew actors (chosen): small, batched, quick.
CREW_SETTINGS: Final[Mapping[str, Any]] = {
    "memory": 256,
    "timeout": 30.0,
    "batch_size": 10,
    "max_concurrency": None,
    "max_receive_count": 5,
}


def lambda_timeout(batch_size: int, timeout: float) -> int:
    """Deployed Lambda timeout in seconds: ``min(900, batch_size * timeout + 10)`` (P-MAN-4)."""
    return int(min(LAMBDA_MAX_SECONDS, -(-batch_size * timeout // 1) + LAMBDA_SLACK_SECONDS))


def visibility_timeout(lambda_timeout_seconds: int) -> int:
    """Queue visibility timeout: ``min(43200, 6 * Lambda timeout)`` (P-MAN-4)."""
    return min(VISIBILITY_MAX_SECONDS, 6 * lambda_timeout_seconds)


class Manifest(_Model):
    """A validated manifest. ``base_dir`` is the manifest's own directory; actor ``code`` is relative to it."""

    namespace: str
    defaults: ActorSettings = Field(default_factory=ActorSettings)
    actors: dict[str, ActorSpec] = Field(default_factory=dict)
    flows: dict[str, Flow] = Field(default_factory=dict)
    crew: CrewConfig = Field(default_factory=CrewConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    base_dir: Path = Field(default=Path(), exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        defaults = data.get("defaults") or {}
        actors = data.get("actors")
        if not isinstance(defaults, dict) or not isinstance(actors, dict):
            return data
        try:
            ActorSettings.model_validate(defaults)
        except ValidationError:
            return data  # the defaults field reports it once, as defaults.<key>, instead of once per actor
        merged: dict[str, Any] = {}
        for name, spec in actors.items():
            if not isinstance(spec, dict):
                merged[name] = spec
                continue
            combined = {**defaults, **spec}
            if isinstance(defaults.get("env"), dict) and isinstance(spec.get("env"), dict):
                combined["env"] = {**defaults["env"], **spec["env"]}
            merged[name] = combined
        return {**data, "actors": merged}

    @model_validator(mode="after")
    def _check_names_and_references(self) -> Manifest:
        _check(naming.validate_namespace, self.namespace, field="namespace")
        for (
            crew
        ) in naming.CREW_ACTORS:  # every mesh deploys these: a namespace too long for them is the namespace's fault
            try:
                naming.dlq_name(self.namespace, crew)
            except NamingError:
                longest = f"asya-{self.namespace}-{crew}-dlq"
                raise ValueError(
                    f"namespace: {self.namespace!r} is too long: the crew queue {longest!r} would be {len(longest)} "
                    f"characters, over the SQS limit of {naming.MAX_QUEUE_NAME}"
                ) from None
        for name, actor in self.actors.items():
            field = f"actors.{name}"
            _check(naming.validate_actor_name, name, field=field)
            if naming.is_crew(name):
                raise ValueError(f"{field}: actor name {name!r} is reserved for crew (names starting with 'x-')")
            _check(naming.dlq_name, self.namespace, name)
            if actor.fan_in is not None:
                _check(naming.dlq_name, self.namespace, self.aggregator_of(name))
        routable = self.routable_names()
        for name, actor in self.actors.items():
            if actor.resiliency is None:
                continue
            for policy_name, policy in actor.resiliency.policies.items():
                for index, target in enumerate(policy.on_exhausted):
                    self._check_target(
                        target, routable, f"actors.{name}.resiliency.policies.{policy_name}.on_exhausted[{index}]"
                    )
        for index, hook in enumerate(self.crew.sink_hooks):
            self._check_target(hook, routable, f"crew.sink_hooks[{index}]")
        for flow_name, flow in self.flows.items():
            self._check_flow(flow_name, flow, routable)
        return self

    def _check_flow(self, flow_name: str, flow: Flow, routable: frozenset[str]) -> None:
        field = f"flows.{flow_name}"
        _check(naming.validate_flow_name, flow_name, field=field)
        for index, target in enumerate(flow.route):
            self._check_target(target, routable, f"{field}.route[{index}]")
        for index, target in enumerate(flow.route):
            spec = self.actors.get(target)
            if spec is None or spec.fan_in is None:
                continue
            aggregator = self.aggregator_of(target)
            if aggregator not in flow.route[index + 1 :]:
                raise ValueError(
                    f"{field}.route: fan-in actor {target!r} must be followed by its aggregator {aggregator!r}, "
                    f"got {flow.route!r}"
                )
        if flow.input_schema is not None:
            _check_json_schema(flow.input_schema, f"{field}.input_schema")
        if flow.mcp:
            schema = flow.input_schema
            if schema is not None and schema.get("type") != "object":
                raise ValueError(
                    f"{field}.input_schema: an MCP flow needs an object schema (type: object), "
                    f"got type {schema.get('type')!r}"
                )

    @staticmethod
    def _check_target(target: str, routable: frozenset[str], field: str) -> None:
        if target in (naming.SINK, naming.SUMP, naming.RESUME):
            raise ValueError(f"{field}: {target!r} cannot be routed to; it is added by the runtime")
        if target not in routable:
            raise ValueError(f"{field}: unknown actor {target!r}; declared: {sorted(routable)}")

    def aggregator_of(self, actor: str) -> str:
        """The aggregator name of fan-in actor ``actor`` (P-FANIN-1)."""
        spec = self.actors[actor]
        assert spec.fan_in is not None
        return spec.fan_in.aggregator or naming.default_aggregator(actor)

    def crew_targets(self) -> list[tuple[str, str]]:
        """``(field, name)`` of every route entry, ``on_exhausted`` target and sink hook that names crew (x-pause or
        an aggregator), in manifest order. The deployments check these against the crew they can run."""
        found: list[tuple[str, str]] = []
        for flow_name, flow in self.flows.items():
            found += [(f"flows.{flow_name}.route[{i}]", t) for i, t in enumerate(flow.route) if naming.is_crew(t)]
        for name, actor in self.actors.items():
            for policy_name, policy in (actor.resiliency.policies if actor.resiliency else {}).items():
                field = f"actors.{name}.resiliency.policies.{policy_name}.on_exhausted"
                found += [(f"{field}[{i}]", t) for i, t in enumerate(policy.on_exhausted) if naming.is_crew(t)]
        found += [(f"crew.sink_hooks[{i}]", t) for i, t in enumerate(self.crew.sink_hooks) if naming.is_crew(t)]
        return found

    def routable_names(self) -> frozenset[str]:
        """Names a flow route, ``on_exhausted`` or a sink hook may contain (P-MAN-3)."""
        aggregators = {self.aggregator_of(name) for name, spec in self.actors.items() if spec.fan_in is not None}
        return frozenset(self.actors) | naming.ROUTABLE_CREW | aggregators

    def code_dir(self, actor: str) -> Path:
        """Absolute code directory of user actor ``actor``, relative to the manifest's directory."""
        return (self.base_dir / self.actors[actor].code).resolve()

    def missing_code_dir(self) -> str | None:
        """The error of the first user actor whose ``code`` directory does not exist, else ``None``: checked before
        anything is deployed or started, since the handler could not load from it."""
        for name in self.actors:
            directory = self.code_dir(name)
            if not directory.is_dir():
                return (
                    f"actors.{name}.code: directory {directory} does not exist "
                    f"(relative to the manifest's directory {self.base_dir})"
                )
        return None

    def deployed_actors(self) -> list[DeployedActor]:
        """Every actor a deployment creates: user actors in manifest order, then the crew (x-sink, x-sump)."""
        out = [
            DeployedActor(
                name=name,
                crew=False,
                handler=spec.handler,
                code_dir=self.code_dir(name),
                memory=spec.memory,
                timeout=spec.timeout,
                batch_size=spec.batch_size,
                max_concurrency=spec.max_concurrency,
                max_receive_count=spec.max_receive_count,
                env=dict(spec.env),
                resiliency=spec.resiliency,
            )
            for name, spec in self.actors.items()
        ]
        out.extend(
            DeployedActor(name=crew, crew=True, handler=None, code_dir=None, env={}, **CREW_SETTINGS)
            for crew in naming.CREW_ACTORS
        )
        return out

    def queue_name(self, actor: str) -> str:
        return naming.queue_name(self.namespace, actor)

    def dlq_name(self, actor: str) -> str:
        return naming.dlq_name(self.namespace, actor)

    @property
    def table_name(self) -> str:
        return naming.table_name(self.namespace)


def _check(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except NamingError as exc:
        raise ValueError(str(exc)) from None


def _check_json_schema(schema: dict[str, Any], field: str) -> None:
    from jsonschema import exceptions as js_exceptions
    from jsonschema import validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except js_exceptions.SchemaError as exc:
        raise ValueError(f"{field}: invalid JSON Schema: {exc.message}") from None


_BOUNDS: Final = frozenset({"less_than", "less_than_equal", "greater_than", "greater_than_equal"})
_DURATION_FIELDS: Final = frozenset({"timeout", "initial_delay", "max_interval", "max_duration"})


def _format_validation_error(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors(include_url=False):
        path = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            lines.append(f"{path}: unknown key{_did_you_mean(str(error['loc'][-1]))}")
            continue
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "value_error" and not path:
            lines.append(message)
            continue
        bad = error.get("input")
        # a whole object fails a check that names its bad member and value itself: no dump of the object
        whole = error["type"] == "value_error" and isinstance(bad, dict | list)
        shown = "" if error["type"] == "missing" or whole else f" (got {bad!r})"
        if error["type"] in _BOUNDS and isinstance(bad, str) and error["loc"][-1] in _DURATION_FIELDS:
            # a duration string: say what it came to
            try:
                seconds = parse_duration(bad, field=path)
            except ValueError:
                pass
            else:
                message, shown = f"{message} seconds", f" (got {bad!r} = {seconds:g} s)"
        lines.append(f"{path or 'manifest'}: {message}{shown}")
    return "invalid manifest:\n  " + "\n  ".join(lines)


def _did_you_mean(key: str) -> str:
    known = {name for model in _Model.__subclasses__() for name in model.model_fields}
    close = difflib.get_close_matches(key, sorted(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def parse_manifest(data: object, *, base_dir: Path | str = ".", source: str = "manifest") -> Manifest:
    """Validate a manifest mapping. Raises :class:`ManifestError` naming each bad field and value."""
    if data is None:
        raise ManifestError(f"{source}: the manifest is empty")
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: the manifest must be a mapping, got {type(data).__name__}")
    try:
        return Manifest.model_validate({**data, "base_dir": Path(base_dir).resolve()})
    except ValidationError as exc:
        raise ManifestError(f"{source}: {_format_validation_error(exc)}") from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.safe_load`` that refuses a key repeated in one mapping: the last one would silently win, so a second
    ``normalize:`` under ``actors`` would replace the first without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str | int | float | bool) and key in seen:
                mark = key_node.start_mark
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (line {mark.line + 1}, column {mark.column + 1})", mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_manifest(path: Path | str) -> Manifest:
    """Read and validate ``asya.yaml``."""
    manifest_path = Path(path)
    try:
        text = manifest_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ManifestError(f"manifest not found: {manifest_path} (pass --manifest PATH)") from None
    except UnicodeDecodeError as exc:
        raise ManifestError(
            f"{manifest_path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start})"
        ) from None
    except OSError as exc:
        raise ManifestError(f"cannot read manifest {manifest_path}: {exc.strerror}") from None
    try:
        stream = io.StringIO(text)
        stream.name = str(manifest_path)  # YAML errors then name the file, not "<unicode string>"
        data = yaml.load(stream, Loader=_UniqueKeyLoader)
    except yaml.YAMLError as exc:
        raise ManifestError(f"{manifest_path}: invalid YAML: {exc}") from None
    return parse_manifest(data, base_dir=manifest_path.parent, source=str(manifest_path))
