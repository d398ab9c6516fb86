"""Key schema of the task-store table and the storage-bucket layout (GW-DATA-2, GW-DATA-7).

The one description both the CDK app and the local mode create resources from, so the table and bucket behave the
same in AWS and on moto. The item layout is in ``asya.store.records``.

Every object key the runtime writes or reads is built here (or, for offloaded payloads, from :data:`PAYLOADS_PREFIX`
in ``asya.payloads``): ``payloads/{id}/{hop}-{actor}-{token}.json``, ``fanin/{origin}/slice-{i}.json``,
``tasks/{id}/{field}.json``, ``paused/{id}.json``, ``{succeeded|failed}/{shard}/{day}/{name}.jsonl`` (checkpoints),
``history/{shard}/{day}/{name}.jsonl`` (run history), ``flows/{digest}.json`` (flow programs by digest) and
``unparsed/{day}/sqs-{message id}.txt``.

Checkpoints and run history are the objects the mesh writes at the task rate. S3 serves about 3,500 writes per second
per prefix, so their keys carry a shard, :func:`key_shard` of the object's own name (one of :data:`KEY_SHARDS` hex
digits), before the day: the writes of a day spread over 16 prefixes that stay the same from one day to the next, so
S3 splits them once (GW-DATA-9). Readers never build these keys: they read the key the task item names, so objects
written before the shard was added stay readable.
``asya_deploy.access`` declares who may touch which by calling the same builders
with ``*`` (tests/unit/test_access.py fails on a key built anywhere else).

Every index projects its keys only (GW-DATA-2, GW-DATA-8): a write that changes no index key writes no index, and an
index key of a task is written at creation and changed at most once, at its terminal write, so a status or progress
update never costs an index write. Readers fetch what they list with ``BatchGetItem``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "CHECKPOINT_PREFIXES",
    "FAILED_PREFIX",
    "FANIN_PREFIX",
    "GSIS",
    "HISTORY_PREFIX",
    "KEY_SHARDS",
    "PARTITION_KEY",
    "PAUSED_PREFIX",
    "PAYLOADS_PREFIX",
    "PAYLOADS_RETENTION_DAYS",
    "PROGRAMS_PREFIX",
    "SHARDED_PREFIXES",
    "SORT_KEY",
    "SUCCEEDED_PREFIX",
    "TASKS_PREFIX",
    "TASKS_RETENTION_DAYS",
    "TTL_ATTRIBUTE",
    "UNPARSED_PREFIX",
    "Gsi",
    "boto3_create_table_kwargs",
    "checkpoint_key",
    "fanin_slice_key",
    "history_key",
    "key_shard",
    "paused_key",
    "program_key",
    "task_value_key",
    "task_values_prefix",
    "unparsed_key",
]

PARTITION_KEY: Final = "pk"
SORT_KEY: Final = "sk"
TTL_ATTRIBUTE: Final = "ttl"

#: Offloaded payloads expire after 15 days (P-LARGE-6); fan-in state too (P-AGG-8).
PAYLOADS_PREFIX: Final = "payloads/"
FANIN_PREFIX: Final = "fanin/"
PAYLOADS_RETENTION_DAYS: Final = 15
#: Task values too big for the task item (GW-DATA-6) expire with the task record, 30 days (GW-DATA-7).
TASKS_PREFIX: Final = "tasks/"
TASKS_RETENTION_DAYS: Final = 30
#: Paused envelopes (P-PAUSE-4), one per paused task, deleted by the resume (P-RESUME-6) or a cancel.
PAUSED_PREFIX: Final = "paused/"
#: Compiled flow programs by digest (P-FLOWV-3): kept across deploys, never expired by a lifecycle rule (a paused
#: task may need its program at any time); only ``asya flow gc`` deletes them.
PROGRAMS_PREFIX: Final = "flows/"
#: Crew checkpoints (P-SINK-4, P-SUMP-4): one prefix per final phase.
SUCCEEDED_PREFIX: Final = "succeeded/"
FAILED_PREFIX: Final = "failed/"
CHECKPOINT_PREFIXES: Final = {"succeeded": SUCCEEDED_PREFIX, "failed": FAILED_PREFIX}
#: Bodies x-sump could not parse (P-SUMP-5).
UNPARSED_PREFIX: Final = "unparsed/"
#: Run history (P-HIST-1): one JSON Lines object per actor invocation that ran a hop of a history-on flow.
HISTORY_PREFIX: Final = "history/"
#: The prefixes whose keys carry a shard, and the shards: one hex digit (GW-DATA-9).
SHARDED_PREFIXES: Final = (SUCCEEDED_PREFIX, FAILED_PREFIX, HISTORY_PREFIX)
KEY_SHARDS: Final = tuple("0123456789abcdef")


def key_shard(name: str) -> str:
    """The shard of an object named ``name``: the first hex digit of its SHA-256, so any name (a UUID4, or a test's
    fixed one) spreads evenly; ``*`` (a key pattern of ``asya_deploy.access``) stays ``*``."""
    if name == "*":
        return "*"
    return hashlib.sha256(name.encode("utf-8")).hexdigest()[0]


def task_value_key(task_id: str, field: str) -> str:
    """``tasks/{id}/{field}.json``: a task value too large for its item (GW-DATA-6)."""
    return f"{TASKS_PREFIX}{task_id}/{field}.json"


def task_values_prefix(task_id: str) -> str:
    """``tasks/{id}/``: every large value of one task."""
    return f"{TASKS_PREFIX}{task_id}/"


def paused_key(task_id: str) -> str:
    """``paused/{id}.json``: a paused envelope (P-PAUSE-4, GW-DATA-7)."""
    return f"{PAUSED_PREFIX}{task_id}.json"


def program_key(digest: str) -> str:
    """``flows/{digest}.json``: a compiled flow program, its canonical JSON (P-FLOWV-3)."""
    return f"{PROGRAMS_PREFIX}{digest}.json"


def fanin_slice_key(origin_id: str, index: int | str) -> str:
    """``fanin/{origin}/slice-{i}.json``: a fan-in slice too large for its item (GW-DATA-7)."""
    return f"{FANIN_PREFIX}{origin_id}/slice-{index}.json"


def checkpoint_key(phase: str, day: str, name: str) -> str:
    """``{phase}/{shard}/{day}/{name}.jsonl``: one crew checkpoint object; ``phase`` is ``succeeded`` or ``failed``."""
    return f"{CHECKPOINT_PREFIXES[phase]}{key_shard(name)}/{day}/{name}.jsonl"


def history_key(day: str, name: str) -> str:
    """``history/{shard}/{day}/{name}.jsonl``: the run-history lines of one actor invocation (P-HIST-2)."""
    return f"{HISTORY_PREFIX}{key_shard(name)}/{day}/{name}.jsonl"


def unparsed_key(day: str, message_id: str) -> str:
    """``unparsed/{day}/sqs-{message id}.txt``: a body x-sump could not parse (P-SUMP-5)."""
    return f"{UNPARSED_PREFIX}{day}/sqs-{message_id}.txt"


@dataclass(frozen=True, slots=True)
class Gsi:
    """A global secondary index with string keys; ``projection`` names the non-key attributes it carries (``None``:
    all of them, empty: the keys only)."""

    name: str
    partition_key: str
    sort_key: str
    projection: tuple[str, ...] | None = None

    def boto3_projection(self) -> dict[str, Any]:
        if self.projection is None:
            return {"ProjectionType": "ALL"}
        if not self.projection:
            return {"ProjectionType": "KEYS_ONLY"}
        return {"ProjectionType": "INCLUDE", "NonKeyAttributes": list(self.projection)}


#: ``by_created``: every task by creation day, newest first (GW-LIST); ``by_outcome``: sparse, failed and canceled
#: tasks by day (the list's status filter for them). Both split a day into eight partitions by a hash of the id
#: (``asya.store.records.index_shard``), so that no index partition takes a day's creations alone, and both sort on
#: ``by_created``'s own ``gsi1sk`` (the terminal write adds only ``gsi2pk``; an index sort key no item carries would
#: leave the index empty); ``long_deadlines``: sparse, tasks whose deadline was too far away for an SQS timer, swept by
#: the backstop (GW-BACK-1).
GSIS: Final = (
    Gsi("by_created", "gsi1pk", "gsi1sk", projection=()),
    Gsi("by_outcome", "gsi2pk", "gsi1sk", projection=()),
    Gsi("long_deadlines", "gsi3pk", "gsi3sk", projection=()),
)


def boto3_create_table_kwargs(table_name: str) -> dict[str, Any]:
    """Arguments of ``dynamodb.create_table`` for the task store (on-demand billing)."""
    attributes = {PARTITION_KEY, SORT_KEY}
    for gsi in GSIS:
        attributes.update((gsi.partition_key, gsi.sort_key))
    return {
        "TableName": table_name,
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [{"AttributeName": name, "AttributeType": "S"} for name in sorted(attributes)],
        "KeySchema": [
            {"AttributeName": PARTITION_KEY, "KeyType": "HASH"},
            {"AttributeName": SORT_KEY, "KeyType": "RANGE"},
        ],
        "GlobalSecondaryIndexes": [
            {
                "IndexName": gsi.name,
                "KeySchema": [
                    {"AttributeName": gsi.partition_key, "KeyType": "HASH"},
                    {"AttributeName": gsi.sort_key, "KeyType": "RANGE"},
                ],
                "Projection": gsi.boto3_projection(),
            }
            for gsi in GSIS
        ],
        "SSESpecification": {"Enabled": True},
    }
