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
| ``ASYA_RESILIENCY`` | JSON of the actor's ``resiliency`` section (section 8) | ``""`` |
| ``ASYA_TRACING`` | ``true`` when X-Ray tracing is enabled: new span id per hop (P-TRACE-1) | ``false`` |
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from asya import naming
from asya.exceptions import AsyaError

__all__ = ["ENV", "ActorConfig", "ConfigError"]


class ConfigError(AsyaError, ValueError):
    """A required environment variable is missing or malformed."""


@dataclass(frozen=True, slots=True)
class _EnvNames:
    namespace: str = "ASYA_NAMESPACE"
    actor: str = "ASYA_ACTOR"
    handler: str = "ASYA_HANDLER"
    code_dir: str = "ASYA_CODE_DIR"
    table: str = "ASYA_TABLE"
    bucket: str = "ASYA_BUCKET"
    actor_timeout: str = "ASYA_ACTOR_TIMEOUT"
    offload_threshold_kb: str = "ASYA_OFFLOAD_THRESHOLD_KB"
    sink_hooks: str = "ASYA_SINK_HOOKS"
    resiliency: str = "ASYA_RESILIENCY"
    tracing: str = "ASYA_TRACING"


#: The environment variable names, in one place.
ENV: Final = _EnvNames()


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
    resiliency_json: str = ""
    tracing: bool = False
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
            resiliency_json=source.get(ENV.resiliency, ""),
            tracing=source.get(ENV.tracing, "").strip().lower() in ("1", "true", "yes"),
        )


def _required(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "")
    if not value:
        raise ConfigError(f"environment variable {name} is required")
    return value


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
