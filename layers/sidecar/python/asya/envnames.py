"""The names of the environment variables a deployment sets on its functions: a contract module.

The CDK app (``asya_cdk``), the local mode and the runtimes' config readers (``asya.config``,
``asya_gateway.config``) all take the names from here, so infrastructure code never imports runtime configuration
to learn a variable's name. This module imports nothing and does nothing at import time.

| variable | set on | meaning |
|---|---|---|
| ``ASYA_NAMESPACE``, ``ASYA_ACTOR`` | actors, crew | mesh namespace and the actor's name |
| ``ASYA_HANDLER`` | user actors | ``module.function`` of the handler (P-ABI-1) |
| ``ASYA_CODE_DIR`` | local mode | directory prepended to ``sys.path`` |
| ``ASYA_TABLE``, ``ASYA_BUCKET`` | every function | task-store table and storage bucket |
| ``ASYA_ACCOUNT_ID`` | every function | the account that owns the mesh's queues, so queue URLs are built without
  ``GetQueueUrl`` (GW-CREATE-7); CloudFormation's ``AWS::AccountId`` in AWS, moto's ``123456789012`` locally |
| ``ASYA_ACTOR_TIMEOUT``, ``ASYA_OFFLOAD_THRESHOLD_KB``, ``ASYA_SINK_HOOKS``, ``ASYA_RESILIENCY``, ``ASYA_TRACING``,
  ``ASYA_MAX_HOPS``, ``ASYA_RECORD_CONCURRENCY`` |
  actors | see ``asya.config`` |
| ``ASYA_MANIFEST`` | gateway, backstop | path of the manifest JSON it serves |
| ``ASYA_INDEX_SHARDS`` | gateway | partitions per day of ``by_created`` it writes and lists (default 8), from
  ``capacity`` (set only when the manifest declares a target) |
| ``ASYA_RETRY_AFTER_SECONDS`` | gateway | ``Retry-After`` of its 429 and 503 answers, from ``capacity`` (set only when
  the manifest declares a target) |
"""

from __future__ import annotations

from typing import Final

__all__ = ["ENV", "LOG_LEVEL_ENV"]


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
    account_id: Final = "ASYA_ACCOUNT_ID"
    fan_in: Final = "ASYA_FAN_IN"
    actor_timeout: Final = "ASYA_ACTOR_TIMEOUT"
    #: records of one batch an async handler runs at the same time (P-PROC-1), the manifest's ``record_concurrency``
    record_concurrency: Final = "ASYA_RECORD_CONCURRENCY"
    offload_threshold_kb: Final = "ASYA_OFFLOAD_THRESHOLD_KB"
    sink_hooks: Final = "ASYA_SINK_HOOKS"
    #: ``false`` when checkpoints may expire or become unreadable before a task record does: x-sink then writes a
    #: succeeded task's result item instead of naming its checkpoint line (GW-DATA-10)
    result_in_checkpoint: Final = "ASYA_RESULT_IN_CHECKPOINT"
    resiliency: Final = "ASYA_RESILIENCY"
    tracing: Final = "ASYA_TRACING"
    manifest: Final = "ASYA_MANIFEST"
    flows: Final = "ASYA_FLOWS"
    flows_file: Final = "ASYA_FLOWS_FILE"
    flow_names: Final = "ASYA_FLOW_NAMES"
    #: the per-task hop ceiling (P-HOP-1), the manifest's ``max_hops``
    max_hops: Final = "ASYA_MAX_HOPS"
    #: the gateway's Secrets Manager secret of reporter keys (GW-EVT-6), set by the CDK app
    reporter_key_secret: Final = "ASYA_REPORTER_KEY_SECRET"
    #: seconds the gateway's 429/503 answers give in ``Retry-After``, derived from ``capacity`` (docs/capacity.md)
    retry_after: Final = "ASYA_RETRY_AFTER_SECONDS"
    #: partitions per day of the created index the gateway writes and lists, derived from ``capacity``
    index_shards: Final = "ASYA_INDEX_SHARDS"
    #: actor -> tasks/s its queue drains, for the gateway's admission check (GW-OVL-7)
    admission_drain_rates: Final = "ASYA_ADMISSION_DRAIN_RATES"

    def names(self) -> frozenset[str]:
        """Every variable name above."""
        return frozenset(v for k, v in vars(_EnvNames).items() if not k.startswith("_") and isinstance(v, str))


#: The environment variable names, in one place.
ENV: Final = _EnvNames()
#: Where the log level comes from, first match wins (Powertools' own order); users may set these in ``env`` maps.
LOG_LEVEL_ENV: Final = ("POWERTOOLS_LOG_LEVEL", "LOG_LEVEL")
