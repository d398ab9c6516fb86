"""Runtime configuration of an actor Lambda, read once from an injectable environment into a frozen object.

Environment variables (set by the CDK app in AWS and by the local mode in-process):

| variable | meaning | default |
|---|---|---|
| ``ASYA_NAMESPACE`` | mesh namespace (P-NAME-3) | required |
| ``ASYA_ACTOR`` | this actor's name | required |
| ``ASYA_HANDLER`` | ``module.function`` or ``module.Class.method`` (P-ABI-1); unset for crew | ``""`` |
| ``ASYA_CODE_DIR`` | directory prepended to ``sys.path`` before loading the handler (local mode) | ``""`` |
| ``ASYA_TABLE`` | DynamoDB task-store table | ``asya-{namespace}-tasks`` |
| ``ASYA_BUCKET`` | storage bucket (checkpoints, offloaded payloads) | ``asya-{namespace}-storage`` |
| ``ASYA_ACTOR_TIMEOUT`` | per-call handler timeout in seconds (P-MAN-1) | ``60`` |
| ``ASYA_OFFLOAD_THRESHOLD_KB`` | claim-check threshold (P-LARGE-1) | ``240`` |
| ``ASYA_SINK_HOOKS`` | comma-separated hook actors (x-sink only, P-SINK-6) | ``""`` |
| ``ASYA_RESILIENCY`` | JSON of the actor's ``resiliency`` section (section 8, ``asya.resiliency``) | no retries |
| ``ASYA_FAN_IN`` | JSON ``{"aggregator": <name>, "key": <JSON Pointer>}`` of a fan-in actor (P-FANIN-1): the layer
  holds its frames and sends ``N + 1`` slices (``asya.fanin``) | unset: not a fan-in actor |
| ``ASYA_ACCOUNT_ID`` | the AWS account of the queues: queue URLs are built from the SQS endpoint without
  ``GetQueueUrl`` (GW-CREATE-7) | unset: ``GetQueueUrl``, cached |
| ``ASYA_TRACING`` | ``true`` when X-Ray tracing is enabled (manifest ``tracing``; the CDK app then turns on the
  Lambda's active tracing): a new span id per hop (P-TRACE-1), and every send carries the SQS ``AWSTraceHeader`` of
  its record, else the invocation's ``_X_AMZN_TRACE_ID`` (P-TRACE-3, ``asya.xray``) | ``false`` |
| ``POWERTOOLS_LOG_LEVEL``, else ``LOG_LEVEL`` | level of the runtime's Powertools logger (the same precedence as
  Powertools; read here so the local mode honours an actor's ``env`` map too) | ``INFO`` |

``_X_AMZN_TRACE_ID`` is not read here: the Lambda runtime sets it anew for every invocation, so a traced runtime
reads it per record from the environment mapping it is given (``ActorRuntime(environ=...)``, ``asya.xray``).
``ASYA_MANIFEST`` (``ENV.manifest``) is the gateway's: the path of the manifest it serves. ``asya.environment`` builds
these mappings for the CDK app and the local mode.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from asya import naming
from asya.exceptions import AsyaError
from asya.resiliency import ResiliencyError, RetryPolicies

__all__ = ["ENV", "LOG_LEVEL_ENV", "ActorConfig", "ConfigError", "FanInConfig"]


class ConfigError(AsyaError, ValueError):
    """A required environment variable is missing or malformed."""


class _EnvNames:
    # class constants and no instance attributes (read-only), not a frozen dataclass: generating a dataclass's
    # methods for twelve fields cost ~1 ms of every actor's cold start
    __slots__ = ()

    namespace: Final = "ASYA_NAMESPACE"
    actor: Final = "ASYA_ACTOR"
    handler: Final = "ASYA_HANDLER"
    code_dir: Final = "ASYA_CODE_DIR"
    table: Final = "ASYA_TABLE"
    bucket: Final = "ASYA_BUCKET"
    actor_timeout: Final = "ASYA_ACTOR_TIMEOUT"
    offload_threshold_kb: Final = "ASYA_OFFLOAD_THRESHOLD_KB"
    sink_hooks: Final = "ASYA_SINK_HOOKS"
    resiliency: Final = "ASYA_RESILIENCY"
    tracing: Final = "ASYA_TRACING"
    manifest: Final = "ASYA_MANIFEST"
    account_id: Final = "ASYA_ACCOUNT_ID"
    fan_in: Final = "ASYA_FAN_IN"

    def names(self) -> frozenset[str]:
        """Every variable name above."""
        return frozenset(v for k, v in vars(_EnvNames).items() if not k.startswith("_") and isinstance(v, str))


#: The environment variable names, in one place.
ENV: Final = _EnvNames()
#: Where the log level comes from, first match wins (Powertools' own order); users may set these in ``env`` maps.
LOG_LEVEL_ENV: Final = ("POWERTOOLS_LOG_LEVEL", "LOG_LEVEL")


@dataclass(frozen=True, slots=True)
class FanInConfig:
    """A fan-in actor's declaration (P-FANIN-1): its aggregator and the JSON Pointer the merge writes."""

    aggregator: str
    key: str


@dataclass(frozen=True, slots=True)
class ActorConfig:
    """Everything an actor Lambda reads from its environment."""

    namespace: str
    actor: str
    handler: str = ""
    code_dir: str = ""
    table: str = ""
    bucket: str = ""
    actor_timeout: float = 60.0
    offload_threshold_kb: int = 240
    sink_hooks: tuple[str, ...] = ()
    resiliency: RetryPolicies = field(default_factory=RetryPolicies)
    tracing: bool = False
    #: ``""``: Powertools' default (INFO).
    log_level: str = ""
    #: the AWS account of the mesh's queues: queue URLs are then built without ``GetQueueUrl``
    account_id: str = ""
    #: set for a fan-in actor (``ASYA_FAN_IN``)
    fan_in: FanInConfig | None = None
    extra: Mapping[str, str] = field(default_factory=dict)

    @property
    def queue_name(self) -> str:
        return naming.queue_name(self.namespace, self.actor)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ActorConfig:
        """Read the configuration from ``env`` (default: ``os.environ``)."""
        source = os.environ if env is None else env
        namespace = _required(source, ENV.namespace)
        actor = _required(source, ENV.actor)
        try:
            naming.validate_namespace(namespace, field=ENV.namespace)
            naming.validate_actor_name(actor, field=ENV.actor)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return cls(
            namespace=namespace,
            actor=actor,
            handler=source.get(ENV.handler, ""),
            code_dir=source.get(ENV.code_dir, ""),
            table=source.get(ENV.table) or naming.table_name(namespace),
            bucket=source.get(ENV.bucket) or naming.bucket_name(namespace),
            actor_timeout=_number(source, ENV.actor_timeout, 60.0),
            offload_threshold_kb=int(_number(source, ENV.offload_threshold_kb, 240)),
            sink_hooks=tuple(h.strip() for h in source.get(ENV.sink_hooks, "").split(",") if h.strip()),
            resiliency=_resiliency(source),
            tracing=source.get(ENV.tracing, "").strip().lower() in ("1", "true", "yes"),
            log_level=_log_level(source),
            account_id=source.get(ENV.account_id, "").strip(),
            fan_in=_fan_in(source),
        )


def _log_level(env: Mapping[str, str]) -> str:
    for name in LOG_LEVEL_ENV:
        raw = env.get(name, "").strip()
        if raw:
            # Powertools refuses an unknown level when the Logger is built: fail here, naming the variable.
            if not isinstance(logging.getLevelName(raw.upper()), int):
                raise ConfigError(
                    f"environment variable {name} must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got {raw!r}"
                )
            return raw.upper()
    return ""


def _fan_in(env: Mapping[str, str]) -> FanInConfig | None:
    raw = env.get(ENV.fan_in, "").strip()
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        raise ConfigError(f"environment variable {ENV.fan_in} must be JSON, got {raw!r}") from None
    aggregator = data.get("aggregator") if isinstance(data, dict) else None
    key = data.get("key") if isinstance(data, dict) else None
    if not isinstance(aggregator, str) or not naming.is_aggregator(aggregator):
        raise ConfigError(
            f"environment variable {ENV.fan_in}: aggregator must be an 'x-' crew name, got {aggregator!r}"
        )
    if not isinstance(key, str) or not key.startswith("/"):
        raise ConfigError(
            f"environment variable {ENV.fan_in}: key must be a JSON Pointer starting with '/', got {key!r}"
        )
    return FanInConfig(aggregator=aggregator, key=key)


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise ConfigError(f"environment variable {name} is required")
    return value


def _resiliency(env: Mapping[str, str]) -> RetryPolicies:
    try:
        return RetryPolicies.parse(env.get(ENV.resiliency, ""))
    except ResiliencyError as exc:
        raise ConfigError(f"environment variable {ENV.resiliency} is invalid: {exc}") from None


def _number(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"environment variable {name} must be a number, got {raw!r}") from None
    if value <= 0:
        raise ConfigError(f"environment variable {name} must be > 0, got {raw!r}")
    return value
