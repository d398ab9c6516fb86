"""The example mesh end to end over HTTP: gateway -> SQS (moto) -> ESM emulator -> actor runtimes -> x-sink -> S3.

GW-CREATE-7/9, GW-TASK-1, GW-SSE-2/5/7/8, GW-OPS-1, P-FAN-2/6, P-SINK-5, P-CKPT-1..4, P-ACK-1.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from asya_local.mesh import LocalMesh
from asya_local.sse import terminal_status
from tests.checkpoints import checkpoint_lines, task_checkpoint

pytestmark = pytest.mark.e2e


def test_gw_ops_1_health(local_mesh: LocalMesh) -> None:
    response = httpx.get(f"{local_mesh.url}/health", timeout=5)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_moto_serves_the_mesh_from_its_own_process(local_mesh: LocalMesh) -> None:
    pid = local_mesh.moto_pid
    assert pid is not None and pid != os.getpid()
    assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1] == str(os.getpid())  # our child
    assert httpx.get(f"{local_mesh.endpoint_url}/moto-api/", timeout=5).status_code == 200


@pytest.mark.parametrize("crew", ["x-sink", "x-sump"])
def test_p_ckpt_1_the_crew_is_consumed_with_batch_size_10_and_no_batching_window(
    local_mesh: LocalMesh, crew: str
) -> None:
    """P-CKPT-1: the more records an invocation holds, the fewer checkpoint PUTs per task; no window, so a lone
    record is not held back (completion latency first)."""
    config = local_mesh.esms[crew].config
    assert (config.batch_size, config.batching_window_seconds) == (10, 0)


def test_text_pipeline_succeeds_with_enriched_result_and_checkpoint(local_mesh: LocalMesh, gateway: Any) -> None:
    task_id = gateway.create(flow="text-pipeline", payload={"text": "Hello   World, what a GREAT day"})
    events = gateway.follow(task_id)

    assert terminal_status(events[-1]) == "succeeded"  # GW-SSE-7: the stream ends with the terminal status
    statuses = [e.json() for e in events if e.event == "status"]
    assert all(s["id"] == task_id for s in statuses)
    percents = [s["progress_percent"] for s in statuses]
    assert percents == sorted(percents)  # progress never goes back
    ids = [int(e.id) for e in events if e.id is not None]
    assert ids == sorted(ids)

    task = gateway.get(task_id)
    assert task["status"] == "succeeded"
    assert task["flow"] == "text-pipeline"
    assert task["progress_percent"] == 100
    result = task["result"]
    assert result["text"] == "Hello   World, what a GREAT day"
    assert result["normalized"] == "hello world, what a great day"
    assert result["sentiment"] == "positive"
    assert result["summary"].startswith("A positive text of 6 words")
    # GW-SSE-5: a fresh client gets every FLY value still in the log; summarize streams its summary word by word
    assert "".join(e.json()["payload"] for e in events if e.event == "fly") == result["summary"]

    key = task["checkpoint_key"]
    assert key.startswith("succeeded/") and key.endswith(".jsonl")
    assert task_id not in key, "ids never steer a key (P-CKPT-2)"
    checkpoint = task_checkpoint(local_mesh.clients.s3, local_mesh.resources.bucket, task)
    assert checkpoint["id"] == task_id
    assert checkpoint["payload"] == result


def test_ten_concurrent_tasks_keep_their_own_results(gateway: Any) -> None:
    texts = [f"Task number {i} is {'good' if i % 2 else 'bad'}" for i in range(10)]
    with ThreadPoolExecutor(max_workers=10) as pool:
        ids = list(pool.map(lambda text: gateway.create(flow="text-pipeline", payload={"text": text}), texts))
        finals = list(pool.map(lambda task_id: gateway.follow(task_id)[-1], ids))
    assert len(set(ids)) == 10
    assert [terminal_status(event) for event in finals] == ["succeeded"] * 10
    for task_id, text in zip(ids, texts, strict=True):
        result = gateway.get(task_id)["result"]
        assert result["text"] == text
        assert result["normalized"] == text.lower()
        assert result["sentiment"] == ("positive" if "good" in text else "negative")


def test_p_fan_6_sentences_fan_out_completes_with_frame_zero_lineage(local_mesh: LocalMesh, gateway: Any) -> None:
    """P-FAN-2/6: frame 0 keeps the task id and decides the task's result; frames 1.. are children with new ids and
    ``parent_id`` = the task id, each analyzed and checkpointed by x-sink (a line each, P-CKPT-3)."""
    task_id = gateway.create(flow="sentences", payload={"text": "I love this. It is broken! Fine?"})
    events = gateway.follow(task_id)
    assert terminal_status(events[-1]) == "succeeded"
    task = gateway.get(task_id)
    assert task["status"] == "succeeded"
    result = task["result"]
    assert result["text"] == "I love this."
    assert result["index"] == 0
    assert result["of"] == 3
    assert result["sentiment"] == "positive"

    children = _children_checkpoints(local_mesh, task_id, expected=2)
    assert sorted((c["payload"]["index"], c["payload"]["sentiment"]) for c in children) == [
        (1, "negative"),
        (2, "neutral"),
    ]
    assert all(c["id"] != task_id and c["status"]["phase"] == "succeeded" for c in children)
    assert len({c["id"] for c in children}) == 2


def _children_checkpoints(mesh: LocalMesh, parent_id: str, *, expected: int) -> list[dict[str, Any]]:
    """The succeeded checkpoint lines whose envelope names ``parent_id``; children may finish after the task's
    terminal status (P-FAN-6), so the bucket is read until ``expected`` are there (or 60 s pass)."""
    s3, bucket = mesh.clients.s3, mesh.resources.bucket
    found: dict[str, list[dict[str, Any]]] = {}

    def children() -> list[dict[str, Any]]:
        return [line for lines in found.values() for line in lines if line.get("parent_id") == parent_id]

    give_up = time.monotonic() + 60
    while len(children()) < expected and time.monotonic() < give_up:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="succeeded/"):
            for item in page.get("Contents", []):
                if item["Key"] not in found:
                    found[item["Key"]] = checkpoint_lines(s3, bucket, item["Key"])
        if len(children()) < expected:
            time.sleep(0.2)
    return children()


def test_gw_sse_8_reconnect_at_the_terminal_event_gets_204(gateway: Any) -> None:
    task_id = gateway.create(flow="text-pipeline", payload={"text": "short"})
    gateway.follow(task_id)
    last = gateway.get(task_id)["last_event_id"]
    response = httpx.get(
        f"{gateway.url}/api/v1/mesh/{task_id}/events", headers={"Last-Event-ID": str(last)}, timeout=10
    )
    assert response.status_code == 204


def test_p_large_2_a_payload_over_the_sqs_limit_runs_the_whole_flow(local_mesh: LocalMesh, gateway: Any) -> None:
    text = "great news " * 150_000  # 1.65 MB: only an S3 reference can carry it between actors
    task_id = gateway.create(flow="text-pipeline", payload={"text": text})
    events = gateway.follow(task_id)
    assert terminal_status(events[-1]) == "succeeded"

    task = gateway.get(task_id)
    result = task["result"]
    assert result["text"] == text
    assert result["normalized"] == text.strip()
    assert result["sentiment"] == "positive"
    s3, bucket = local_mesh.clients.s3, local_mesh.resources.bucket
    offloaded = s3.list_objects_v2(Bucket=bucket, Prefix=f"payloads/{task_id}/").get("Contents", [])
    assert len(offloaded) >= 3, "the gateway and each actor sent a reference"
    checkpoint = task_checkpoint(s3, bucket, task)
    assert checkpoint["payload"] == result, "the checkpoint holds the result itself (P-LARGE-4)"
