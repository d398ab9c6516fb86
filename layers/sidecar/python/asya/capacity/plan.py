"""A manifest's declared target (``capacity``) turned into settings and checked against the account's quotas. Pure.

:func:`plan` prices the target's mix of flows from the measured vectors (``text-pipeline``; another flow is priced as
its route's length of the same hops, an estimate), derives the settings that serve it and evaluates every limit at
the target rate with those settings and the declared quotas:

- the stage throttle: the target's stage requests per second with :data:`HEADROOM`, never below the manifest's;
  its burst: ``burst_seconds`` of that rate, at most the account's burst;
- the created-index shard count: a power of two, at least 8, that keeps one shard's writes under the partition limit;
- per actor: the event source's maximum concurrency (the target's concurrency with headroom), or provisioned pollers
  when that exceeds what one event source runs in standard mode; an actor's own ``max_concurrency`` is kept;
- the table's warm throughput, when the target's write or read units exceed a new table's;
- ``Retry-After``: the seconds the stage's token bucket takes to refill (``burst / rate``), at least 1;
- per actor, the drain rate admission divides its queue's depth by (:func:`drain_rates`, docs/http.md GW-OVL-7): the
  task rate at which the model says the actor's event source (or its reserved concurrency) breaks.

A limit below the target whose source is an AWS quota is a :class:`Shortfall`: the quota to raise and the value that
serves the target. A limit below the target that is a setting of the manifest names the setting.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from asya.capacity.backstop import backstop_reservation, backstop_wanted
from asya.capacity.model import Limit, Settings, evaluate, first_limit, reservations
from asya.capacity.quotas import Quotas, load_quotas
from asya.capacity.target import HEADROOM, declared
from asya.capacity.vectors import TaskDemand, Vector, demand_of, load_vector, overlapped, vector_name

__all__ = [
    "HEADROOM",
    "MEASURED_FLOW",
    "CapacityPlan",
    "Shortfall",
    "account_quotas",
    "declared",
    "drain_rates",
    "mesh_demand",
    "plan",
    "raised_quotas",
    "refusal",
]

MEASURED_FLOW: Final = "text-pipeline"
_MEASURED_STEPS: Final = 3
_MIN_SHARDS: Final = 8
_ACCOUNT_BURST: Final = 5_000
_SIZES: Final = ((100, "100b"), (1024, "1kb"), (10 * 1024, "10kb"))


@dataclass(frozen=True)
class Shortfall:
    limit: str
    source: str
    current: float
    needed: float
    unit: str


@dataclass(frozen=True)
class CapacityPlan:
    """What the target needs: settings, every limit at those settings, and what falls short."""

    target_rate: float
    settings: Settings
    limits: list[Limit]
    demand: TaskDemand
    retry_after: int
    quotas: Quotas
    shortfalls: list[Shortfall] = field(default_factory=list)
    #: what the backstop reserves once the account has room for it (``asya.capacity.backstop.backstop_wanted``)
    backstop_wanted: int = 0

    @property
    def first(self) -> Limit:
        return first_limit(self.limits)


def _payload(size: int) -> str:
    return next((name for limit, name in _SIZES if size <= limit), _SIZES[-1][1])


def _flow_demand(
    base: TaskDemand, route: list[str] | None, *, handler_seconds: float, record_concurrency: Mapping[str, int]
) -> TaskDemand:
    """A flow priced as ``route``'s user actors each costing the measured flow's mean actor hop (estimate), less the
    handler time an actor's concurrent records overlap (``base`` is priced with records one after another)."""
    if route is None:
        return base
    measured = [a for a in base.busy_seconds if a not in ("gateway", "stream") and not a.startswith("x-")]
    factor = (len(route) + 1) / (_MEASURED_STEPS + 1)
    out = base.scaled(1.0)
    hop_busy = sum(base.busy_seconds[a] for a in measured) / max(len(measured), 1)
    hop_inv = sum(base.invocations.get(a, 0.0) for a in measured) / max(len(measured), 1)
    for a in measured:
        out.busy_seconds.pop(a, None)
        out.invocations.pop(a, None)
        out.batch_size.pop(a, None)
    hop_records = sum(base.invocations.get(a, 0.0) * base.batch_size.get(a, 1.0) for a in measured)
    hop_records /= max(len(measured), 1)
    batch = max(base.batch_size.values(), default=1.0)
    handler = hop_records * handler_seconds
    for actor in route:
        saved = handler - overlapped(handler, batch, record_concurrency.get(actor, 1))
        out.busy_seconds[actor] = out.busy_seconds.get(actor, 0.0) + hop_busy - saved
        out.invocations[actor] = out.invocations.get(actor, 0.0) + hop_inv
        out.batch_size[actor] = batch
    out.wru_table = base.wru_table * factor
    out.rru = base.rru * factor
    out.sqs_requests = base.sqs_requests * factor
    out.latency_seconds = base.latency_seconds * factor
    return out


def mesh_demand(
    manifest: Any, quotas: Quotas, *, vectors: Mapping[str, Vector] | None = None
) -> tuple[TaskDemand, float]:
    """Per-task demand of the manifest's mix, and the tightest deadline of its flows (seconds)."""
    target = manifest.capacity
    flows = list(manifest.flows)
    concurrency = {name: int(getattr(spec, "record_concurrency", 1)) for name, spec in manifest.actors.items()}
    total = TaskDemand()
    deadline = math.inf
    for flow, share in target.shares(flows).items():
        spec = manifest.flows[flow]
        history = "steps" if getattr(spec, "history", "off") not in (None, "off") else "off"
        parts = []
        for watched, weight in ((False, 1 - target.watched_share), (True, target.watched_share)):
            if weight <= 0:
                continue
            name = vector_name(MEASURED_FLOW, _payload(target.payload_bytes), history, watched)
            vector = (vectors or {}).get(name) or load_vector(name)
            # the measured flow's own actors overlap their records as the manifest says; any other flow is priced
            # from the measured hops one after another, then overlapped per actor of its route (_flow_demand)
            measured = concurrency if flow == MEASURED_FLOW else None
            parts.append(demand_of(vector, quotas.assumptions, record_concurrency=measured).scaled(weight))
        base = parts[0]
        for part in parts[1:]:
            base.add(part)
        route = None if flow == MEASURED_FLOW else (list(spec.route) if spec.route else None)
        flow_demand = _flow_demand(
            base, route, handler_seconds=quotas.assumptions.handler_seconds, record_concurrency=concurrency
        )
        total.add(flow_demand.scaled(share))
        deadline = min(deadline, float(spec.timeout))
    return total, deadline


def _shards(created_wru: float, rate: float, quotas: Quotas) -> int:
    per_shard = quotas["dynamodb_partition_wcu"] * quotas.assumptions.partition_headroom
    needed = math.ceil(created_wru * rate * HEADROOM * quotas.assumptions.hash_skew / per_shard)
    return max(_MIN_SHARDS, 1 << max(needed - 1, 0).bit_length())


def _derive(manifest: Any, demand: TaskDemand, quotas: Quotas) -> Settings:
    target = manifest.capacity
    rate = target.target_rate
    derive = declared(manifest)
    edge = manifest.gateway.edge.throttle
    stage_rate = float(edge.rate_limit)
    burst = edge.burst_limit
    if derive:
        stage_rate = max(stage_rate, math.ceil(rate * demand.stage_requests * HEADROOM))
        burst = max(burst, min(_ACCOUNT_BURST, math.ceil(stage_rate * target.burst_seconds)))
    actors = {a.name: a for a in manifest.deployed_actors()}
    max_concurrency: dict[str, int | None] = {}
    pollers: dict[str, int | None] = {}
    per_poller = quotas["esm_sqs_provisioned_batches_per_poller"]
    for name, actor in actors.items():
        need = math.ceil(rate * demand.busy_seconds.get(name, 0.0) * HEADROOM)
        if actor.max_concurrency is not None:
            max_concurrency[name] = actor.max_concurrency
        elif not derive or name not in demand.busy_seconds:
            max_concurrency[name] = None
        elif need > quotas["esm_sqs_max_concurrency"]:
            pollers[name] = min(int(quotas["esm_sqs_max_pollers"]), math.ceil(need / per_poller))
        else:
            max_concurrency[name] = max(2, need)
    total_wru = demand.wru_table + sum(demand.wru_index.values())
    warm_wru = math.ceil(rate * total_wru * HEADROOM)
    warm_rru = math.ceil(rate * demand.rru * HEADROOM)
    if not derive:
        warm_wru = warm_rru = 0
    return Settings(
        stage_rate=float(stage_rate),
        stage_burst=int(burst),
        index_shards=(
            _shards(demand.wru_by_key.get("by_created:TASKS#{day}#{shard}", 0.0), rate, quotas)
            if derive
            else _MIN_SHARDS
        ),
        max_concurrency=max_concurrency,
        reserved_concurrency={name: a.reserved_concurrency for name, a in actors.items()},
        pollers=pollers,
        stream_reserved=manifest.gateway.stream_reserved_concurrency,
        backstop_reserved=backstop_reservation(manifest),
        warm_wru=warm_wru if warm_wru > quotas["dynamodb_new_table_wru"] else None,
        warm_rru=warm_rru if warm_rru > quotas["dynamodb_new_table_rru"] else None,
        customer_key=manifest.storage.kms_key_arn is not None or manifest.storage.create_kms_key,
    )


def account_quotas(manifest: Any) -> Quotas:
    """AWS's defaults with the manifest's declared quotas (``lambda_concurrency`` from ``account_concurrency``
    unless declared)."""
    declared = dict(manifest.deployment.quotas)
    declared.setdefault("lambda_concurrency", float(manifest.deployment.account_concurrency))
    return load_quotas(declared)


def plan(manifest: Any, *, quotas: Quotas | None = None, vectors: Mapping[str, Vector] | None = None) -> CapacityPlan:
    """The settings and limits of ``manifest``'s declared target (see the module docstring)."""
    quotas = quotas or account_quotas(manifest)
    demand, _ = mesh_demand(manifest, quotas, vectors=vectors)
    settings = _derive(manifest, demand, quotas)
    limits = evaluate(demand, settings, quotas)
    rate = manifest.capacity.target_rate
    shortfalls: dict[str, Shortfall] = {}
    for limit in limits:
        if limit.max_rate >= rate:
            continue
        current = quotas[limit.source] if limit.is_quota else limit.capacity
        needed = _needed(limit, current, rate, settings, backstop_wanted(manifest))
        known = shortfalls.get(limit.source)
        if known is None or known.needed < needed:
            shortfalls[limit.source] = Shortfall(limit.name, limit.source, current, needed, limit.unit)
    retry_after = max(1, math.ceil(settings.stage_burst / settings.stage_rate)) if settings.stage_rate else 1
    return CapacityPlan(
        rate, settings, limits, demand, retry_after, quotas, list(shortfalls.values()), backstop_wanted(manifest)
    )


def _needed(limit: Limit, current: float, rate: float, settings: Settings, backstop: int) -> int:
    """The capacity that serves ``rate``. Most limits scale with their capacity; the account's pool is what the
    functions without a reservation need plus every reservation, the backstop's grown to what it takes once the
    raised quota has room for it (a proportional raise would leave the pool short by that growth)."""
    if limit.kind == "lambda_pool":
        others = sum(reservations(settings).values()) - (settings.backstop_reserved or 0)
        return math.ceil(limit.demand(rate) + others + max(backstop, settings.backstop_reserved or 0))
    return math.ceil(current * rate / limit.max_rate)


def refusal(result: CapacityPlan) -> str | None:
    """The message ``asya synth`` refuses a target with, or ``None`` when the target is served."""
    if not result.shortfalls:
        return None
    lines = [
        f"capacity.target_rate {result.target_rate:g} tasks/s cannot be served: "
        f"the first limit is {result.first.name} at {result.first.max_rate:,.0f} tasks/s"
    ]
    quotas = load_quotas()
    for short in result.shortfalls:
        if not short.source.startswith("setting:") and not quotas.quota(short.source).adjustable:
            lines.append(
                f"  - {short.limit}: {short.source} ({short.current:,.0f} {short.unit}) is a hard AWS limit; the "
                f"target needs {short.needed:,.0f}: lower the target or spread the load (docs/capacity.md)"
            )
        elif short.source.startswith("setting:"):
            lines.append(
                f"  - {short.limit}: {short.source.removeprefix('setting:')} allows {short.current:,.0f} "
                f"{short.unit}, the target needs {short.needed:,.0f}; raise it or lower the target"
            )
        else:
            lines.append(
                f"  - {short.limit}: raise the quota {short.source} from {short.current:,.0f} to at least "
                f"{short.needed:,.0f} ({short.unit}) in Service Quotas, then declare it: "
                f"deployment.quotas.{short.source}: {short.needed:.0f}"
            )
    return "\n".join(lines)


def raised_quotas(result: CapacityPlan) -> dict[str, float]:
    """The adjustable quotas the target uses more than ``1 / HEADROOM`` of, at values that leave it
    :data:`HEADROOM` (what to request in Service Quotas)."""
    quotas = load_quotas()
    rate = result.target_rate * HEADROOM
    out: dict[str, float] = {}
    for limit in result.limits:
        if not limit.is_quota or not quotas.quota(limit.source).adjustable or limit.max_rate >= rate:
            continue
        current = result.quotas[limit.source]
        needed = _needed(limit, current, rate, result.settings, result.backstop_wanted)
        out[limit.source] = max(out.get(limit.source, 0.0), float(needed))
    return out


def drain_rates(result: CapacityPlan) -> dict[str, float]:
    """Tasks per second each actor takes off its queue under the plan's settings: the lowest rate at which its event
    source's concurrency or its function's reservation breaks (Little's law on its busy time per task). Actors the
    mix never reaches have no busy time and no rate."""
    rates: dict[str, float] = {}
    for limit in result.limits:
        if limit.kind not in ("event_source", "reserved") or limit.subject in ("gateway", "stream"):
            continue
        if math.isfinite(limit.max_rate):
            rates[limit.subject] = min(rates.get(limit.subject, math.inf), round(limit.max_rate, 1))
    return rates
