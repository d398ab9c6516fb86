"""Benchmark 10: what the stream function needs: the memory of one process serving one stream, and its cold start.

**Memory.** A Lambda environment serves one invocation at a time, so the memory a stream needs is the RSS of one
gateway process serving one stream. moto's server runs in its own process (``asya_local.moto_server``); a fresh
child process runs the gateway app under uvicorn against it, as ``run.sh`` does in Lambda; the parent opens one
``?ids=`` stream on a running task and keeps it open for :data:`HOLD_SECONDS` s of polls, then reads the child's
``VmRSS`` and peak ``VmHWM`` from ``/proc``. The Lambda Web Adapter's own memory (a small Rust extension) is not in
this figure.

**Cold start.** The CPU time (user + system) of importing ``asya_gateway.app`` and building the app in a fresh process,
median of :data:`IMPORT_RUNS`. Lambda gives a function CPU in proportion to its memory (one vCPU at 1,769 MB), so a
cold start takes about that CPU time x 1769 / memory at 128 MB and at 1024 MB (the init phase itself runs at full
speed for up to 10 s on AWS's documented "burst" only for SnapStart-less init, which this estimate ignores: it is
the slow bound).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Final

import httpx

__all__ = ["HOLD_SECONDS", "IMPORT_RUNS", "run"]

HOLD_SECONDS: Final = 5.0
IMPORT_RUNS: Final = 5
_FULL_VCPU_MB: Final = 1769
_REPO: Final = Path(__file__).resolve().parent.parent


def _status_mb(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            out[name] = int(value.split()[0]) / 1024
    return out


def _child(endpoint: str, table: str, bucket: str) -> None:
    import uvicorn

    from asya.manifest import load_manifest
    from asya.store import TaskStore
    from asya_gateway import GatewayConfig, create_app
    from asya_local.moto_server import make_clients

    clients = make_clients(endpoint)
    store = TaskStore(table=table, bucket=bucket, dynamodb=clients.dynamodb, s3=clients.s3)
    app = create_app(GatewayConfig(), manifest=load_manifest(_REPO / "asya.yaml"), store=store, sqs=clients.sqs)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    print(sock.getsockname()[1], flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", ws="none")).run(sockets=[sock])


def _import_cpu_seconds() -> float:
    code = (
        "from asya_gateway import GatewayConfig, create_app\n"
        "import asya_gateway.app, asya_gateway.routes.watch, asya_gateway.multifollow\n"
    )
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=_REPO)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run() -> dict[str, Any]:
    from asya.manifest import load_manifest
    from asya.store import TaskStore
    from asya_local.moto_server import MotoServer
    from asya_local.provision import provision

    out: dict[str, Any] = {"hold_seconds": HOLD_SECONDS}
    with MotoServer() as server:
        clients = server.clients()
        resources = provision(
            load_manifest(_REPO / "asya.yaml"),
            sqs=clients.sqs,
            dynamodb=clients.dynamodb,
            s3=clients.s3,
            region="us-east-1",
        )
        store = TaskStore(table=resources.table, bucket=resources.bucket, dynamodb=clients.dynamodb, s3=clients.s3)
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.streammem",
                "--child",
                str(server.endpoint_url),
                resources.table,
                str(resources.bucket),
            ],
            cwd=_REPO,
            stdout=subprocess.PIPE,
            env={**os.environ, "POWERTOOLS_LOG_LEVEL": "WARNING"},
        )
        try:
            assert child.stdout is not None
            port = int(child.stdout.readline())
            url = f"http://127.0.0.1:{port}"
            with httpx.Client(base_url=url, timeout=60) as client:
                created = client.post("/api/v1/mesh/?actor=analyze", json={"payload": {"n": 1}})
                created.raise_for_status()
                task_id = created.json()["id"]
                out["idle"] = _status_mb(child.pid)
                seen: list[str] = []

                def read() -> None:
                    with client.stream("GET", f"/api/v1/mesh/events?ids={task_id}") as response:
                        for line in response.iter_lines():
                            seen.append(line)

                reader = threading.Thread(target=read, daemon=True)
                reader.start()
                deadline = time.monotonic() + HOLD_SECONDS
                while time.monotonic() < deadline:
                    store.report_running(
                        task_id,
                        step="processing",
                        actor="analyze",
                        route_prev=[],
                        route_curr="analyze",
                        route_next=[],
                    )
                    time.sleep(0.5)
                out["streaming"] = _status_mb(child.pid)
                store.report_final(task_id, status="succeeded", result={"ok": True})
                reader.join(timeout=30)
                out["events_seen"] = sum(1 for line in seen if line.startswith("event:"))
        finally:
            child.terminate()
            child.wait(timeout=10)
    cpu = statistics.median(_import_cpu_seconds() for _ in range(IMPORT_RUNS))
    out["import_cpu_seconds"] = cpu
    out["cold_start_seconds"] = {str(mb): cpu * max(1.0, _FULL_VCPU_MB / mb) for mb in (128, 256, 1024)}
    return out


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(*sys.argv[2:5])
    else:
        print(json.dumps(run(), indent=1))
