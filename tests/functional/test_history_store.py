"""The run history's writer and reader against in-process moto (R3: P-HIST-2..5): one PUT per invocation, the chain
header on what a recorded hop sends, cut bodies with offloaded ones by reference, children linked, and the backwards
walk that never lists the bucket; plus the metered mesh (bench) with history on: still one DynamoDB write per hop
(GW-DATA-8), and at most one history PUT per invocation."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from asya import headers as hdr
from asya.envelope import Envelope, Route, Status
from asya.history import HistoryError, InvocationHistory
from asya.historyread import read_history
from asya.payloads import PayloadStore
from asya.tableschema import history_key
from asya_local.moto_server import AwsClients
from tests.caught import SHOWN, caught_envelopes

pytestmark = pytest.mark.functional

BUCKET = "history-test"
NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)


def _envelope(envelope_id: str, payload: Any, *, curr: str, prev: list[str], parent: str | None = None,
              headers: dict[str, Any] | None = None, **status: Any) -> Envelope:  # fmt: skip
    return Envelope(
        id=envelope_id,
        route=Route(list(prev), curr, []),
        payload=payload,
        parent_id=parent,
        headers={hdr.HISTORY: "64", **(headers or {})},
        status=Status(phase=status.pop("phase", "running"), attempt=status.pop("attempt", 1), **status),
    )


@pytest.fixture
def s3(aws: AwsClients) -> Any:
    aws.s3.create_bucket(Bucket=BUCKET)
    return aws.s3


def _count_puts(s3: Any) -> list[str]:
    keys: list[str] = []
    s3.meta.events.register("before-parameter-build.s3.PutObject", lambda params, **_: keys.append(params["Key"]))
    return keys


def _lines(s3: Any, key: str) -> list[dict[str, Any]]:
    body = s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode("utf-8")
    return [json.loads(line) for line in body.splitlines()]


#: GW-DATA-9: the object of the invocation ``inv-1``, in its shard; the previous one, ``old``, was written before keys
#: had shards and is still followed
NEW_KEY = history_key("2026-11-27", "inv-1")


def test_p_hist_2_one_put_per_invocation_and_the_chain_header_on_every_output(s3: Any) -> None:
    """Three recorded hops (two tasks and a child) in one invocation: one object, three lines; each send of a
    recorded hop carries the object's key; a child's send is its parent's output; unrecorded envelopes are left
    alone."""
    puts = _count_puts(s3)
    ids = iter(["inv-1"])
    history = InvocationHistory(bucket=BUCKET, s3=lambda: s3, clock=lambda: NOW, new_id=lambda: next(ids))
    first = _envelope("t1", {"n": 1}, curr="a", prev=[], headers={hdr.HISTORY_PREV: "history/2026-11-26/old.jsonl"})
    other = _envelope("t2", {"n": 2}, curr="a", prev=["z"])
    plain = Envelope(id="t3", route=Route([], "a", []), payload={}, headers={})
    assert history.mark(first) == (NEW_KEY, "history/2026-11-26/old.jsonl")
    assert history.mark(plain) is None
    for env, message in ((first, "m1"), (other, "m2")):
        assert history.open(env, actor="a", message_id=message, payload=env.payload, started_at="2026-11-27T12:00:00Z")
    assert not history.open(plain, actor="a", message_id="m3", payload={}, started_at="2026-11-27T12:00:00Z")
    bodies = [
        history.encode("b", _envelope("t1", {"n": 10}, curr="b", prev=["a"]), lambda _a, e: e.to_json()),
        history.encode("b", _envelope("c1", {"n": 11}, curr="b", prev=["a"], parent="t1"), lambda _a, e: e.to_json()),
        history.encode("b", plain, lambda _a, e: e.to_json()),
    ]
    sent = [json.loads(body).get("headers", {}) for body in bodies]
    assert [h.get(hdr.HISTORY_PREV) for h in sent] == [NEW_KEY] * 2 + [None]
    history.close("m1", 12.5)
    history.fail("m2", RuntimeError("lost the table"))
    assert puts == []  # nothing is written before the end of the invocation
    assert history.flush() == NEW_KEY
    assert puts == [NEW_KEY]
    one, two = _lines(s3, puts[0])
    assert (one["envelope_id"], one["prev"], one["duration_ms"], one["hop"]) == (
        "t1", "history/2026-11-26/old.jsonl", 12.5, 0)  # fmt: skip
    assert [(o["envelope_id"], o["payload"]) for o in one["outputs"]] == [("t1", {"n": 10}), ("c1", {"n": 11})]
    assert (two["envelope_id"], two["prev"], two["hop"]) == ("t2", None, 1)
    assert two["error"] == "record failed: RuntimeError: lost the table"
    assert history.flush() is None and len(puts) == 1  # nothing left: no second object


def test_p_hist_2_bodies_are_cut_and_offloaded_ones_kept_by_reference(s3: Any) -> None:
    history = InvocationHistory(bucket=BUCKET, s3=lambda: s3, clock=lambda: NOW)
    payloads = PayloadStore(bucket=BUCKET, threshold_kb=1, s3=s3)
    big = {"text": "y" * 2000}
    env = _envelope("t1", {"__ref__": f"s3://{BUCKET}/payloads/t1/in.json"}, curr="a", prev=[])
    history.open(env, actor="a", message_id="m1", payload=big, started_at="2026-11-27T12:00:00Z")
    history.encode("b", _envelope("t1", big, curr="b", prev=["a"]), payloads.encode)
    history.encode("x-sump", _envelope("t1", {"error": "boom"}, curr="x-sump", prev=["a"]), payloads.encode)
    key = history.flush()
    assert key is not None
    (line,) = _lines(s3, key)
    assert line["input"] == {"__truncated__": "2011 bytes"} and line["input_bytes"] == 2011
    assert line["input_ref"] == f"s3://{BUCKET}/payloads/t1/in.json"
    offloaded, error = line["outputs"]
    assert offloaded["payload"] == {"__truncated__": "2011 bytes"}
    assert offloaded["ref"].startswith(f"s3://{BUCKET}/payloads/t1/")
    ref_key = offloaded["ref"].removeprefix(f"s3://{BUCKET}/")
    assert json.loads(s3.get_object(Bucket=BUCKET, Key=ref_key)["Body"].read()) == big  # the whole body
    assert (error["payload"], line["error"]) == ({"error": "boom"}, "boom")


def test_p_hist_2_a_failed_put_is_a_history_error_naming_the_object(aws: AwsClients) -> None:
    history = InvocationHistory(bucket="no-such-bucket", s3=lambda: aws.s3, clock=lambda: NOW, new_id=lambda: "x")
    history.open(_envelope("t1", {}, curr="a", prev=[]), actor="a", message_id="m", payload={}, started_at="t")
    key = re.escape(history_key("2026-11-27", "x"))
    with pytest.raises(HistoryError, match=rf"^history s3://no-such-bucket/{key} could not be "):
        history.flush()


def _put(s3: Any, key: str, *lines: dict[str, Any]) -> None:
    s3.put_object(Bucket=BUCKET, Key=key, Body="\n".join(json.dumps(line) for line in lines).encode())


def _line(envelope_id: str, actor: str, hop: int, *, prev: str | None, parent: str | None = None) -> dict[str, Any]:
    started = f"2026-11-27T12:00:0{hop}.000Z"
    return {"envelope_id": envelope_id, "parent_id": parent, "actor": actor, "hop": hop, "attempt": 1, "prev": prev,
            "message_id": f"m-{envelope_id}-{hop}", "started_at": started, "outputs": []}  # fmt: skip


def test_p_hist_5_the_walk_follows_prev_keys_and_adopts_children_at_any_depth(s3: Any) -> None:
    """From the head backwards: lines of other tasks in a shared object are skipped (their ``prev`` not followed); a
    grandchild seen before its parent's line is adopted once the parent joins the tree; a missing object is
    counted, and ``max_objects`` stops the walk with ``truncated``."""
    _put(s3, "h/1", _line("t", "a", 0, prev=None), _line("other", "a", 0, prev="h/elsewhere"))
    _put(s3, "h/2", _line("t", "b", 1, prev="h/1"), _line("c", "b", 1, prev="h/1", parent="t"))
    _put(s3, "h/3", _line("g", "d", 3, prev="h/gone", parent="c"), _line("c", "c", 2, prev="h/2", parent="t"))
    loads: list[str] = []

    def load(key: str) -> str | None:
        loads.append(key)
        return (
            s3.get_object(Bucket=BUCKET, Key=key)["Body"].read().decode()
            if key.startswith("h/") and key != "h/gone"
            else None
        )

    history = read_history("t", heads=["h/3"], load=load)
    assert [(s["envelope_id"], s["actor"]) for s in history["steps"]] == [
        ("t", "a"), ("t", "b"), ("c", "b"), ("c", "c"), ("g", "d")]  # fmt: skip
    assert history["steps"][0]["key"] == "h/1"
    assert (history["missing_objects"], history["truncated"]) == (1, False)
    assert "h/elsewhere" not in loads
    cut = read_history("t", heads=["h/3"], load=load, max_objects=1)
    assert cut["truncated"] is True and [s["envelope_id"] for s in cut["steps"]] == ["c", "g"]


@pytest.mark.parametrize("kind", ["call", "end", "slice"])
def test_p_hist_2_a_call_whose_error_the_flow_caught_shows_its_error(s3: Any, kind: str) -> None:
    """P-FLOW-9: what the ``except`` clause sends on is no ``failed`` status, so the failed call's line read as a
    success; its error is on the line, marked as caught."""
    history = InvocationHistory(bucket=BUCKET, s3=lambda: s3, clock=lambda: NOW, new_id=lambda: f"inv-{kind}")
    entry, caught = caught_envelopes(kind, f"t-caught-{kind}", headers={hdr.HISTORY: "64"})
    assert history.open(entry, actor="a", message_id="m1", payload=entry.payload, started_at="2026-11-27T12:00:00Z")
    for out in caught:
        history.encode(out.actor, out.envelope, lambda _a, e: e.to_json())
    key = history.flush()
    assert key is not None
    [line] = _lines(s3, key)
    assert [o["actor"] for o in line["outputs"]] == [out.actor for out in caught]
    assert line["error"] == SHOWN
