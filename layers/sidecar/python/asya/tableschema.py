"""Key schema of the task-store table and the storage-bucket layout (GATEWAY GW-DATA-2, GW-DATA-7).

The one description both the CDK app and the local mode create resources from, so the table and bucket behave the
same in AWS and on moto.

Idempotency items (P-ACK-8, ``asya.idempotency``) live in the same table under their own key prefix:
``pk = IDEM#{id}#{actor}#{hop}#{attempt}``, ``sk = FRAME#{k}`` for frame ``k`` or ``OUTCOME`` for the hop's one outcome
envelope, expiring (``ttl``) 15 days after they were written.
``hop`` is the length of the input's ``route.prev``: with it, an actor that appears twice in one lineage (a loop in
the route) gets one key per visit. Actor names never contain ``#`` and ``hop``/``attempt`` are integers, so the key
reads back unambiguously whatever the id holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "CREATED_PROJECTION",
    "FANIN_PREFIX",
    "GSIS",
    "IDEMPOTENCY_OUTCOME_SK",
    "IDEMPOTENCY_OUTCOME_SLOT",
    "IDEMPOTENCY_PK_PREFIX",
    "IDEMPOTENCY_RETENTION_DAYS",
    "IDEMPOTENCY_SK_PREFIX",
    "PARTITION_KEY",
    "PAYLOADS_PREFIX",
    "PAYLOADS_RETENTION_DAYS",
    "SORT_KEY",
    "STATUS_PROJECTION",
    "TASKS_PREFIX",
    "TASKS_RETENTION_DAYS",
    "TTL_ATTRIBUTE",
    "Gsi",
    "boto3_create_table_kwargs",
    "idempotency_pk",
    "idempotency_sk",
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

#: Idempotency items (GW-DATA-2): one per sent frame of a hop, kept longer than SQS keeps a message (14 days).
IDEMPOTENCY_PK_PREFIX: Final = "IDEM#"
IDEMPOTENCY_SK_PREFIX: Final = "FRAME#"
#: The slot of a hop's outcome envelope (a retry, the x-sink envelope of a handler error or of zero frames, the
#: ``on_exhausted`` envelope): kept apart from the frames, whose numbers another delivery may have used differently.
IDEMPOTENCY_OUTCOME_SLOT: Final = -1
IDEMPOTENCY_OUTCOME_SK: Final = "OUTCOME"
IDEMPOTENCY_RETENTION_DAYS: Final = 15


def idempotency_pk(envelope_id: str, actor: str, hop: int, attempt: int) -> str:
    """``IDEM#{id}#{actor}#{hop}#{attempt}``: the partition of one hop's idempotency items."""
    return f"{IDEMPOTENCY_PK_PREFIX}{envelope_id}#{actor}#{hop}#{attempt}"


def idempotency_sk(index: int) -> str:
    """``FRAME#{k}``: the item of the hop's frame ``k``; ``OUTCOME`` for :data:`IDEMPOTENCY_OUTCOME_SLOT`."""
    if index == IDEMPOTENCY_OUTCOME_SLOT:
        return IDEMPOTENCY_OUTCOME_SK
    return f"{IDEMPOTENCY_SK_PREFIX}{index}"


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


#: The attributes the list queries filter on (GW-LIST-1, GW-DATA-5); the page's task items are then read with one
#: ``BatchGetItem`` (``asya.store.listing``), which drops a task whose ``ttl`` passed whatever the index says.
CREATED_PROJECTION: Final = ("flow",)
STATUS_PROJECTION: Final = ("flow", "ttl")

# DynamoDB writes an index entry whenever a projected attribute changes, so projecting everything made every status,
# progress and FLY update of a task write these indexes too (GW-DATA-8). With these projections ``by_created`` is
# written once, when a task is created (``ttl`` is not on it: the terminal write that sets it would rewrite the entry
# for a filter that only matters at the edge of the 30-day listing window), ``by_status`` when the status changes (its
# key does, in the same write that sets ``ttl``), ``active_deadlines`` (only the backstop reads it) when a task enters
# and leaves it (`make bench`, section 2).
GSIS: Final = (
    Gsi("by_created", "gsi1pk", "gsi1sk", projection=CREATED_PROJECTION),
    Gsi("by_status", "gsi2pk", "gsi2sk", projection=STATUS_PROJECTION),
    Gsi("active_deadlines", "gsi3pk", "gsi3sk", projection=("id", "deadline_at", "created_at")),
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
