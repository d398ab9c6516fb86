"""A succeeded task's result read from its checkpoint line (GW-DATA-10), on moto.

x-sink names the bytes of each succeeded task's checkpoint line on its terminal write (``result_span``). A result too
large for the task item is then read from the line with one ranged GET, and no ``RESULT`` item is written: every
reader (the view, a follower's snapshot) sees the same result as with a result item. A mesh whose checkpoints may go
before its task records (``ASYA_RESULT_IN_CHECKPOINT=false``) keeps writing the result item.
"""

from __future__ import annotations

from typing import Any

import pytest

from asya.envnames import ENV
from asya.store import records as rec
from tests.functional.test_sink import Sink, envelope

pytestmark = pytest.mark.functional

BIG = {"summary": "é" * 600, "words": list(range(200))}  # over the task item's room, about 2 KB


def _item(sink: Sink, task_id: str, sk: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = sink.mesh.aws.dynamodb.get_item(
        TableName=sink.mesh.resources.table, Key=rec.key(task_id, sk), ConsistentRead=True
    ).get("Item")
    return found


def _s3_gets(sink: Sink) -> list[dict[str, Any]]:
    gets: list[dict[str, Any]] = []
    sink.mesh.aws.s3.meta.events.register(
        "provide-client-params.s3.GetObject", lambda params, **_: gets.append(dict(params))
    )
    return gets


def test_gw_data_10_a_large_result_is_read_from_the_checkpoint_line_and_no_result_item_is_written(mesh: Any) -> None:
    sink = Sink(mesh)
    small = {"summary": "short"}
    bodies = [envelope("t1", payload=BIG), envelope("t2", payload=small), envelope("t3", payload={**BIG, "n": 3})]
    for body in bodies:
        sink.store.create_task(task_id=body["id"], actor="normalize")
    assert sink.run(*bodies) == []
    first_line = _line_bytes(sink, "t1")
    gets = _s3_gets(sink)
    for body in bodies:
        task_id = body["id"]
        assert _item(sink, task_id, rec.RESULT_SK) is None, f"{task_id}: no result item"
        item = _item(sink, task_id, rec.TASK_SK)
        assert item is not None and "has_result" not in item
        view = sink.store.get_task(task_id)
        assert view is not None and view["status"] == "succeeded" and view["result"] == body["payload"]
        snapshot = sink.store.snapshot(task_id, 0)
        assert snapshot is not None and snapshot.data["result"] == body["payload"], "a follower sees it too"
    # the small result rides on the task item; the large ones name their line's bytes and are read by range
    assert "result" in (_item(sink, "t2", rec.TASK_SK) or {})
    spans = [rec.parse_span((_item(sink, t, rec.TASK_SK) or {})["result_span"]["S"]) for t in ("t1", "t3")]
    assert spans[0] == (0, len(first_line)) and spans[1] is not None and spans[1][0] > spans[0][1]
    # one ranged GET per read of a large result (a view and a snapshot each for t1 and t3), all on the one object
    assert len(gets) == 4 and all(get["Range"].startswith("bytes=") for get in gets)
    assert {get["Key"] for get in gets} == {_view(sink, "t1")["checkpoint_key"]}


def _view(sink: Sink, task_id: str) -> dict[str, Any]:
    view = sink.store.get_task(task_id)
    assert view is not None
    return view


def _line_bytes(sink: Sink, task_id: str) -> bytes:
    view = _view(sink, task_id)
    body: bytes = sink.mesh.aws.s3.get_object(Bucket=sink.bucket, Key=view["checkpoint_key"])["Body"].read()
    return body.split(b"\n")[view["checkpoint_line"] - 1]


def test_gw_data_10_a_redelivery_keeps_the_first_line_and_its_result(mesh: Any) -> None:
    """The first terminal write wins with its checkpoint and span together; a redelivered copy lands in another
    object, changes nothing, and the view still reads the first line."""
    sink = Sink(mesh)
    body = envelope("t1", payload=BIG)
    sink.store.create_task(task_id="t1", actor="normalize")
    assert sink.run(body) == []
    first = sink.store.get_task("t1")
    assert sink.run(body) == []
    assert len(sink.keys("succeeded/")) == 2
    again = sink.store.get_task("t1")
    assert first is not None and again is not None
    assert (again["checkpoint_key"], again["result"]) == (first["checkpoint_key"], BIG)
    assert _item(sink, "t1", rec.RESULT_SK) is None


def test_gw_data_10_checkpoints_that_may_go_first_keep_the_result_item(mesh: Any) -> None:
    sink = Sink(mesh, env={ENV.result_in_checkpoint: "false"})
    sink.store.create_task(task_id="t1", actor="normalize")
    assert sink.run(envelope("t1", payload=BIG)) == []
    item = _item(sink, "t1", rec.TASK_SK)
    assert item is not None and "result_span" not in item and item["has_result"] == {"BOOL": True}
    assert _item(sink, "t1", rec.RESULT_SK) is not None
    view = sink.store.get_task("t1")
    assert view is not None and view["result"] == BIG


def test_gw_data_10_a_removed_checkpoint_leaves_the_view_without_a_result_rather_than_failing(mesh: Any) -> None:
    sink = Sink(mesh)
    sink.store.create_task(task_id="t1", actor="normalize")
    assert sink.run(envelope("t1", payload=BIG)) == []
    [key] = sink.keys("succeeded/")
    mesh.aws.s3.delete_object(Bucket=sink.bucket, Key=key)
    view = sink.store.get_task("t1")
    assert view is not None and view["status"] == "succeeded" and "result" not in view
