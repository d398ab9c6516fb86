"""A ramp from 0 to a task rate in 1 s steps: how the mesh catches up while AWS scales. Pure arithmetic, an estimate.

Each second: the offered rate grows linearly to ``rate`` over ``ramp_seconds`` and then holds; the stage throttle
admits what its token bucket holds (it starts full with ``stage_burst`` requests and refills at ``stage_rate`` per
second; the rest is answered 429); the table serves at most its new-table (or warm) throughput, which
slows every stage by the same share; each actor's event source grows from its initial concurrency by its scale-up
rate up to its cap (provisioned pollers start at their minimum, kept ready, and grow three times faster); each
function grows by Lambda's per-function scaling rate; all functions together share the account's unreserved pool
(scaled down in proportion when they ask for more: the surplus is throttled, and a throttled batch returns to its
queue, one more receive of its messages). Work passes along the route in its order: what an actor finishes arrives
at the next, and backlog builds where arrivals exceed what an actor finishes. Latency is every actor's backlog over
its throughput plus the wait inside a batch. A task whose predicted latency exceeds the flow's deadline is predicted
to time out; messages whose expected receive count reaches ``max_receive_count`` are predicted to go to the DLQ.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from asya.capacity.model import Settings, reservations, unreserved_pool
from asya.capacity.quotas import Quotas
from asya.capacity.vectors import TaskDemand

__all__ = ["Ramp", "RampStep", "simulate"]


@dataclass(frozen=True)
class RampStep:
    second: int
    offered: float
    admitted: float
    refused_requests: float
    finished: float
    backlog: float
    concurrency: float
    throttled: float
    latency: float


@dataclass
class Ramp:
    steps: list[RampStep] = field(default_factory=list)
    refused_requests: float = 0.0
    timeouts: float = 0.0
    max_backlog: float = 0.0
    max_latency: float = 0.0
    max_receives: float = 1.0
    dlq: bool = False
    seconds_to_steady: int | None = None


def simulate(
    demand: TaskDemand,
    settings: Settings,
    quotas: Quotas,
    *,
    rate: float,
    deadline_seconds: float,
    max_receive_count: int,
    ramp_seconds: int = 60,
    hold_seconds: int = 60,
) -> Ramp:
    """The ramp to ``rate`` (see the module docstring)."""
    actors = [a for a in demand.busy_seconds if a not in ("gateway", "stream")]
    functions = list(demand.busy_seconds)
    esm = dict.fromkeys(actors, 0.0)
    envs = dict.fromkeys(functions, 0.0)
    backlog = dict.fromkeys(actors, 0.0)
    receives = 1.0
    out = Ramp()
    step_scale = quotas["lambda_scale_per_10s"] / 10
    pool = unreserved_pool(
        quotas["lambda_concurrency"], sum(reservations(settings).values()), quotas["lambda_unreserved_minimum"]
    )
    table_wru = float(settings.warm_wru or quotas["dynamodb_new_table_wru"])
    total_wru = demand.wru_table + sum(demand.wru_index.values())
    stage_capacity = settings.stage_rate / demand.stage_requests if demand.stage_requests else float("inf")
    stage_burst = settings.stage_burst / demand.stage_requests if demand.stage_requests else float("inf")
    tokens = stage_burst  # tasks' worth of requests the stage's bucket holds
    for second in range(1, ramp_seconds + hold_seconds + 1):
        offered = rate * min(1.0, second / ramp_seconds)
        available = tokens + stage_capacity
        admitted = min(offered, available)
        tokens = min(stage_burst, available - admitted)
        refused = (offered - admitted) * demand.stage_requests
        table_share = min(1.0, table_wru / (admitted * total_wru)) if admitted and total_wru else 1.0
        wanted: dict[str, float] = {}
        for fn in functions:
            need = admitted * demand.busy_seconds[fn]
            if fn in esm:
                need += backlog[fn] * demand.busy_seconds[fn]
                cap = _esm_cap(fn, settings, quotas)
                grow = (
                    quotas["esm_sqs_scale_per_minute"]
                    / 60
                    * (quotas["esm_sqs_provisioned_speedup"] if settings.pollers.get(fn) else 1.0)
                )
                start = _esm_start(fn, settings, quotas) if need > 0 else 0.0
                esm[fn] = min(cap, max(esm[fn] + grow, start), max(need, start))
                need = esm[fn]
            envs[fn] = min(need, envs[fn] + step_scale)
            wanted[fn] = envs[fn]
        shared = sum(v for fn, v in wanted.items() if not settings.reserved_concurrency.get(fn))
        pool_share = min(1.0, pool / shared) if shared else 1.0
        throttled = shared * (1 - pool_share)
        if pool_share < 1.0:
            receives = max(receives, 1.0 / max(pool_share, 1e-9))
        latency = 0.0
        arrivals = admitted
        for fn in actors:
            granted = wanted[fn] * (pool_share if not settings.reserved_concurrency.get(fn) else 1.0)
            busy = demand.busy_seconds[fn]
            throughput = (granted / busy if busy else float("inf")) * table_share
            done = min(backlog[fn] + arrivals, throughput)
            backlog[fn] = backlog[fn] + arrivals - done
            arrivals = done  # the next actor of the route gets what this one finished
            batch = demand.batch_size.get(fn, 1.0)
            per_record = busy / max(demand.invocations.get(fn, 0.0) * batch, 1e-9) if busy else 0.0
            latency += (backlog[fn] / throughput if throughput else 0.0) + per_record * (batch + 1) / 2
        total_backlog = sum(backlog.values())
        out.refused_requests += refused
        if latency > deadline_seconds:
            out.timeouts += admitted
        out.max_backlog = max(out.max_backlog, total_backlog)
        out.max_latency = max(out.max_latency, latency)
        if out.seconds_to_steady is None and second >= ramp_seconds and total_backlog < rate:
            out.seconds_to_steady = second
        out.steps.append(
            RampStep(
                second=second,
                offered=offered,
                admitted=admitted,
                refused_requests=refused,
                finished=arrivals,
                backlog=total_backlog,
                concurrency=sum(wanted.values()) - throttled,
                throttled=throttled,
                latency=latency,
            )
        )
    out.max_receives = receives
    out.dlq = receives >= max_receive_count
    return out


def _esm_start(actor: str, settings: Settings, quotas: Quotas) -> float:
    """Concurrent batches an event source runs as soon as messages arrive: its minimum pollers' worth when
    provisioned (they stay ready), else the standard start."""
    pollers = settings.pollers.get(actor)
    if pollers:
        ready = min(pollers, quotas["esm_sqs_max_minimum_pollers"])
        return ready * quotas["esm_sqs_provisioned_batches_per_poller"]
    return quotas["esm_sqs_initial_concurrency"]


def _esm_cap(actor: str, settings: Settings, quotas: Quotas) -> float:
    pollers = settings.pollers.get(actor)
    if pollers:
        return pollers * quotas["esm_sqs_provisioned_batches_per_poller"]
    cap = settings.max_concurrency.get(actor)
    return float(cap) if cap is not None else quotas["esm_sqs_max_concurrency"]
