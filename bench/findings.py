"""Why a target is missed, told from the measured figures: one paragraph per missed target. Pure.

Each finding reads the results document and returns ``None`` when its target is met or was not measured, so the
report never keeps an explanation the figures no longer support.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from asya import tableschema
from bench.report import fmt, fmt_money
from bench.targets import DEFAULT_CONFIG, evaluate, get_path

__all__ = ["findings"]

Finding = Callable[[Mapping[str, Any]], str | None]


def _missed(results: Mapping[str, Any], key: str) -> bool:
    return any(v.key == key and v.met is False for v in evaluate(results))


def _per_hop(cfg: Mapping[str, Any], operation: str, field: str = "requests") -> float:
    usage = cfg["operations"].get(operation)
    if not usage:
        return 0.0
    value = usage[field] - (usage["empty_receives"] if field in ("requests", "billed_requests") else 0)
    return float(value) / float(cfg["envelope_hops"])


def _overhead(results: Mapping[str, Any]) -> str | None:
    if not _missed(results, "overhead_1kb"):
        return None
    shares = get_path(results, "overhead", "profile", "1kb") or {}
    top = ", ".join(f"{k} {v:.0%}" for k, v in list(shares.items())[:5])
    lead = next(iter(shares.items()), ("", 0.0))
    if lead[1] >= 0.3:
        text = f"**Overhead.** At 1 KB `{lead[0]}` takes {lead[1]:.0%} of the layer's CPU ({top})."
    else:
        text = (
            f"**Overhead.** No single part dominates at 1 KB ({top}): the store's status write (building the update "
            "expression and the event item), converting the handler's result (`to_jsonable`), JSON encoding and "
            "decoding, and the per-record idempotency bookkeeping each take a share; reaching 100 µs means "
            "trimming all of them."
        )
    big = get_path(results, "overhead", "profile", "100kb") or {}
    big_top = next(iter(big.items()), None)
    text = (
        f"**Overhead.** No single part dominates at 1 KB ({top}): the store's status write (building the update "
        "expression and the event item), converting the handler's result (`to_jsonable`), JSON encoding and "
        "decoding, and the per-record idempotency bookkeeping each take a share."
    )
    if big_top:
        text += (
            f" At 100 KB `{big_top[0]}` takes {big_top[1]:.0%}: the result is walked in Python before it is encoded; "
            "a C-level fast path for plain JSON values (exact `dict`/`list`/`str`/`int`/`float`/`bool`/`None`) would "
            "remove most of it."
        )
    return text


def _sqs(results: Mapping[str, Any]) -> str | None:
    if not _missed(results, "sqs_per_hop"):
        return None
    cfg = get_path(results, "traffic", DEFAULT_CONFIG)
    sends = _per_hop(cfg, "sqs:SendMessageBatch") + _per_hop(cfg, "sqs:SendMessage")
    polls = _per_hop(cfg, "sqs:ReceiveMessage") + _per_hop(cfg, "sqs:DeleteMessageBatch")
    return (
        f"**SQS.** Sends are {fmt(sends)} requests per envelope-hop and the pollers' receives and deletes "
        f"{fmt(polls)}: each record's frames leave in their own `SendMessageBatch` when its handler call ends, so a "
        "batch of 10 records makes 10 sends. Collecting the frames of all records of an SQS batch and sending them "
        "together (one `SendMessageBatch` per destination and 10 entries, each record acked only if its own entries "
        "went out) would bring sends to about 0.1 per hop and the total to about 0.3. That change is in the layer's "
        "batch loop (`asya.sidecar`, `asya.hop`)."
    )


def _wru(results: Mapping[str, Any]) -> str | None:
    if not _missed(results, "wru_per_hop"):
        return None
    cfg = get_path(results, "traffic", DEFAULT_CONFIG)
    dynamodb = cfg["services"]["dynamodb"]["per_task"]
    index_share = dynamodb["wru_index"] / dynamodb["wru"] if dynamodb["wru"] else 0.0
    ranked = sorted(
        ((op, _per_hop(cfg, op, "wru")) for op in cfg["operations"] if op.startswith("dynamodb:")),
        key=lambda kv: -kv[1],
    )
    parts = ", ".join(f"{op.split(':', 1)[1]} {fmt(value)}" for op, value in ranked if value > 0)
    full = [f"`{gsi.name}`" for gsi in tableschema.GSIS if gsi.projection is None]
    text = f"**DynamoDB writes.** {fmt(dynamodb['wru'], 1)} write units per task ({parts} per hop). "
    if full:
        text += (
            f"{index_share:.0%} of them are index writes: {' and '.join(full)} project every attribute, so each "
            "status, progress or FLY update of the task item rewrites those index entries although no index key "
            "changes. Projecting only the keys (the list route would then read a page's task items with one "
            "`BatchGetItem`) would remove most of them. "
        )
    return text + (
        "The rest is per record: the status update, its event item, one idempotency item per sent frame "
        "(one `BatchWriteItem` per record, not per batch), and for FLY a task-item update plus an event item per "
        "flush. With an event item per hop the design cannot reach 1 unit per hop; batching the idempotency items "
        "of a whole SQS batch and one FLY flush per hop are the next levers."
    )


def _cost(results: Mapping[str, Any]) -> str | None:
    if not any(_missed(results, k) for k in ("cheaper_than_standard", "below_express_1s", "below_express_10s")):
        return None
    cfg = get_path(results, "cost", "configs", DEFAULT_CONFIG)
    mesh = cfg["mesh"]
    total = mesh["total"]
    ranked = sorted(((k, v) for k, v in mesh.items() if k != "total"), key=lambda kv: -kv[1])
    parts = ", ".join(f"{k.replace('_', ' ')} {fmt_money(v)} ({v / total:.0%})" for k, v in ranked[:3])
    standard_goal = cfg["sfn_standard"] / 20
    text = f"**Cost.** {fmt_money(total)} per million tasks, led by {parts}. "
    text += f"Twenty times cheaper than Standard means at most {fmt_money(standard_goal)}"
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
    return (
        f"**Latency and throughput on moto.** moto serves about {fmt(best, 0)} requests/s here (one process, the "
        f"GIL shared with the gateway, the pollers and the actors) and a task needs "
        f"{fmt(data['saturation']['aws_requests_per_task'], 1)} requests, so no mesh can pass "
        f"{fmt(data['ceiling_tasks_per_second'], 1)} tasks/s on it; 40 tasks/s would need about "
        f"{fmt(40 * data['saturation']['aws_requests_per_task'], 0)} requests/s. A hop is a chain of moto round trips "
        "(receive, pre-flight read, status update and event, send, idempotency write, delete), each a few "
        "milliseconds, so the hop latency tracks the request count per hop rather than the layer's CPU. Fewer "
        "requests per hop (sections 2 and 3) improve all three figures."
    )


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
