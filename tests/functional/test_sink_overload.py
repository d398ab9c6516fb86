"""x-sink under an S3 overload (docs/protocol.md P-SINK-8): a task whose work finished is never ended "timed out"
because its checkpoint PUT was throttled.

S3 answering ``SlowDown`` (or 503) to the checkpoint PUT fails the record, as before, so SQS brings it back and a later
delivery writes the checkpoint. But the task's terminal status is written at once, without the checkpoint: were the
record to reach the DLQ, the task would otherwise stay ``running`` until its deadline failed it, though its result
was in hand. A later delivery whose PUT goes through attaches its checkpoint to the finished task. A PUT refused for
another reason (the object exists, a denied write) still writes nothing before the checkpoint (P-CKPT-1).
"""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.functional.test_sink import KEY, Sink, envelope

pytestmark = pytest.mark.functional


def _slow_down(client: Any, times: list[int]) -> None:
    def hook(params: dict[str, Any], **_: Any) -> None:
        if times[0] > 0 and str(params.get("Key", "")).startswith("succeeded/"):
            times[0] -= 1
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "injected"}}, "PutObject")

    client.meta.events.register("before-parameter-build.s3.PutObject", hook, unique_id="slow-down")


def test_p_sink_8_a_throttled_checkpoint_still_ends_the_task_succeeded_and_a_redelivery_attaches_it(mesh: Any) -> None:
    sink = Sink(mesh)
    sink.store.create_task(task_id="t1", actor="normalize", flow="text-pipeline", payload={"text": "hi"})
    times = [1]
    _slow_down(mesh.aws.s3, times)
    try:
        assert sink.run(envelope()) == [0]  # the record fails: SQS brings it back for its checkpoint
        assert times == [0]
        view = sink.store.get_task("t1")
        assert view is not None
        assert view["status"] == "succeeded" and view["result"] == {"summary": "A friendly greeting."}
        assert view.get("checkpoint_key") is None
        assert sink.keys("succeeded/") == []
        assert sink.run(envelope()) == []  # the redelivery: the PUT goes through
    finally:
        mesh.aws.s3.meta.events.unregister("before-parameter-build.s3.PutObject", unique_id="slow-down")
    [key] = sink.keys("succeeded/")
    assert KEY.fullmatch(key)
    view = sink.store.get_task("t1")
    assert view is not None and view["status"] == "succeeded"
    assert (view["checkpoint_key"], view["checkpoint_line"]) == (key, 1)


def test_p_sink_8_x_sump_fails_a_task_only_it_can_fail_even_when_its_checkpoint_is_throttled(mesh: Any) -> None:
    """The layer could not write ``failed`` (P-SUMP-6 (R3): ``final_by`` x-sump): x-sump writes it ahead of its
    throttled checkpoint, and the redelivery attaches the line."""
    from tests.functional.test_sump import Sump, failed

    sump = Sump(mesh)
    Sink(mesh).store.create_task(task_id="t1", actor="normalize", flow="text-pipeline", payload={"text": "hi"})
    body = failed("t1")
    body["status"]["error"]["final_by"] = "x-sump"
    hook_times = [1]

    def hook(params: dict[str, Any], **_: Any) -> None:
        if hook_times[0] > 0 and str(params.get("Key", "")).startswith("failed/"):
            hook_times[0] -= 1
            raise ClientError({"Error": {"Code": "SlowDown", "Message": "injected"}}, "PutObject")

    mesh.aws.s3.meta.events.register("before-parameter-build.s3.PutObject", hook, unique_id="sump-slow-down")
    try:
        assert sump.run(body)[0] == [0]
        view = Sink(mesh).store.get_task("t1")
        assert view is not None and view["status"] == "failed" and view.get("checkpoint_key") is None
        assert sump.run(body)[0] == []
    finally:
        mesh.aws.s3.meta.events.unregister("before-parameter-build.s3.PutObject", unique_id="sump-slow-down")
    view = Sink(mesh).store.get_task("t1")
    assert view is not None and view["status"] == "failed"
    assert view["checkpoint_key"] == sump.keys()[0] and view["checkpoint_line"] == 1
