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
| ``ASYA_RESULT_IN_CHECKPOINT`` | ``false``: x-sink writes a succeeded task's result item rather than naming the
  result's bytes in its checkpoint (set when ``storage.checkpoints`` lets checkpoints go before task records,
  GW-DATA-10) | ``true`` |
| ``ASYA_RESILIENCY`` | JSON of the actor's ``resiliency`` section (P-RES-1, ``asya.resiliency``) | no retries |
| ``ASYA_FAN_IN`` | JSON ``{"aggregator": <name>, "key": <JSON Pointer>}`` of a fan-in actor (P-FANIN-1): the layer
  holds its frames and sends ``N + 1`` slices (``asya.fanin``) | unset: not a fan-in actor |
| ``ASYA_FLOWS`` | JSON ``{flow: program}`` of the compiled flows whose continuations this actor runs
  (P-FLOW-1, ``asya.flows``) | unset: no compiled flow |
| ``ASYA_FLOWS_FILE``, ``ASYA_FLOW_NAMES`` | instead of ``ASYA_FLOWS``: a file of compiled flows (a relative
  name is found on the import path) and the flows of it this actor runs (``asya.flowfile``) | unset |
| ``ASYA_ACCOUNT_ID`` | the AWS account of the queues: queue URLs are built from the SQS endpoint without
  ``GetQueueUrl`` (GW-CREATE-7) | unset: ``GetQueueUrl``, cached |
| ``ASYA_TRACING`` | ``true`` when X-Ray tracing is enabled (manifest ``tracing``; the CDK app then turns on the
  Lambda's active tracing): a new span id per hop (P-TRACE-1), and every send carries the SQS ``AWSTraceHeader`` of
  its record, else the invocation's ``_X_AMZN_TRACE_ID`` (P-TRACE-3, ``asya.xray``) | ``false`` |
| ``ASYA_MAX_HOPS`` | the per-task hop ceiling (P-HOP-1, manifest ``max_hops``, ``asya.hops``) | ``1000`` |
| ``POWERTOOLS_LOG_LEVEL``, else ``LOG_LEVEL`` | level of the runtime's Powertools logger (the same precedence as
  Powertools; read here so the local mode honours an actor's ``env`` map too) | ``INFO`` |

HTTP reporter (P-STAT-18, ``asya.httpreport``), for actors that run outside AWS. These are not deployment
variables (``ENV`` does not list them, so an actor's ``env`` map may set them):

| variable | meaning | default |
|---|---|---|
| ``ASYA_REPORTER`` | ``store`` (write to the task table) or ``http`` (post to the gateway, read pre-flight over
  HTTP, claim no hop) | ``http`` when ``ASYA_GATEWAY_URL`` is set, else ``store`` |
| ``ASYA_GATEWAY_URL`` | default gateway base, an absolute ``http``/``https`` URL with a host; an envelope's
  ``x-asya-gateway-url`` that passes the SSRF guard wins over it | none: only envelopes that name a gateway report |
| ``ASYA_GATEWAY_API_KEY`` | sent as ``X-API-Key`` only to the origin of ``ASYA_GATEWAY_URL`` (needs it): the
  client key of the pre-flight reads | none |
| ``ASYA_GATEWAY_REPORTER_KEY`` | sent as ``X-Asya-Reporter-Key`` with the producer-route posts, only to the origin of
  ``ASYA_GATEWAY_URL`` (needs it): the gateway's reporter key (GW-EVT-1) | none |

``_X_AMZN_TRACE_ID`` is not read here: the Lambda runtime sets it anew for every invocation, so a traced runtime
reads it per record from the environment mapping it is given (``ActorRuntime(environ=...)``, ``asya.xray``).
``ASYA_MANIFEST`` (``ENV.manifest``) is the gateway's: the path of the manifest it serves. ``asya_deploy.environment``
builds these mappings for the CDK app and the local mode.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from asya import naming
from asya.envnames import ENV, LOG_LEVEL_ENV
from asya.exceptions import AsyaError
from asya.flowfile import FlowsFileError, read_flows_file
from asya.flows.ir import Program
from asya.gatewayurl import is_gateway_url
from asya.hops import DEFAULT_MAX_HOPS
from asya.resiliency import ResiliencyError, RetryPolicies

__all__ = ["ENV", "LOG_LEVEL_ENV", "REPORTER_ENV", "ActorConfig", "ConfigError", "FanInConfig", "positive_number"]


class ConfigError(AsyaError, ValueError):
    """A required environment variable is missing or malformed."""


#: The HTTP reporter's variables (P-STAT-18): mode, default gateway base, API key (reads), reporter key (posts).
REPORTER_ENV: Final = ("ASYA_REPORTER", "ASYA_GATEWAY_URL", "ASYA_GATEWAY_API_KEY", "ASYA_GATEWAY_REPORTER_KEY")
_REPORTERS: Final = ("store", "http")


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
    #: x-sink: a succeeded task's result is read from its checkpoint line, not written to a result item (GW-DATA-10)
    result_in_checkpoint: bool = True
    resiliency: RetryPolicies = field(default_factory=RetryPolicies)
    tracing: bool = False
    max_hops: int = DEFAULT_MAX_HOPS
    #: ``""``: Powertools' default (INFO).
    log_level: str = ""
    #: the AWS account of the mesh's queues: queue URLs are then built without ``GetQueueUrl``
    account_id: str = ""
    #: set for a fan-in actor (``ASYA_FAN_IN``)
    fan_in: FanInConfig | None = None
    #: the compiled flows whose continuations this actor runs (``ASYA_FLOWS``, P-FLOW-1)
    flows: Mapping[str, Program] = field(default_factory=dict)
    #: ``store`` or ``http`` (``ASYA_REPORTER``, P-STAT-18)
    reporter: str = "store"
    gateway_url: str = ""
    gateway_api_key: str = field(default="", repr=False)
    gateway_reporter_key: str = field(default="", repr=False)
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
        reporter, gateway_url, gateway_api_key, gateway_reporter_key = _reporter(source)
        return cls(
            namespace=namespace,
            actor=actor,
            handler=source.get(ENV.handler, ""),
            code_dir=source.get(ENV.code_dir, ""),
            table=source.get(ENV.table) or naming.table_name(namespace),
            bucket=source.get(ENV.bucket) or naming.bucket_name(namespace),
            actor_timeout=positive_number(source, ENV.actor_timeout, 60.0),
            offload_threshold_kb=int(positive_number(source, ENV.offload_threshold_kb, 240)),
            sink_hooks=tuple(h.strip() for h in source.get(ENV.sink_hooks, "").split(",") if h.strip()),
            result_in_checkpoint=source.get(ENV.result_in_checkpoint, "").strip().lower() not in ("0", "false", "no"),
            resiliency=_resiliency(source),
            tracing=source.get(ENV.tracing, "").strip().lower() in ("1", "true", "yes"),
            max_hops=_max_hops(source),
            log_level=_log_level(source),
            account_id=source.get(ENV.account_id, "").strip(),
            fan_in=_fan_in(source),
            flows=_flows(source),
            reporter=reporter,
            gateway_url=gateway_url,
            gateway_api_key=gateway_api_key,
            gateway_reporter_key=gateway_reporter_key,
        )


def _reporter(env: Mapping[str, str]) -> tuple[str, str, str, str]:
    """``reporter``, ``gateway_url``, ``gateway_api_key`` and ``gateway_reporter_key`` from :data:`REPORTER_ENV`,
    checked together."""
    mode_name, url_name, key_name, reporter_key_name = REPORTER_ENV
    url = env.get(url_name, "").strip()
    key = env.get(key_name, "")
    reporter_key = env.get(reporter_key_name, "")
    mode = env.get(mode_name, "").strip().lower() or ("http" if url else "store")
    if mode not in _REPORTERS:
        raise ConfigError(f"environment variable {mode_name} must be 'store' or 'http', got {env[mode_name]!r}")
    if url and not is_gateway_url(url):
        raise ConfigError(
            f"environment variable {url_name} must be an absolute http or https URL with a host, got {url!r}"
        )
    if mode == "store" and url:
        raise ConfigError(f"environment variable {url_name} is set but {mode_name} is 'store': set it to 'http'")
    for name, value in ((key_name, key), (reporter_key_name, reporter_key)):
        if value and not url:
            raise ConfigError(
                f"environment variable {name} needs {url_name}: the key is only sent to that gateway's origin"
            )
    return mode, url, key, reporter_key


def _max_hops(env: Mapping[str, str]) -> int:
    value = positive_number(env, ENV.max_hops, float(DEFAULT_MAX_HOPS), unit="a whole number of hops")
    if not value.is_integer():
        raise ConfigError(f"environment variable {ENV.max_hops} must be a whole number of hops, got {value!r}")
    return int(value)


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


def _flows(env: Mapping[str, str]) -> dict[str, Program]:
    raw = env.get(ENV.flows, "").strip()
    file = env.get(ENV.flows_file, "").strip()
    if file:
        if raw:
            raise ConfigError(f"environment variables {ENV.flows} and {ENV.flows_file} are exclusive: set one")
        names = [n.strip() for n in env.get(ENV.flow_names, "").split(",") if n.strip()]
        try:
            return read_flows_file(file, names)
        except FlowsFileError as exc:
            raise ConfigError(f"environment variable {ENV.flows_file}: {exc}") from None
    if not raw:
        return {}
    try:
        data = json.loads(raw)
        return {str(name): Program.from_json(program) for name, program in data.items()}
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ConfigError(f"environment variable {ENV.flows} must be the JSON of compiled flows: {exc}") from None


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


def positive_number(
    env: Mapping[str, str],
    name: str,
    default: float,
    *,
    unit: str = "a number",
    error: type[ConfigError] = ConfigError,
) -> float:
    """``env[name]`` as a finite float above 0, ``default`` when unset or empty; else ``error`` naming the variable
    and its value (``unit`` says what the number counts). Shared with ``asya_gateway.config``."""
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise error(f"environment variable {name} must be {unit}, got {raw!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise error(f"environment variable {name} must be > 0, got {raw!r}")
    return value
