"""What a user pays end to end, per million tasks: ingress and watching priced on both sides. Pure.

From the watching benchmark (:mod:`bench.watching`: streams' durations and read units, the create's and a view's wall
time and reads), the orchestration cost of section 3 (batch 10 for full batches, batch 1 for a trickle, progress
``hops``) and ``bench/prices.toml``:

- **watching** (a stream): its Lambda duration (the task's duration plus the measured lag to the stream's end) x the
  serving function's memory, its invocation, and its reads; a stream of ``n`` tasks is shared by ``n``. Today: 1024
  MB, one stream per task, strongly consistent queries; new: the 128 MB stream function, ``?ids=`` streams;
- **ingress**: one API Gateway request and the main function's create invocation (its measured wall time at 1024
  MB); a stream, an MCP ``tools/call`` and every poll are one API Gateway request more;
- **polled**: ``GET /api/v1/mesh/{id}`` every 2 s (one more at the end), each an invocation of the main function;
- **MCP** ``tools/call``: one request whose invocation creates the task and follows it (today's follower, on the
  stream function in the new build);
- **Step Functions**: the same API Gateway request for ``StartExecution``; Standard watched by ``DescribeExecution``
  through API Gateway every 2 s (the call itself is not billed); Express has no ``DescribeExecution``: it is watched
  by ``StartSyncExecution``, whose one request waits, so watching adds nothing to its price.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from bench.cost import PER_MILLION, PriceTable, sfn_express_cost, sfn_standard_cost

__all__ = ["MAIN_MB", "STREAM_MB", "TODAY_MB", "price", "watch_cost"]

MAIN_MB: Final = 1024
TODAY_MB: Final = 1024
STREAM_MB: Final = 128


def _lambda(prices: PriceTable, seconds: float, memory_mb: int, invocations: float = 1.0) -> float:
    """USD per million of ``invocations`` invocations running ``seconds`` in all at ``memory_mb``."""
    gbs = seconds * memory_mb / 1024 * prices.each("lambda_arm_gb_second")
    return (gbs + invocations * prices.each("lambda_request")) * PER_MILLION


def _reads(prices: PriceTable, units: float) -> float:
    return units * prices.each("dynamodb_read_request_unit") * PER_MILLION


def watch_cost(stream: Mapping[str, Any], prices: PriceTable, *, memory_mb: int) -> float:
    """USD per million tasks watched by ``stream`` (shared by its tasks)."""
    tasks = float(stream["tasks"])
    return (_lambda(prices, stream["stream_seconds"], memory_mb) + _reads(prices, stream["read_units"])) / tasks


def price(watching: Mapping[str, Any], cost: Mapping[str, Any], prices: PriceTable) -> dict[str, Any]:
    """Watching rows (today and new) and end-to-end rows per task duration, USD per million tasks."""
    apigw = prices.each("apigw_rest_request") * PER_MILLION
    configs = cost.get("configs", {})
    full = configs.get("b10-hops", {}).get("mesh", {}).get("total")
    trickle = configs.get("b1-hops", {}).get("mesh", {}).get("total")
    steps = int(configs.get("b10-hops", {}).get("profile", {}).get("steps") or 3)
    create_s = watching["create"]["wall_ms"] / 1000
    view_s = watching["view"]["wall_ms"] / 1000
    ingress = apigw + _lambda(prices, create_s, MAIN_MB) + _reads(prices, watching["create"]["read_units"])
    poll = apigw + _lambda(prices, view_s, MAIN_MB) + _reads(prices, watching["view"]["read_units"])
    out: dict[str, Any] = {"ingress": ingress, "orchestration": full, "trickle_orchestration": trickle, "rows": {}}
    for seconds, runs in watching["durations"].items():
        duration = float(seconds)
        today = watch_cost(runs["today"], prices, memory_mb=TODAY_MB)
        new = watch_cost(runs["new_1"], prices, memory_mb=STREAM_MB)
        many = watch_cost(runs["new_many"], prices, memory_mb=STREAM_MB)
        polls = math.ceil(duration / watching["poll_every"]) + 1
        mcp_today = (
            apigw
            + _lambda(prices, runs["today"]["stream_seconds"] + create_s, TODAY_MB)
            + _reads(prices, runs["today"]["read_units"])
        )
        mcp_new = (
            apigw
            + _lambda(prices, runs["today"]["stream_seconds"] + create_s, STREAM_MB)
            + _reads(prices, runs["today"]["read_units"])
        )
        row: dict[str, Any] = {
            "watch_today": today,
            "watch_new": new,
            "watch_new_many_per_task": many,
            "today_over_new": today / new if new else None,
            "many_over_one": many / new if new else None,
            "polled_watch": polls * poll,
        }
        if full is not None:
            unwatched = ingress + full
            row.update(
                {
                    "unwatched": unwatched,
                    "sse_today": unwatched + apigw + today,
                    "sse_new": unwatched + apigw + new,
                    "sse_new_many": unwatched + apigw / runs["new_many"]["tasks"] + many,
                    "mcp_today": full + mcp_today,
                    "mcp_new": full + mcp_new,
                    "polled": unwatched + polls * poll,
                }
            )
        if trickle is not None:
            row["trickle"] = ingress + trickle
            row["trickle_sse_new"] = ingress + trickle + apigw + new
        standard = apigw + sfn_standard_cost(steps, prices)
        express = apigw + sfn_express_cost(steps, duration / steps, prices)
        row.update(
            {
                "sfn_standard": standard,
                "sfn_standard_watched": standard + polls * apigw,
                "sfn_express": express,
                "sfn_express_watched": express,
            }
        )
        out["rows"][seconds] = row
    return out
