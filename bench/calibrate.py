"""Calibration of the capacity model against the local mesh (``python -m bench.calibrate``): an actor capped at
``max_concurrency: 2`` is driven past its cap, behind a stage throttle of a few requests per second, and the 429s
and the backlog the model predicts are compared with those observed.

One actor, ``slow`` (:func:`bench.handlers.pause`: sleeps ``sleep_s`` per record), batch 1, ``max_concurrency: 2``,
in a one-step flow on a fresh ``LocalMesh``; with ``stage_rate`` the gateway is served behind API Gateway's stage
throttle (``gateway.edge.throttle``: ``stage_rate`` requests/s, burst ``stage_burst``; :mod:`asya_local.stagethrottle`).
Phase 1 measures: every call's latency on this machine (botocore ``before-call``/``after-call`` hooks) and the calls
each record takes. The model's busy time per record is then the handler's sleep plus those calls at their measured
latency, plus the event source's own receive and delete, which the local emulator makes in the worker's thread
(Lambda's pollers do not hold the function); a receive under backlog is priced as another SQS call, since measured one
task at a time it also waited for its message. The predicted drain rate is what the model (``asya.capacity.evaluate``)
says the event source's limit breaks at, ``max_concurrency / busy``. Phase 2 offers ``rate`` tasks/s (default: twice
the lower of the drain rate and the stage rate) from ``clients`` threads for ``seconds`` seconds and samples the
queue's depth every second; the model's ramp (``asya.capacity.simulate``, the offered rate from the first second, the
stage's token bucket starting full) predicts the requests refused with 429 and the backlog.

Reported: the predicted and observed drain rate, 429 count and final backlog. Counts are compared, not latencies, so
a busy machine moves the figures little: the 429s within :data:`THROTTLED_TOLERANCE` of the prediction (at least
:data:`THROTTLED_SLACK` requests), the backlog within :data:`BACKLOG_TOLERANCE` of the tasks the stage admitted (the
backlog is the small difference of two rates, so its error is stated against what flowed in). Without a stage
throttle the 429 count is not compared, and the drain rate and backlog use :data:`TOLERANCE` as before. Lambda's
account pool is not calibrated: the local mesh has none.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import httpx

from asya.capacity import Settings, TaskDemand, evaluate, load_quotas, simulate
from asya.manifest import parse_manifest

__all__ = ["BACKLOG_TOLERANCE", "THROTTLED_SLACK", "THROTTLED_TOLERANCE", "TOLERANCE", "main", "run"]

TOLERANCE: Final = 0.30
#: 429s observed vs predicted: a share of the prediction, and at least this many requests (one second of a small
#: stage rate, since a request's arrival in one second or the next decides whether a token was there).
THROTTLED_TOLERANCE: Final = 0.15
THROTTLED_SLACK: Final = 4
#: backlog observed vs predicted, as a share of the tasks the stage admitted.
BACKLOG_TOLERANCE: Final = 0.25
_REPO: Final = Path(__file__).resolve().parent.parent
_ACTOR: Final = "slow"
_FLOW: Final = "calib"
_CAP: Final = 2
_WORKERS: Final = f"esm-asya-calib-{_ACTOR}-"


class _Timer:
    """Per-call latency by ``service:operation`` and the calls of the event source's worker threads."""

    def __init__(self) -> None:
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.worker_calls: dict[str, int] = defaultdict(int)
        self._lock = threading.Lock()

    def attach(self, client: Any) -> None:
        client.meta.events.register("before-call", self._before)
        client.meta.events.register("after-call", self._after)

    def _before(self, context: dict[str, Any], **_: Any) -> None:
        context["calibrate_started"] = time.perf_counter()

    def _after(self, model: Any, parsed: Any, context: dict[str, Any], **_: Any) -> None:
        started = context.get("calibrate_started")
        if started is None or (model.name == "ReceiveMessage" and not parsed.get("Messages")):
            return  # an empty long poll waits for messages, it is not work
        name = f"{model.service_model.service_name}:{model.name}"
        with self._lock:
            self.latency[name].append(time.perf_counter() - started)
            if threading.current_thread().name.startswith(_WORKERS):
                self.worker_calls[name] += 1

    def busy_latency(self, name: str) -> float:
        """A call's latency as work: a receive under backlog returns at once, so it costs what another SQS call
        costs (measured one at a time, a receive also waited for its message to be sent)."""
        if name != "sqs:ReceiveMessage":
            return self.mean(name)
        others = [v for n, values in self.latency.items() if n.startswith("sqs:") and n != name for v in values]
        return statistics.median(others) if others else self.mean(name)

    def mean(self, name: str) -> float:
        values = self.latency.get(name)
        return statistics.fmean(values) if values else 0.0


def _manifest(stage_rate: float | None, stage_burst: int | None) -> Any:
    data: dict[str, Any] = {
        "namespace": "calib",
        "defaults": {"batch_size": 1, "max_receive_count": 50, "timeout": 60},
        "actors": {_ACTOR: {"handler": "bench.handlers.pause", "code": ".", "max_concurrency": _CAP}},
        "flows": {_FLOW: {"route": [_ACTOR], "timeout": 3600}},
    }
    if stage_rate is not None:
        burst = stage_burst if stage_burst is not None else max(1, round(stage_rate))
        data["gateway"] = {"edge": {"throttle": {"rate_limit": stage_rate, "burst_limit": burst}}}
    return parse_manifest(data, base_dir=_REPO, source="calibration manifest")


def _depth(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


class _Offered:
    """What phase 2 offered: creates answered 201, and 429s (each with ``Retry-After``)."""

    def __init__(self) -> None:
        self.created = 0
        self.throttled = 0
        self._lock = threading.Lock()

    def count(self, response: httpx.Response) -> None:
        if response.status_code == 429 and response.headers.get("retry-after"):
            with self._lock:
                self.throttled += 1
        elif response.status_code == 201:
            with self._lock:
                self.created += 1
        else:
            raise RuntimeError(f"calibration: create answered {response.status_code} {response.text}")

    @property
    def total(self) -> int:
        return self.created + self.throttled


def _offer(url: str, payload: Any, *, rate: float, seconds: float, clients: int) -> _Offered:
    """Offer creates at ``rate`` per second, spread over ``clients`` threads, for ``seconds`` seconds. A thread that
    falls behind its schedule (a slow answer) skips the slots it missed rather than sending them in a burst."""
    offered = _Offered()
    errors: list[BaseException] = []
    started = time.monotonic()
    interval = clients / rate

    def client(index: int) -> None:
        due = started + index / rate
        with httpx.Client(timeout=30) as http:
            while due < started + seconds:
                time.sleep(max(0.0, due - time.monotonic()))
                try:
                    offered.count(http.post(f"{url}/api/v1/mesh/", params={"flow": _FLOW}, json={"payload": payload}))
                except BaseException as exc:  # re-raised in the caller's thread below
                    errors.append(exc)
                    return
                due = max(due + interval, time.monotonic())

    threads = [threading.Thread(target=client, args=(i,), name=f"calibrate-client-{i}") for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return offered


def run(
    *,
    sleep_s: float = 0.3,
    rate: float | None = None,
    seconds: float = 20.0,
    stage_rate: float | None = None,
    stage_burst: int | None = None,
    clients: int = 4,
) -> dict[str, Any]:
    """Phase 1 (measure), phase 2 (overload); see the module docstring."""
    from asya_local.mesh import LocalMesh

    manifest = _manifest(stage_rate, stage_burst)
    edge = manifest.gateway.edge.throttle
    payload = {"sleep_s": sleep_s}
    timer = _Timer()
    local = LocalMesh(manifest, port=0, backstop_interval=None, stage_throttle=stage_rate is not None)
    with local as mesh, httpx.Client(timeout=30) as http:
        for client in (mesh.clients.sqs, mesh.clients.dynamodb, mesh.clients.s3):
            timer.attach(client)
        url = mesh.resources.queue_urls[_ACTOR]
        esm = mesh.esms[_ACTOR]
        # phase 1: a few tasks, one at a time, to measure latencies and calls per record
        warm = 10
        for _ in range(warm):
            before = esm.stats.records
            response = http.post(f"{mesh.url}/api/v1/mesh/", params={"flow": _FLOW}, json={"payload": payload})
            if response.status_code != 201:
                raise RuntimeError(f"calibration: create answered {response.status_code} {response.text}")
            while esm.stats.records == before or _depth(mesh.clients.sqs, url):
                time.sleep(0.05)
        records = esm.stats.records
        per_record = {name: n / records for name, n in timer.worker_calls.items()}
        busy = sleep_s + sum(n * timer.busy_latency(name) for name, n in per_record.items())
        demand = TaskDemand(
            stage_requests=1.0,
            busy_seconds={_ACTOR: busy},
            invocations={_ACTOR: 1.0},
            batch_size={_ACTOR: 1.0},
        )
        settings = Settings(
            stage_rate=float(edge.rate_limit) if stage_rate is not None else 1e9,
            stage_burst=int(edge.burst_limit) if stage_rate is not None else 10**9,
            max_concurrency={_ACTOR: _CAP},
        )
        quotas = load_quotas()
        limits = evaluate(demand, settings, quotas)
        drain = next(x for x in limits if x.kind == "event_source" and x.subject == _ACTOR).max_rate
        stage = next(x for x in limits if x.kind == "stage_throttle").max_rate
        offered_rate = rate if rate is not None else 2.0 * min(drain, stage)
        # the bucket refills to its burst before phase 2, as it would after any pause
        time.sleep(min(5.0, settings.stage_burst / settings.stage_rate))
        # phase 2: offer more than the mesh takes, sample the depth every second
        samples: list[tuple[float, int]] = []
        done = threading.Event()

        def sample() -> None:
            started = time.monotonic()
            while not done.is_set():
                samples.append((time.monotonic() - started, _depth(mesh.clients.sqs, url)))
                done.wait(1.0)

        sampler = threading.Thread(target=sample, name="calibrate-sampler", daemon=True)
        finished_before = esm.stats.records
        sampler.start()
        started = time.monotonic()
        offered = _offer(mesh.url, payload, rate=offered_rate, seconds=seconds, clients=clients)
        elapsed = time.monotonic() - started
        done.set()
        sampler.join()
        finished = esm.stats.records - finished_before
        final_depth = _depth(mesh.clients.sqs, url)
    observed_drain = finished / elapsed
    ramp = simulate(
        demand,
        settings,
        quotas,
        rate=offered.total / elapsed,
        deadline_seconds=3600,
        max_receive_count=50,
        ramp_seconds=1,
        hold_seconds=max(1, round(elapsed) - 1),
    )
    predicted_backlog = ramp.steps[-1].backlog
    predicted_throttled = ramp.refused_requests
    admitted = sum(step.admitted for step in ramp.steps)
    result: dict[str, Any] = {
        "sleep_s": sleep_s,
        "max_concurrency": _CAP,
        "stage_rate": stage_rate,
        "stage_burst": settings.stage_burst if stage_rate is not None else None,
        "call_latency_ms": {name: round(timer.mean(name) * 1000, 2) for name in sorted(timer.latency)},
        "calls_per_record": {name: round(n, 3) for name, n in sorted(per_record.items())},
        "busy_per_record_s": round(busy, 4),
        "offered_rate": round(offered.total / elapsed, 2),
        "offered": offered.total,
        "seconds": round(elapsed, 2),
        "predicted_drain_rate": round(drain, 2),
        "observed_drain_rate": round(observed_drain, 2),
        "predicted_admitted": round(admitted, 1),
        "observed_admitted": offered.created,
        "predicted_429": round(predicted_throttled, 1),
        "observed_429": offered.throttled,
        "predicted_backlog": round(predicted_backlog, 1),
        "observed_backlog": final_depth,
        "drain_ratio": round(observed_drain / drain, 3) if drain else None,
        "backlog_ratio": round(final_depth / predicted_backlog, 3) if predicted_backlog else None,
        "samples": samples,
    }
    if stage_rate is None:
        result["tolerance"] = TOLERANCE
        result["within_tolerance"] = all(
            ratio is not None and abs(ratio - 1) <= TOLERANCE
            for ratio in (result["drain_ratio"], result["backlog_ratio"])
        )
    else:
        throttled_bound = max(THROTTLED_SLACK, THROTTLED_TOLERANCE * predicted_throttled)
        backlog_bound = BACKLOG_TOLERANCE * admitted
        result["tolerance"] = {"429": round(throttled_bound, 1), "backlog": round(backlog_bound, 1)}
        result["within_tolerance"] = (
            abs(offered.throttled - predicted_throttled) <= throttled_bound
            and abs(final_depth - predicted_backlog) <= backlog_bound
        )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.calibrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sleep", type=float, default=0.3, help="handler seconds per record (default 0.3)")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of overload (default 20)")
    parser.add_argument("--rate", type=float, default=None, help="offered tasks/s (default: twice what the mesh takes)")
    parser.add_argument("--stage-rate", type=float, default=None, help="stage throttle, requests/s (default: none)")
    parser.add_argument("--stage-burst", type=int, default=None, help="stage burst (default: one second's rate)")
    args = parser.parse_args(argv)
    result = run(
        sleep_s=args.sleep,
        rate=args.rate,
        seconds=args.seconds,
        stage_rate=args.stage_rate,
        stage_burst=args.stage_burst,
    )
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))
    return 0 if result["within_tolerance"] else 1


if __name__ == "__main__":
    sys.exit(main())
