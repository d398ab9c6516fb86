"""Benchmark 9: what watching a task costs, today's build against the new one, measured side by side.

In-process moto and the gateway app served by uvicorn on loopback; the table's reads are metered exactly
(:class:`bench.meter.Meter` with shadow reads). A driver thread plays tasks of 1, 10 and 60 s (three hop claims, then
``succeeded``) straight into the store; the client follows them and the stream's wall time is its Lambda duration.
Time may be compressed (:data:`SPEEDUP`): the follower's cadence (poll 0.25 s / 1 s, fast window 5 s, hold-back 1
s) and the tasks run that many times faster, so every count of polls and reads is the one of the real durations,
and durations are scaled back.

- ``today``: ``GET /api/v1/mesh/{id}/events``, one strongly consistent query per poll, a stream per task, on the 1024
  MB gateway function (MCP ``tools/call`` and A2A waits use the same follower, ``follow_task``: same reads);
- ``new, 1``: ``GET /api/v1/mesh/events?ids={id}``: one eventually consistent ``BatchGetItem`` per poll, on the 128
  MB stream function;
- ``new, 50``: 50 tasks of the same duration on one ``?ids=`` stream: the stream's cost is shared by 50;
- ``polled``: ``GET /api/v1/mesh/{id}`` every 2 s, each a 1024 MB invocation (its reads and wall time measured).

Also measured: the create request's wall time and reads (the ingress invocation).
"""

from __future__ import annotations

import functools
import socket
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Final

import httpx

from bench.meshes import MANIFEST_PATH
from bench.meter import Meter

__all__ = ["DURATIONS", "FAN", "SPEEDUP", "run"]

#: Time compression by task duration: 1 s and 10 s tasks run in real time (a local poll of 50 task items in moto takes
#: a good part of a 0.5 s interval, so compressing them would count fewer polls than AWS would make); 60 s tasks run
#: 5 times faster.
SPEEDUP: Final = {1.0: 1.0, 10.0: 1.0, 60.0: 5.0}
DURATIONS: Final = tuple(SPEEDUP)
FAN: Final = 50
POLL_EVERY: Final = 2.0
_HOPS: Final = 3


def _clock() -> datetime:
    return datetime.now(UTC)


@contextmanager
def _gateway(speedup: float) -> Iterator[tuple[httpx.Client, Meter, Any]]:
    import boto3
    import uvicorn
    from moto import mock_aws

    from asya.manifest import load_manifest
    from asya.store import TaskStore
    from asya_gateway import GatewayConfig, create_app
    from asya_local.provision import provision

    region = "us-east-1"
    with mock_aws():
        clients: dict[str, Any] = {name: boto3.client(name, region_name=region) for name in ("sqs", "dynamodb", "s3")}
        manifest = load_manifest(MANIFEST_PATH)
        resources = provision(manifest, region=region, **clients)
        metered = boto3.client("dynamodb", region_name=region)
        meter = Meter(shadow_dynamodb=clients["dynamodb"])  # the un-hooked client answers the shadow reads
        meter.attach(metered)
        store = TaskStore(
            table=resources.table, bucket=resources.bucket, dynamodb=metered, s3=clients["s3"], clock=_clock
        )
        config = GatewayConfig(
            sse_poll_fast=0.25 / speedup,
            sse_poll_slow=1.0 / speedup,
            sse_fast_window=5.0 / speedup,
            sse_keepalive=15.0 / speedup,
            sse_gap_wait=1.0 / speedup,
        )
        app = create_app(config, manifest=manifest, store=store, sqs=clients["sqs"], clock=_clock)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", ws="none"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.01)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}", timeout=120) as client:
                raw = TaskStore(
                    table=resources.table,
                    bucket=resources.bucket,
                    dynamodb=clients["dynamodb"],
                    s3=clients["s3"],
                    clock=_clock,
                )
                yield client, meter, raw
        finally:
            server.should_exit = True
            thread.join(timeout=10)


def _create(client: httpx.Client) -> str:
    response = client.post("/api/v1/mesh/?actor=analyze", json={"payload": {"n": 1}})
    response.raise_for_status()
    return str(response.json()["id"])


def _view(client: httpx.Client, task_id: str) -> None:
    client.get(f"/api/v1/mesh/{task_id}").raise_for_status()


def _drive(store: Any, ids: list[str], seconds: float, speedup: float, ended: list[float]) -> threading.Thread:
    """Play ``ids`` as tasks of ``seconds`` (compressed) on an unmetered store: three hop claims, then ``succeeded``;
    ``ended`` gets the time the last terminal write returned."""

    def play() -> None:
        start = time.monotonic()
        for hop in range(1, _HOPS + 2):
            time.sleep(max(0.0, start + seconds / speedup * hop / (_HOPS + 1) - time.monotonic()))
            for task_id in ids:
                if hop <= _HOPS:
                    actor = f"a{hop}"
                    store.report_running(
                        task_id, step="processing", actor=actor, route_prev=[], route_curr=actor, route_next=[]
                    )
                else:
                    store.report_final(task_id, status="succeeded", result={"ok": True})
        ended.append(time.monotonic())

    thread = threading.Thread(target=play, daemon=True)
    thread.start()
    return thread


def _read_units(meter: Meter) -> tuple[float, int]:
    """Read units and read requests of the gateway since the last reset."""
    rru, requests = 0.0, 0
    for (component, service, operation), usage in meter.snapshot().items():
        if component != "driver" and service == "dynamodb" and operation in ("Query", "BatchGetItem", "GetItem"):
            rru += usage.rru
            requests += usage.requests
    return rru, requests


def _stream(client: httpx.Client, url: str, done: Callable[[str], bool]) -> float:
    """Read a stream until ``done(data line)`` or its end; its wall time in seconds."""
    started = time.monotonic()
    with client.stream("GET", url) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data:") and done(line):
                break
    return time.monotonic() - started


def _watch(
    client: httpx.Client, store: Any, meter: Meter, *, seconds: float, fan: int, multiplexed: bool, speedup: float
) -> dict[str, Any]:
    """One stream over ``fan`` tasks of ``seconds``. Its Lambda duration is the task's duration plus the lag from
    the last terminal write to the stream's end (scaled back: it is mostly the poll interval)."""
    ids = [_create(client) for _ in range(fan)]
    meter.reset()
    ended: list[float] = []
    finished: set[str] = set()

    def done(line: str) -> bool:
        if '"succeeded"' in line:
            finished.add(next((task_id for task_id in ids if task_id in line), ""))
        return len(finished) >= fan

    driver = _drive(store, ids, seconds, speedup, ended)
    url = f"/api/v1/mesh/events?ids={','.join(ids)}" if multiplexed else f"/api/v1/mesh/{ids[0]}/events"
    _stream(client, url, done)
    lag = time.monotonic() - ended[0] if ended else 0.0
    driver.join()
    rru, requests = _read_units(meter)
    return {
        "tasks": fan,
        "lag_seconds": lag * speedup,
        "stream_seconds": seconds + lag * speedup,
        "read_units": rru,
        "read_requests": requests,
    }


def _median_ms(client: httpx.Client, meter: Meter, request: Callable[[], Any], runs: int) -> tuple[float, float]:
    """Median wall ms and mean read units of ``request``."""
    walls = []
    meter.reset()
    for _ in range(runs):
        started = time.monotonic()
        request()
        walls.append((time.monotonic() - started) * 1000)
    rru, _ = _read_units(meter)
    return statistics.median(walls), rru / runs


def run(*, quick: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "speedup": {f"{seconds:g}": value for seconds, value in SPEEDUP.items()},
        "fan": FAN,
        "poll_every": POLL_EVERY,
        "durations": {},
    }
    fan = 10 if quick else FAN
    runs = 5 if quick else 20
    for speedup in sorted(set(SPEEDUP.values())):
        with _gateway(speedup) as (client, meter, driver_store):
            if "create" not in out:
                create_ms, create_rru = _median_ms(client, meter, lambda: _create(client), runs)
                task_id = _create(client)
                view_ms, view_rru = _median_ms(client, meter, functools.partial(_view, client, task_id), runs)
                out["create"] = {"wall_ms": create_ms, "read_units": create_rru}
                out["view"] = {"wall_ms": view_ms, "read_units": view_rru}
            for seconds in DURATIONS:
                if SPEEDUP[seconds] != speedup:
                    continue
                kwargs: dict[str, Any] = {"seconds": seconds, "speedup": speedup}
                out["durations"][f"{seconds:g}"] = {
                    "today": _watch(client, driver_store, meter, fan=1, multiplexed=False, **kwargs),
                    "new_1": _watch(client, driver_store, meter, fan=1, multiplexed=True, **kwargs),
                    "new_many": _watch(client, driver_store, meter, fan=fan, multiplexed=True, **kwargs),
                }
    return out
