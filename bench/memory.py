"""Benchmark 6: peak resident memory of an actor process handling 100 batches of 10 x 256 KB payloads.

A fresh process (``python -m bench.memory --child``) builds the ``echo`` actor's runtime with in-memory clients
(:mod:`bench.fakes`; they keep no bodies), creates real boto3 SQS, DynamoDB and S3 clients beside it so their service
models are resident as in Lambda (they are never called), handles the batches, and reports its peak RSS (``VmHWM``)
after start-up and at the end. The target is a 128 MB Lambda.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, Final

__all__ = ["PAYLOAD_KB", "run"]

PAYLOAD_KB: Final = 256
BATCHES: Final = 100
_REPO: Final = Path(__file__).resolve().parent.parent


def _peak_mb() -> float:
    """The process's peak RSS: ``VmHWM`` (this address space only; ``ru_maxrss`` keeps the high-water mark of the
    process that forked this one across ``exec``), else ``ru_maxrss``."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kilobytes on Linux


def _child(batches: int) -> dict[str, Any]:
    import boto3

    from bench.fakes import InMemoryAws
    from bench.overhead import _Context, make_event, make_payload, make_runtime

    aws = InMemoryAws()
    with Path(os.devnull).open("w") as sink, redirect_stdout(sink):
        runtime = make_runtime(aws)
    session = boto3.session.Session()
    resident = [
        session.client(s, region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        for s in ("sqs", "dynamodb", "s3")
    ]
    payload = make_payload(PAYLOAD_KB * 1024)
    context = _Context()
    started_mb = _peak_mb()
    failures = 0
    for _ in range(batches):
        response = runtime.handle(make_event(payload), context)
        failures += len(response.get("batchItemFailures", []))
    return {
        "batches": batches,
        "payload_bytes": len(json.dumps(payload, separators=(",", ":"))),
        "peak_rss_after_startup_mb": started_mb,
        "peak_rss_mb": _peak_mb(),
        "failures": failures,
        "sends": aws.calls[("sqs", "SendMessageBatch")] + aws.calls[("sqs", "SendMessage")],
        "clients": len(resident),
    }


def run(*, batches: int = BATCHES) -> dict[str, Any]:
    env = {**os.environ, "POWERTOOLS_LOG_LEVEL": "WARNING"}
    result = subprocess.run(
        [sys.executable, "-m", "bench.memory", "--child", str(batches)],
        cwd=_REPO,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    measured: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    if measured["failures"]:
        raise RuntimeError(f"memory benchmark: {measured['failures']} records failed")
    return measured


if __name__ == "__main__" and sys.argv[1:2] == ["--child"]:
    print(json.dumps(_child(int(sys.argv[2]))))
