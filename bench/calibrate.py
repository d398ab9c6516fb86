"""Calibration of the capacity model against the local mesh (``python -m bench.calibrate``): an actor capped at
``max_concurrency: 2`` is driven past its cap, and the backlog the model predicts is compared with the one observed.

One actor, ``slow`` (:func:`bench.handlers.pause`: sleeps ``sleep_s`` per record), batch 1, ``max_concurrency: 2``,
in a one-step flow on a fresh ``LocalMesh``. Phase 1 measures: every call's latency on this machine (botocore
``before-call``/``after-call`` hooks) and the calls each record takes. The model's busy time per record is then the
handler's sleep plus those calls at their measured latency, plus the event source's own receive and delete, which the
local emulator makes in the worker's thread (Lambda's pollers do not hold the function); a receive under backlog is
priced as another SQS call, since measured one task at a time it also waited for its message. The predicted drain
rate is what the model (``asya.capacity.evaluate``) says the event source's limit breaks at, ``max_concurrency /
busy``. Phase 2 offers ``rate`` tasks/s (default: twice that) for ``seconds`` seconds and samples the queue's depth
every second; the model's ramp (``asya.capacity.simulate``, the offered rate from the first second) predicts the
backlog. Reported: the predicted and observed drain rate and final backlog, and their ratios (tolerance 30%).

The local mesh has no stage throttle (API Gateway's), so 429s are not calibrated here; nor is Lambda's account pool.
On a machine shared with other work the observed figures move; run it on an idle one.
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

__all__ = ["TOLERANCE", "main", "run"]

TOLERANCE: Final = 0.30
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


def _manifest(sleep_s: float) -> Any:
    data = {
        "namespace": "calib",
        "defaults": {"batch_size": 1, "max_receive_count": 50, "timeout": 60},
        "actors": {_ACTOR: {"handler": "bench.handlers.pause", "code": ".", "max_concurrency": _CAP}},
        "flows": {_FLOW: {"route": [_ACTOR], "timeout": 3600}},
    }
    del sleep_s
    return parse_manifest(data, base_dir=_REPO, source="calibration manifest")


def _depth(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"]) + int(attributes["ApproximateNumberOfMessagesNotVisible"])


def _offer(http: httpx.Client, url: str, payload: Any, *, rate: float, seconds: float, stop: float) -> int:
    """Create tasks at ``rate`` per second until ``seconds`` have passed; the number created."""
    created = 0
    started = time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate) + 1
        while created < due:
            response = http.post(f"{url}/api/v1/mesh/", params={"flow": _FLOW}, json={"payload": payload})
            if response.status_code != 201:
                raise RuntimeError(f"calibration: create answered {response.status_code} {response.text}")
            created += 1
        time.sleep(min(stop, max(0.0, (created / rate) - (time.monotonic() - started))))
    return created


def run(*, sleep_s: float = 0.3, rate: float | None = None, seconds: float = 20.0) -> dict[str, Any]:
    """Phase 1 (measure), phase 2 (overload); see the module docstring."""
    from asya_local.mesh import LocalMesh

    manifest = _manifest(sleep_s)
    payload = {"sleep_s": sleep_s}
    timer = _Timer()
    with LocalMesh(manifest, port=0, backstop_interval=None) as mesh, httpx.Client(timeout=30) as http:
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
        settings = Settings(stage_rate=1e9, max_concurrency={_ACTOR: _CAP})
        quotas = load_quotas()
        limit = next(x for x in evaluate(demand, settings, quotas) if x.name == f"event source concurrency of {_ACTOR}")
        drain = limit.max_rate
        offered = rate if rate is not None else 2.0 * drain
        # phase 2: offer twice the predicted drain rate, sample the depth every second
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
        created = _offer(http, mesh.url, payload, rate=offered, seconds=seconds, stop=0.05)
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
        rate=created / elapsed,
        deadline_seconds=3600,
        max_receive_count=50,
        ramp_seconds=1,
        hold_seconds=max(1, round(elapsed) - 1),
    )
    predicted_backlog = ramp.steps[-1].backlog
    result: dict[str, Any] = {
        "sleep_s": sleep_s,
        "max_concurrency": _CAP,
        "call_latency_ms": {name: round(timer.mean(name) * 1000, 2) for name in sorted(timer.latency)},
        "calls_per_record": {name: round(n, 3) for name, n in sorted(per_record.items())},
        "busy_per_record_s": round(busy, 4),
        "offered_rate": round(created / elapsed, 2),
        "seconds": round(elapsed, 2),
        "predicted_drain_rate": round(drain, 2),
        "observed_drain_rate": round(observed_drain, 2),
        "predicted_backlog": round(predicted_backlog, 1),
        "observed_backlog": final_depth,
        "drain_ratio": round(observed_drain / drain, 3) if drain else None,
        "backlog_ratio": round(final_depth / predicted_backlog, 3) if predicted_backlog else None,
        "tolerance": TOLERANCE,
        "samples": samples,
    }
    result["within_tolerance"] = all(
        ratio is not None and abs(ratio - 1) <= TOLERANCE for ratio in (result["drain_ratio"], result["backlog_ratio"])
    )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.calibrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sleep", type=float, default=0.3, help="handler seconds per record (default 0.3)")
    parser.add_argument("--seconds", type=float, default=20.0, help="seconds of overload (default 20)")
    parser.add_argument("--rate", type=float, default=None, help="offered tasks/s (default: twice the predicted drain)")
    args = parser.parse_args(argv)
    result = run(sleep_s=args.sleep, rate=args.rate, seconds=args.seconds)
    print(json.dumps({k: v for k, v in result.items() if k != "samples"}, indent=1))
    return 0 if result["within_tolerance"] else 1


if __name__ == "__main__":
    sys.exit(main())
