"""The steady-state capacity model: demand at a task rate against every quota and setting, the order in which the
limits break, and the first. Pure arithmetic.

Every limit is linear in the rate: a task takes ``demand`` of a resource whose capacity is ``capacity``, so the
limit breaks at ``capacity / demand`` tasks/s (:attr:`Limit.max_rate`). Concurrency follows Little's law: a
function busy ``b`` seconds per task needs ``rate x b`` concurrent executions. Per-partition limits divide a
partition class's demand over its shards and multiply by the hash skew; so does an S3 prefix whose keys carry a shard
(``{shard}`` in its template, ``asya.tableschema.KEY_SHARDS``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from asya import tableschema
from asya.capacity.backstop import BACKSTOP_SECONDS_PER_TIMER
from asya.capacity.quotas import Quotas
from asya.capacity.vectors import TaskDemand

__all__ = ["LIMIT_KINDS", "Limit", "Settings", "evaluate", "first_limit", "reservations", "unreserved_pool"]

#: Every kind of limit :func:`evaluate` names (``Limit.kind``): what the deployment watches each one with is mapped by
#: kind (``asya_cdk.limit_alarms.LIMIT_WATCH``), so a new kind without an alarm or a stated absence of metric fails.
LIMIT_KINDS: tuple[str, ...] = (
    "stage_throttle",
    "apigw_account",
    "lambda_pool",
    "reserved",
    "event_source",
    "sqs_inflight",
    "table_wru",
    "table_rru",
    "new_table_wru",
    "new_table_rru",
    "index_wru",
    "created_shard",
    "outcome_shard",
    "s3_prefix",
    "kms",
)

_CREATED: str = "by_created:TASKS#{day}#{shard}"
_BACKSTOP: str = "backstop"
#: SQS and S3 (with the bucket key) reuse a data key this long, so a customer-managed key sees about two requests
#: (GenerateDataKey, Decrypt) per execution environment per period.
_KMS_DATA_KEY_REUSE_SECONDS: float = 300.0


@dataclass(frozen=True)
class Settings:
    """What the deployment is configured with (from the manifest, or derived from its declared target)."""

    stage_rate: float = 100.0
    stage_burst: int = 200
    index_shards: int = 8
    #: per actor: the event source's maximum concurrency (``None``: the event source's own ceiling)
    max_concurrency: Mapping[str, int | None] = field(default_factory=dict)
    reserved_concurrency: Mapping[str, int | None] = field(default_factory=dict)
    #: per actor: provisioned event pollers (``None``: standard mode)
    pollers: Mapping[str, int | None] = field(default_factory=dict)
    stream_reserved: int | None = None
    #: the deadline backstop's reservation (``asya.capacity.backstop``; ``None``: it shares the pool)
    backstop_reserved: int | None = None
    warm_wru: int | None = None
    warm_rru: int | None = None
    customer_key: bool = False


@dataclass(frozen=True)
class Limit:
    """One limit: what a task takes of it, what it holds, and the task rate at which it breaks."""

    name: str
    #: the quota's name in ``quotas.toml`` (raise it: ``deployment.quotas``), or ``setting:<manifest field>``
    source: str
    capacity: float
    demand_per_task: float
    unit: str
    estimate: bool = False
    sees: str = ""
    #: one of :data:`LIMIT_KINDS`
    kind: str = ""
    #: the function, actor, index or prefix the limit is of (``""`` for the mesh's own)
    subject: str = ""

    @property
    def max_rate(self) -> float:
        return math.inf if self.demand_per_task <= 0 else self.capacity / self.demand_per_task

    def demand(self, rate: float) -> float:
        return self.demand_per_task * rate

    @property
    def is_quota(self) -> bool:
        return not self.source.startswith("setting:")


def unreserved_pool(quota: float, reserved: float, minimum: float) -> float:
    """The executions functions without a reservation share: the quota less the reservations, but never less than
    what AWS keeps unreserved (or the whole quota when it is smaller than that, as in a new account)."""
    return max(quota - reserved, min(quota, minimum))


def reservations(settings: Settings) -> dict[str, int]:
    """Every function's reserved executions, by function: the actors', the stream function's and the backstop's."""
    reserved = {fn: cap for fn, cap in settings.reserved_concurrency.items() if cap}
    if settings.stream_reserved:
        reserved["stream"] = settings.stream_reserved
    if settings.backstop_reserved:
        reserved[_BACKSTOP] = settings.backstop_reserved
    return reserved


def _reservation_source(fn: str) -> str:
    if fn == "stream":
        return "setting:gateway.stream_reserved_concurrency"
    if fn == _BACKSTOP:
        return "setting:capacity.target_rate (the backstop's reservation)"
    return f"setting:actors.{fn}.reserved_concurrency"


def _concurrency_cap(actor: str, settings: Settings, quotas: Quotas) -> tuple[float, str]:
    pollers = settings.pollers.get(actor)
    if pollers:
        return pollers * quotas["esm_sqs_provisioned_batches_per_poller"], f"setting:capacity (pollers of {actor})"
    cap = settings.max_concurrency.get(actor)
    if cap is not None:
        return float(cap), f"setting:actors.{actor}.max_concurrency"
    return quotas["esm_sqs_max_concurrency"], "esm_sqs_max_concurrency"


def evaluate(demand: TaskDemand, settings: Settings, quotas: Quotas) -> list[Limit]:
    """Every limit of a mesh whose tasks take ``demand`` each, ordered by the rate at which it breaks."""
    a = quotas.assumptions
    limits: list[Limit] = [
        Limit(
            "API Gateway stage throttle",
            "setting:gateway.edge.throttle.rate_limit",
            settings.stage_rate,
            demand.stage_requests,
            "requests/s",
            sees="429 Too Many Requests from API Gateway; 4XXError and Count on the stage",
            kind="stage_throttle",
        ),
        Limit(
            "API Gateway account request rate",
            "apigw_account_rps",
            quotas["apigw_account_rps"],
            demand.stage_requests,
            "requests/s",
            sees="429 across every API of the account and region",
            kind="apigw_account",
        ),
    ]
    reserved = reservations(settings)
    pool = unreserved_pool(quotas["lambda_concurrency"], sum(reserved.values()), quotas["lambda_unreserved_minimum"])
    shared = sum(b for fn, b in demand.busy_seconds.items() if fn not in reserved)
    limits.append(
        Limit(
            "Lambda account concurrency (unreserved pool)",
            "lambda_concurrency",
            pool,
            shared,
            "concurrent executions",
            sees="Throttles on the functions; queues' ApproximateAgeOfOldestMessage grows; the gateway's 429/503",
            kind="lambda_pool",
        )
    )
    for fn, reserved_cap in sorted(reserved.items()):
        if fn == _BACKSTOP:
            # every task arms at most one deadline timer; the sweep keeps one execution of the reservation
            capacity, busy = float(reserved_cap - 1), BACKSTOP_SECONDS_PER_TIMER
        else:
            capacity, busy = float(reserved_cap), demand.busy_seconds.get(fn, 0.0)
        limits.append(
            Limit(
                f"reserved concurrency of {fn}",
                _reservation_source(fn),
                capacity,
                busy,
                "concurrent executions",
                estimate=fn == _BACKSTOP,
                sees=f"Throttles on {fn}" if fn != _BACKSTOP else "Throttles on the backstop; deadlines end late",
                kind="reserved",
                subject=fn,
            )
        )
    for actor, busy in sorted(demand.busy_seconds.items()):
        if actor in ("gateway", "stream"):
            continue
        cap, source = _concurrency_cap(actor, settings, quotas)
        limits.append(
            Limit(
                f"event source concurrency of {actor}",
                source,
                cap,
                busy,
                "concurrent batches",
                sees=f"{actor}'s queue backs up (ApproximateAgeOfOldestMessage); no throttles",
                kind="event_source",
                subject=actor,
            )
        )
        batch = demand.batch_size.get(actor, 1.0)
        limits.append(
            Limit(
                f"SQS in-flight messages of {actor}",
                "sqs_inflight",
                quotas["sqs_inflight"],
                busy * batch,
                "messages in flight",
                sees="OverLimit on ReceiveMessage; the event source stops receiving",
                kind="sqs_inflight",
                subject=actor,
            )
        )
    total_wru = demand.wru_table + sum(demand.wru_index.values())
    limits += [
        Limit(
            "DynamoDB table write units",
            "dynamodb_table_wru",
            quotas["dynamodb_table_wru"],
            demand.wru_table,
            "WRU/s",
            sees="ThrottledRequests and WriteThrottleEvents on the table; the gateway's 503 with Retry-After",
            kind="table_wru",
        ),
        Limit(
            "DynamoDB table read units",
            "dynamodb_table_rru",
            quotas["dynamodb_table_rru"],
            demand.rru,
            "RRU/s",
            sees="ReadThrottleEvents on the table",
            kind="table_rru",
        ),
        Limit(
            "DynamoDB new-table write throughput (first burst)",
            "dynamodb_new_table_wru" if settings.warm_wru is None else "setting:capacity (warm throughput)",
            float(settings.warm_wru or quotas["dynamodb_new_table_wru"]),
            total_wru,
            "WRU/s",
            sees="WriteThrottleEvents in the first minutes of a new peak, gone once the table has adapted",
            kind="new_table_wru",
        ),
        Limit(
            "DynamoDB new-table read throughput (first burst)",
            "dynamodb_new_table_rru" if settings.warm_rru is None else "setting:capacity (warm throughput)",
            float(settings.warm_rru or quotas["dynamodb_new_table_rru"]),
            demand.rru,
            "RRU/s",
            sees="ReadThrottleEvents in the first minutes of a new peak",
            kind="new_table_rru",
        ),
    ]
    for index, wru in sorted(demand.wru_index.items()):
        limits.append(
            Limit(
                f"DynamoDB index {index} write units",
                "dynamodb_table_wru",
                quotas["dynamodb_table_wru"],
                wru,
                "WRU/s",
                sees=f"WriteThrottleEvents with the GlobalSecondaryIndexName {index} dimension; table writes throttle",
                kind="index_wru",
                subject=index,
            )
        )
    created = demand.wru_by_key.get(_CREATED, 0.0)
    limits.append(
        Limit(
            "created-index shard (one partition of by_created)",
            "dynamodb_partition_wcu",
            quotas["dynamodb_partition_wcu"] * a.partition_headroom,
            created * a.hash_skew / settings.index_shards,
            "WCU/s per partition",
            estimate=True,
            sees="creates throttled on the index (WriteThrottleEvents, by_created) while the table has room",
            kind="created_shard",
        )
    )
    limits.append(
        Limit(
            "outcome shard (one partition of by_outcome)",
            "dynamodb_partition_wcu",
            quotas["dynamodb_partition_wcu"] * a.partition_headroom,
            a.failure_share * a.hash_skew / settings.index_shards,
            "WCU/s per partition",
            estimate=True,
            sees="failed terminal writes throttled on by_outcome",
            kind="outcome_shard",
        )
    )
    for prefix, puts in sorted(demand.s3_puts_by_prefix.items()):
        sharded = "{shard}" in prefix
        limits.append(
            Limit(
                f"S3 PUT/s on one shard of {prefix}" if sharded else f"S3 PUT/s on {prefix}",
                "s3_put_per_prefix",
                quotas["s3_put_per_prefix"] * (a.partition_headroom if sharded else 1.0),
                puts * a.hash_skew / len(tableschema.KEY_SHARDS) if sharded else puts,
                "PUT/s per prefix",
                # S3 splits a busy key range into prefixes of their own over minutes, not at once
                estimate=sharded,
                sees="503 SlowDown on PutObject (no metric without paid S3 request metrics)",
                kind="s3_prefix",
                subject=prefix,
            )
        )
    busy_total = sum(demand.busy_seconds.values())
    if settings.customer_key:
        limits.append(
            Limit(
                "KMS requests (customer-managed key)",
                "kms_requests",
                quotas["kms_requests"],
                2 * busy_total / _KMS_DATA_KEY_REUSE_SECONDS,
                "requests/s",
                estimate=True,
                sees="ThrottlingException from KMS on SQS sends and S3 PUTs",
                kind="kms",
            )
        )
    return sorted(limits, key=lambda limit: (limit.max_rate, limit.name))


def first_limit(limits: list[Limit]) -> Limit:
    return min(limits, key=lambda limit: limit.max_rate)
