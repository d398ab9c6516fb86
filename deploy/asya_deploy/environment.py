"""The environment of every function a mesh runs, built in one place for the CDK app and the local mode.

The CDK app sets exactly these variables on the deployed Lambdas; the local mode builds the very same runtimes from
the very same mappings (``ActorConfig.from_env`` / ``GatewayConfig.from_env``), so a variable cannot reach one and
miss the other.

Actor Lambda (:func:`actor_environment`), in this order, later entries winning:

1. the actor's manifest ``env`` map (defaults merged, P-MAN-2), which may not redefine any variable below nor one
   AWS Lambda reserves (:class:`ReservedVariableError` names ``actors.{name}.env.{key}``);
2. ``ASYA_NAMESPACE``, ``ASYA_ACTOR``, ``ASYA_TABLE``, ``ASYA_BUCKET``, ``ASYA_ACTOR_TIMEOUT``,
   ``ASYA_OFFLOAD_THRESHOLD_KB``, ``ASYA_MAX_HOPS`` (the manifest's ``max_hops``, P-HOP-1); ``ASYA_HANDLER``
   for user actors; ``ASYA_SINK_HOOKS`` for x-sink;
   ``ASYA_RESILIENCY`` when the actor has a ``resiliency`` section; ``ASYA_TRACING=true`` when its ``tracing`` is on
   (P-TRACE-3); ``ASYA_FAN_IN`` for a fan-in actor (P-FANIN-1); ``ASYA_FLOWS``, the JSON of the compiled
   flows whose continuations the actor runs (``Manifest.programs_for``, P-FLOW-1), or, when that JSON is over
   ``asya.flowfile.INLINE_LIMIT`` and a ``flows_file`` is given, ``ASYA_FLOWS_FILE`` = ``flows_file`` and
   ``ASYA_FLOW_NAMES`` = those flows' names (the file is :func:`flows_file_text`, shipped by the caller);
   ``ASYA_CODE_DIR`` only when ``code_dir`` is given (the local mode: in Lambda the code asset is
   ``/var/task``, already importable);
3. ``POWERTOOLS_SERVICE_NAME`` = the actor's name (each actor's logs and metrics carry its own ``service``) and
   ``POWERTOOLS_METRICS_NAMESPACE=Asya``.

Gateway and backstop Lambdas (:func:`gateway_environment`): ``ASYA_TABLE``, ``ASYA_BUCKET``, ``ASYA_MANIFEST`` when a
path is given (in Lambda, the manifest JSON inside the asset; the local mode hands the parsed manifest over
in-process), ``POWERTOOLS_SERVICE_NAME`` (``gateway`` or ``backstop``) and ``POWERTOOLS_METRICS_NAMESPACE=Asya``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from asya import naming
from asya.envnames import ENV
from asya.exceptions import AsyaError
from asya.flowfile import INLINE_LIMIT, flows_document
from asya.manifest import DeployedActor, Manifest

__all__ = [
    "LAMBDA_RESERVED_ENV",
    "POWERTOOLS_ENV",
    "ReservedVariableError",
    "actor_environment",
    "capacity_environment",
    "check_env_map",
    "flows_file_text",
    "gateway_environment",
]

#: Variables Lambda sets itself and refuses in a function's configuration.
LAMBDA_RESERVED_ENV: Final = frozenset(
    {
        "_HANDLER",
        "_X_AMZN_TRACE_ID",
        "AWS_ACCESS_KEY",
        "AWS_ACCESS_KEY_ID",
        "AWS_DEFAULT_REGION",
        "AWS_EXECUTION_ENV",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
        "AWS_LAMBDA_FUNCTION_NAME",
        "AWS_LAMBDA_FUNCTION_VERSION",
        "AWS_LAMBDA_INITIALIZATION_TYPE",
        "AWS_LAMBDA_LOG_GROUP_NAME",
        "AWS_LAMBDA_LOG_STREAM_NAME",
        "AWS_LAMBDA_RUNTIME_API",
        "AWS_REGION",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "LAMBDA_RUNTIME_DIR",
        "LAMBDA_TASK_ROOT",
    }
)
_SERVICE_NAME: Final = "POWERTOOLS_SERVICE_NAME"
#: What Lambda accepts as an environment variable name (its API answers a validation error otherwise).
_ENV_NAME_RE: Final = re.compile(r"[a-zA-Z][a-zA-Z0-9_]+")
#: Powertools settings every function gets (EMF metrics land in the ``Asya`` namespace, P-SUMP-2, GW-BACK-6).
POWERTOOLS_ENV: Final[Mapping[str, str]] = {"POWERTOOLS_METRICS_NAMESPACE": "Asya"}
_DEPLOYMENT_ENV: Final = frozenset(ENV.names() | set(POWERTOOLS_ENV) | {_SERVICE_NAME})


class ReservedVariableError(AsyaError, ValueError):
    """An actor's ``env`` map sets a variable the deployment sets itself or AWS Lambda reserves."""


def check_env_map(actor: DeployedActor) -> None:
    """Refuse an ``env`` map that would redefine a deployment variable or a Lambda-reserved one, or use a name Lambda
    refuses."""
    for key in actor.env:
        if key in _DEPLOYMENT_ENV:
            raise ReservedVariableError(
                f"actors.{actor.name}.env.{key}: {key} is set by the deployment; remove it from the env map"
            )
        if key in LAMBDA_RESERVED_ENV:
            raise ReservedVariableError(
                f"actors.{actor.name}.env.{key}: {key} is reserved by AWS Lambda; use another name"
            )
        if _ENV_NAME_RE.fullmatch(key) is None:
            raise ReservedVariableError(
                f"actors.{actor.name}.env.{key}: {key!r} is not a variable name AWS Lambda accepts: use letters, "
                "digits and underscores, starting with a letter"
            )


def actor_environment(
    manifest: Manifest,
    actor: DeployedActor,
    *,
    table: str,
    bucket: str,
    code_dir: Path | None = None,
    flows_file: str | None = None,
) -> dict[str, str]:
    """The environment of ``actor``'s Lambda (see the module docstring)."""
    check_env_map(actor)
    env = dict(actor.env)
    env.update(
        {
            ENV.namespace: manifest.namespace,
            ENV.actor: actor.name,
            ENV.table: table,
            ENV.bucket: bucket,
            ENV.actor_timeout: _number(actor.timeout),
            ENV.offload_threshold_kb: str(manifest.storage.offload_threshold_kb),
            ENV.max_hops: str(manifest.max_hops),
            _SERVICE_NAME: actor.name,
            **POWERTOOLS_ENV,
        }
    )
    if not actor.crew and actor.handler:
        env[ENV.handler] = actor.handler
    if code_dir is not None:
        env[ENV.code_dir] = str(code_dir)
    if actor.name == naming.SINK:
        env[ENV.sink_hooks] = ",".join(manifest.crew.sink_hooks)
        if not manifest.storage.checkpoints.serves_results:
            env[ENV.result_in_checkpoint] = "false"
    if actor.resiliency is not None:
        env[ENV.resiliency] = json.dumps(actor.resiliency.model_dump(mode="json"), separators=(",", ":"))
    if actor.tracing:
        env[ENV.tracing] = "true"
    if actor.fan_in is not None:
        env[ENV.fan_in] = json.dumps(
            {"aggregator": actor.fan_in.aggregator, "key": actor.fan_in.key}, separators=(",", ":")
        )
    programs = manifest.programs_for(actor.name)
    if programs:
        inline = _inline_flows(manifest, actor.name)
        if flows_file is not None and len(inline.encode()) > INLINE_LIMIT:
            env[ENV.flows_file] = flows_file
            env[ENV.flow_names] = ",".join(programs)
        else:
            env[ENV.flows] = inline
    return env


def flows_file_text(manifest: Manifest) -> str | None:
    """The flows file of ``manifest`` (every compiled flow) when some actor's programs are too large to travel
    inline (``asya.flowfile.INLINE_LIMIT``), else ``None``: the deployment ships no file."""
    programs = {name: flow.program for name, flow in manifest.flows.items() if flow.program is not None}
    if any(len(_inline_flows(manifest, actor.name).encode()) > INLINE_LIMIT for actor in manifest.deployed_actors()):
        return flows_document(programs)
    return None


def _inline_flows(manifest: Manifest, actor: str) -> str:
    """The ``ASYA_FLOWS`` value of ``actor``."""
    programs = manifest.programs_for(actor)
    return json.dumps({k: p.to_json() for k, p in programs.items()}, separators=(",", ":"))


def gateway_environment(
    *, table: str, bucket: str, manifest_path: str | None = None, service: str = "gateway"
) -> dict[str, str]:
    """The environment of the gateway Lambda (``service="backstop"``: the backstop Lambda's)."""
    env = {ENV.table: table, ENV.bucket: bucket, _SERVICE_NAME: service, **POWERTOOLS_ENV}
    if manifest_path is not None:
        env[ENV.manifest] = manifest_path
    return env


def capacity_environment(manifest: Manifest) -> dict[str, str]:
    """What the gateway functions get from a declared target (``capacity``, docs/capacity.md): the ``Retry-After`` of
    their 429 and 503 answers and the created-index shard count. Empty without a declared target."""
    from asya.capacity import declared, plan

    if not declared(manifest):
        return {}
    result = plan(manifest)
    return {ENV.retry_after: str(result.retry_after), ENV.index_shards: str(result.settings.index_shards)}


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)
