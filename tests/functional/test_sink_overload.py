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
