"""Large payloads through the actor layer and the crew against moto (PROTOCOL P-LARGE-2..5): references are read
back before the handler and in x-sink/x-sump checkpoints, large outputs leave as references, resends keep theirs."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from tests.functional.actors import NOW, Harness
from tests.functional.actors import envelope as actor_envelope
from tests.functional.test_sink import Sink
from tests.functional.test_sink import envelope as sink_envelope
from tests.functional.test_sump import Sump, failed

pytestmark = pytest.mark.functional


def _clock() -> datetime:
    return NOW


def _stored(mesh: Any, key: str, value: Any) -> dict[str, str]:
    """Put ``value`` at ``key`` in the project bucket; its reference (P-LARGE-2)."""
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key=key, Body=json.dumps(value).encode())
    return {"__ref__": f"s3://{mesh.resources.bucket}/{key}"}


def _read(mesh: Any, ref: dict[str, str]) -> Any:
    key = ref["__ref__"].removeprefix(f"s3://{mesh.resources.bucket}/")
    return json.loads(mesh.aws.s3.get_object(Bucket=mesh.resources.bucket, Key=key)["Body"].read())


def _payload_keys(mesh: Any) -> list[str]:
    listing = mesh.aws.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix="payloads/")
    return [obj["Key"] for obj in listing.get("Contents", [])]


@pytest.fixture
def actor(mesh: Any) -> Callable[..., Harness]:
    def make(handler: str, **env: str) -> Harness:
        return Harness(mesh, handler, clock=_clock, env=env)

    return make


def test_p_large_4_the_handler_gets_the_payload_and_p_large_2_a_large_output_leaves_as_a_reference(
    mesh: Any, actor: Callable[..., Harness]
) -> None:
    big = {"text": "x" * 3000}
    ref = _stored(mesh, "payloads/t-1/0000-normalize-0badc0de.json", big)
    h = actor("echo", ASYA_OFFLOAD_THRESHOLD_KB="1")
    _, failures = h.run(actor_envelope("t-1", payload=ref))
    assert failures == []
    [out] = h.drain("analyze")
    assert out["payload"]["__ref__"].startswith(f"s3://{mesh.resources.bucket}/payloads/t-1/0001-analyze-")
    assert _read(mesh, out["payload"]) == {**big, "seen": True}, "echo saw the payload itself, not the reference"
    assert h.drain("x-sump") == []


def test_p_large_2_an_output_under_the_threshold_stays_inline(mesh: Any, actor: Callable[..., Harness]) -> None:
    ref = _stored(mesh, "payloads/t-2/0000-normalize-0badc0de.json", {"text": "small"})
    h = actor("echo")
    assert h.run(actor_envelope("t-2", payload=ref))[1] == []
    [out] = h.drain("analyze")
    assert out["payload"] == {"text": "small", "seen": True}


def test_p_large_4_an_unreadable_reference_is_payload_unavailable_at_x_sump(
    mesh: Any, actor: Callable[..., Harness]
) -> None:
    h = actor("echo")
    h.store.create_task(task_id="t-3", actor="normalize")
    missing = {"__ref__": f"s3://{mesh.resources.bucket}/payloads/t-3/0000-normalize-00000000.json"}
    _, failures = h.run(actor_envelope("t-3", payload=missing))
    assert failures == [], "acked once x-sump has it (P-ERR-5)"
    [sump] = h.drain("x-sump")
    assert sump["status"]["reason"] == "PayloadUnavailable"
    assert sump["payload"]["original_payload"] == missing
    assert "does not exist" in sump["payload"]["error"]
    assert h.drain("analyze") == []
    task = h.store.get_task("t-3")
    assert task is not None and task["status"] == "failed"


def test_p_large_4_a_foreign_reference_is_not_followed(mesh: Any, actor: Callable[..., Harness]) -> None:
    h = actor("echo")
    foreign = {"__ref__": "s3://someone-elses-bucket/payloads/t-4/x.json"}
    assert h.run(actor_envelope("t-4", payload=foreign))[1] == []
    [sump] = h.drain("x-sump")
    assert sump["status"]["reason"] == "PayloadUnavailable"
    assert "outside the project bucket" in sump["payload"]["error"]


def test_p_large_5_a_failed_call_hands_on_the_input_reference_not_a_copy(
    mesh: Any, actor: Callable[..., Harness]
) -> None:
    ref = _stored(mesh, "payloads/t-5/0000-normalize-0badc0de.json", {"text": "y" * 2000})
    h = actor("boom")
    assert h.run(actor_envelope("t-5", payload=ref))[1] == []
    [sink] = h.drain("x-sink")
    assert sink["status"]["phase"] == "failed"
    assert sink["payload"]["original_payload"] == ref
    assert _payload_keys(mesh) == ["payloads/t-5/0000-normalize-0badc0de.json"], "nothing offloaded again"


def test_p_large_4_x_sink_checkpoints_and_reports_the_payload_itself(mesh: Any) -> None:
    sink = Sink(mesh)
    sink.store.create_task(task_id="t1", actor="normalize", flow="text-pipeline")
    result = {"summary": "z" * 5000}
    ref = _stored(mesh, "payloads/t1/0003-x-sink-0badc0de.json", result)
    assert sink.run(sink_envelope(payload=ref)) == []
    [key] = sink.keys("succeeded/")
    [checkpoint], _ = sink.object(key)
    assert checkpoint["payload"] == result
    view = sink.store.get_task("t1")
    assert view is not None and view["status"] == "succeeded"
    assert view["result"] == result  # inline: 5 KB is far under the view's 4 MiB limit (GW-DATA-6)
    assert "result_url" not in view


def test_p_large_4_x_sink_keeps_an_unreadable_reference_in_the_checkpoint(mesh: Any) -> None:
    sink = Sink(mesh)
    missing = {"__ref__": f"s3://{mesh.resources.bucket}/payloads/t1/gone.json"}
    assert sink.run(sink_envelope(payload=missing)) == [], "the checkpoint still says where the payload was"
    [key] = sink.keys("succeeded/")
    assert sink.object(key)[0][0]["payload"] == missing


def test_p_large_4_x_sump_checkpoints_the_original_payload_itself(mesh: Any) -> None:
    sump = Sump(mesh)
    original = {"text": "w" * 4000}
    ref = _stored(mesh, "payloads/t1/0000-normalize-0badc0de.json", original)
    env = failed(payload={"error": "route mismatch", "original_payload": ref})
    failures, _ = sump.run(env)
    assert failures == []
    [checkpoint] = mesh.aws.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix="failed/")["Contents"]
    assert sump.read(checkpoint["Key"])[0]["payload"]["original_payload"] == original
