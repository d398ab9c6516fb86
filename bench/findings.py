"""Why a target is missed, told from the measured figures: one paragraph per missed target. Pure.

Each finding reads the results document and returns ``None`` when its target is met or was not measured, so the
report never keeps an explanation the figures no longer support.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from bench.report import fmt, fmt_money
from bench.targets import DEFAULT_CONFIG, evaluate, get_path

__all__ = ["findings"]

#: A process busy this share of the time or more is taken to be the bottleneck.
_SATURATED: Final = 0.8

Finding = Callable[[Mapping[str, Any]], str | None]


def _missed(results: Mapping[str, Any], key: str) -> bool:
    return any(v.key == key and v.met is False for v in evaluate(results))


def _per_hop(cfg: Mapping[str, Any], operation: str, field: str = "requests") -> float:
    usage = cfg["operations"].get(operation)
    if not usage:
        return 0.0
    value = usage[field] - (usage["empty_receives"] if field in ("requests", "billed_requests") else 0)
    return float(value) / float(cfg["envelope_hops"])


def _by_share(shares: Mapping[str, float] | None) -> list[tuple[str, float]]:
    """Profile shares, largest first (the results file may store them in key order)."""
    return sorted((shares or {}).items(), key=lambda kv: -kv[1])


def _overhead(results: Mapping[str, Any]) -> str | None:
    if not _missed(results, "overhead_1kb"):
        return None
    shares = _by_share(get_path(results, "overhead", "profile", "1kb"))
    top = ", ".join(f"{k} {v:.0%}" for k, v in shares[:5])
    text = (
        f"**Overhead.** No single part dominates at 1 KB ({top}). Per envelope the layer parses the body, checks "
        "that the handler's result is plain JSON, encodes the outgoing envelope, builds the hop claim (one "
        "conditional update: fence, lease and running status) and stages the send; each costs a few to a few "
        "tens of µs in CPython, so 100 µs needs most of them moved to C or dropped, not one hot spot fixed."
    )
    big = _by_share(get_path(results, "overhead", "profile", "100kb"))
    big_top = big[0] if big else None
    if big_top:
        text += (
            f" At 100 KB `{big_top[0]}` takes {big_top[1]:.0%}: the plain-JSON check walks the result in Python "
            "before the C encoder runs."
        )
    return text


def _component_per_task(cfg: Mapping[str, Any], component: str, service: str, field: str) -> float:
    usage = cfg.get("components", {}).get(component, {}).get(service)
    if not usage or not cfg.get("tasks"):
        return 0.0
    return float(usage[field]) / float(cfg["tasks"])


def _sqs(results: Mapping[str, Any]) -> str | None:
    if not _missed(results, "sqs_per_hop"):
        return None
    cfg = get_path(results, "traffic", DEFAULT_CONFIG)
    hops_per_task = float(cfg["envelope_hops"]) / float(cfg["tasks"])
    create = _component_per_task(cfg, "gateway", "sqs", "billed_requests") / hops_per_task
    sends = _per_hop(cfg, "sqs:SendMessageBatch") + _per_hop(cfg, "sqs:SendMessage") - create
    polls = _per_hop(cfg, "sqs:ReceiveMessage") + _per_hop(cfg, "sqs:DeleteMessageBatch")
    return (
        f"**SQS.** Sends are {fmt(sends)} requests per envelope-hop (the outbox sends the frames of a whole SQS "
        f"batch in one `SendMessageBatch` per destination), the pollers' receives and deletes {fmt(polls)} (one "
        f"each per batch), and the gateway's `SendMessage` of each new task {fmt(create)}: an HTTP create cannot "
        f"wait to share a batch, and a task of this flow has {fmt(hops_per_task, 1)} envelope-hops to spread it "
        f"over. Without the create the layer and its pollers make {fmt(sends + polls)} requests per hop; with it, "
        "0.3 is out of reach for flows this short."
    )


def _wru(results: Mapping[str, Any]) -> str | None:
    if not _missed(results, "wru_per_task"):
        return None
    cfg = get_path(results, "traffic", DEFAULT_CONFIG)
    dynamodb = cfg["services"]["dynamodb"]["per_task"]
    components = sorted(
        ((name, _component_per_task(cfg, name, "dynamodb", "wru")) for name in cfg.get("components", {})),
        key=lambda kv: -kv[1],
    )
    parts = ", ".join(f"{name} {fmt(value, 1)}" for name, value in components if value > 0)
    text = f"**DynamoDB writes.** {fmt(dynamodb['wru'], 1)} write units per task"
    text += f" ({parts}). " if parts else ". "
    return text + (
        "The budget counts the create's task item and its `by_created` entry (2), the body (1), one claim per "
        "actor (3) and x-sink's terminal update (1; a result too large for the task item is read from its checkpoint "
        "line, not written again); more means an item passed 1 KB or a write "
        "the budget leaves out (FLY values, progress `detailed`, a retry) happened."
    )


def _cost(results: Mapping[str, Any]) -> str | None:
    if not any(_missed(results, k) for k in ("cheaper_than_standard", "below_express_1s", "below_express_10s")):
        return None
    cfg = get_path(results, "cost", "configs", DEFAULT_CONFIG)
    mesh = cfg["mesh"]
    total = mesh["total"]
    ranked = sorted(((k, v) for k, v in mesh.items() if k != "total"), key=lambda kv: -kv[1])
    parts = ", ".join(f"{k.replace('_', ' ')} {fmt_money(v)} ({v / total:.0%})" for k, v in ranked[:3])
    standard_goal = cfg["sfn_standard"] / 8
    text = f"**Cost.** {fmt_money(total)} per million tasks, led by {parts}. "
    text += f"Eight times cheaper than Standard means at most {fmt_money(standard_goal)}"
    if mesh["s3_requests"] >= standard_goal:
        text += f"; the x-sink checkpoint alone (S3 requests, {fmt_money(mesh['s3_requests'])}) is above that"
    return text + (
        ". Express bills one request and the duration at 64 MB, so for short steps it stays cheaper than a design "
        "that writes per-hop state to DynamoDB and checkpoints every task to S3; the mesh is cheaper only once "
        "steps are long enough (compare the columns above)."
    )


def _latency(results: Mapping[str, Any]) -> str | None:
    if not (_missed(results, "hop_p50") or _missed(results, "throughput")):
        return None
    data = results["latency"]
    moto = data["moto_requests_per_second"]
    best = max(v for v in moto.values() if v)
    saturation = data["saturation"]
    text = (
        f"**Latency and throughput on moto.** moto serves about {fmt(best, 0)} requests/s here (in its own process, "
        f"beside the mesh's process of gateway, pollers and actors) and a task needs "
        f"{fmt(saturation['aws_requests_per_task'], 1)} requests, so no mesh can pass "
        f"{fmt(data['ceiling_tasks_per_second'], 1)} tasks/s on it; 40 tasks/s would need about "
        f"{fmt(40 * saturation['aws_requests_per_task'], 0)} requests/s. "
    )
    moto_busy, mesh_busy = saturation.get("moto_cpu_busy"), saturation.get("mesh_cpu_busy")
    if moto_busy is not None and mesh_busy is not None:
        text += (
            f"At saturation moto's process was busy {moto_busy * 100:.0f}% of the time and the mesh's "
            f"{mesh_busy * 100:.0f}%: {_limit(moto_busy, mesh_busy)}. "
        )
    return text + (
        "A hop is a chain of moto round trips (receive, pre-flight read, the hop claim, send, delete), each a few "
        "milliseconds; the hop latency here is each task's end-to-end time over SSE divided by its envelope-hops, so "
        "it also carries the gateway's 250 ms poll of the task item. Fewer requests per hop (sections 2 and 3) "
        "improve all three figures."
    )


def _limit(moto_busy: float, mesh_busy: float) -> str:
    if moto_busy >= _SATURATED:
        return (
            "moto is the limit, before the probe's ceiling, as the mesh's requests (conditional updates that moto "
            "validates and applies clause by clause, items it copies, answers built against the service model) "
            "cost it more than the probe's"
        )
    if mesh_busy >= _SATURATED:
        return "the mesh's own process (gateway, pollers, actors on one interpreter lock) is the limit"
    return "neither process is saturated, so the pollers' waits between round trips limit it"


def _coldstart(results: Mapping[str, Any]) -> str | None:
    if not _missed(results, "coldstart_ratio"):
        return None
    actor = get_path(results, "coldstart", "targets", "actor", "top_packages") or {}
    return (
        "**Cold start.** Beyond boto3, the actor entry imports "
        + ", ".join(f"{k} {fmt(v, 1)} ms" for k, v in actor.items() if k not in ("botocore", "boto3", "urllib3"))
        + ". Powertools' batch utility imports asyncio and every event data class; the asya modules build their "
        "dataclasses at import."
    )


_FINDINGS: tuple[Finding, ...] = (_overhead, _sqs, _wru, _cost, _latency, _coldstart)


def findings(results: Mapping[str, Any]) -> list[str]:
    """One paragraph per missed target, in report order."""
    return [text for finding in _FINDINGS if (text := finding(results)) is not None]
