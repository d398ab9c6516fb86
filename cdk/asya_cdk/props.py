"""The caller's ``xxx_props`` of :class:`~asya_cdk.mesh.AsyaMesh`, checked and turned into keyword arguments.

Three tiers, in this order (AWS Solutions Constructs' ``consolidateProps``, made stricter): the mesh's defaults, the
caller's props, the fields the mesh owns. A caller's props setting a field the manifest or the naming rules own is
an error naming the field; every such error of every hook is collected and raised once, before any construct is
created (:func:`check_props`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["OWNED_FIELDS", "check_props", "given_fields"]

#: Per hook, the fields the mesh owns and why.
OWNED_FIELDS: Final[Mapping[str, Mapping[str, str]]] = {
    "queue_props": {
        "queue_name": "queue names follow P-NAME-4",
        "visibility_timeout": "the manifest's timeout and batch_size size it (P-MAN-4)",
        "dead_letter_queue": "every queue has its DLQ; the manifest's max_receive_count sets the count",
        "encryption": "set by storage.kms_key_arn in the manifest",
        "encryption_master_key": "set by storage.kms_key_arn in the manifest",
        "enforce_ssl": "always on",
        "fifo": "the mesh uses standard queues",
    },
    "dead_letter_queue_props": {
        "queue_name": "queue names follow P-NAME-4",
        "encryption": "set by storage.kms_key_arn in the manifest",
        "encryption_master_key": "set by storage.kms_key_arn in the manifest",
        "enforce_ssl": "always on",
        "fifo": "the mesh uses standard queues",
    },
    "sqs_event_source_props": {
        "batch_size": "the manifest's batch_size",
        "max_concurrency": "the manifest's max_concurrency",
        "report_batch_item_failures": "always on (P-ACK-1)",
    },
    "lambda_function_props": {
        "timeout": "the manifest's timeout and batch_size size it (P-MAN-4)",
        "memory_size": "the manifest's memory",
        "environment": "asya_deploy.environment builds it; use the manifest's env map",
        "log_group": "the mesh creates it with the manifest's log retention",
        "recursive_loop": "the layer re-sends to its own queue by design (docs/deploy.md)",
        "tracing": "the manifest's tracing",
        "reserved_concurrent_executions": "the manifest's reserved_concurrency",
    },
    "table_props": {
        "table_name": "table names follow GW-DATA-2",
        "partition_key": "asya.tableschema owns the key schema",
        "sort_key": "asya.tableschema owns the key schema",
        "billing_mode": "on-demand (the cost model of GW-DATA-8)",
        "time_to_live_attribute": "asya.tableschema owns it",
        "encryption": "set by storage.kms_key_arn in the manifest",
        "encryption_key": "set by storage.kms_key_arn in the manifest",
    },
    "bucket_props": {
        "encryption": "SSE-S3 (GW-DATA-7)",
        "enforce_ssl": "always on (GW-DATA-7)",
        "block_public_access": "always blocked (GW-DATA-7)",
        "lifecycle_rules": "the prefixes' lifetimes are GW-DATA-7's",
        "object_ownership": "bucket owner enforced",
        "minimum_tls_version": "TLS 1.2",
    },
    "api_gateway_props": {
        "rest_api_name": "asya-{namespace}",
        "deploy_options": "the stage's logging and throttling",
        "endpoint_configuration": "regional",
    },
    "log_group_props": {"retention": "the manifest's observability.log_retention_days"},
}


def given_fields(props: object | None) -> dict[str, Any]:
    """The fields a jsii props struct was given, as keyword arguments; ``{}`` for ``None``."""
    if props is None:
        return {}
    # jsii structs keep exactly the fields given to their constructor in ``_values``; there is no public accessor
    values = getattr(props, "_values", None)
    if not isinstance(values, dict):
        raise TypeError(f"expected a CDK props struct, got {type(props).__name__}")
    return dict(values)


def check_props(hooks: Mapping[str, object | None]) -> list[str]:
    """One message per field a hook may not set: ``queue_props.queue_name: ... (owned: reason)``."""
    problems: list[str] = []
    for hook, props in hooks.items():
        owned = OWNED_FIELDS.get(hook, {})
        for name in sorted(given_fields(props)):
            if name in owned:
                problems.append(f"{hook}.{name}: set by the mesh ({owned[name]}); remove it from {hook}")
    return problems
