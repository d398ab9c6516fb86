"""Checkpoint lines reserved before the PUT (docs/protocol.md P-FAN-9 (R3)): x-sink names a child's line on its
finish write, so the line a record reserved is the line it is written at."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from asya.envelope import Envelope, parse_envelope
from asya.tableschema import checkpoint_key
from asya_crew.checkpoint import CheckpointEntry, CheckpointError, CheckpointLine, CheckpointWriter

pytestmark = pytest.mark.unit

NOW = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


class _S3:
    def __init__(self) -> None:
        self.objects: dict[str, list[str]] = {}
        self.bodies: dict[str, bytes] = {}

    def put_object(self, *, Key: str, Body: bytes, **_: Any) -> None:
        self.objects[Key] = Body.decode("utf-8").splitlines()
        self.bodies[Key] = Body


def _env(env_id: str) -> Envelope:
    return parse_envelope(
        {"id": env_id, "route": {"prev": [], "curr": "", "next": []}, "payload": {}, "status": {"phase": "succeeded"}}
    )


def _writer(s3: _S3) -> CheckpointWriter:
    ids = iter(f"obj-{n}" for n in range(10))
    return CheckpointWriter(bucket="b", s3=lambda: s3, clock=lambda: NOW, new_id=lambda: next(ids))


def test_p_fan_9_planned_lines_are_where_the_records_land() -> None:
    s3 = _S3()
    writer = _writer(s3)
    envs = {ref: _env(ref) for ref in ("a", "b", "c")}
    planned = {ref: writer.plan(ref, "succeeded", env) for ref, env in envs.items()}
    writer.unplan("c")  # the last one gives its line back
    assert [planned[r].line for r in ("a", "b")] == [1, 2]
    out = writer.write([CheckpointEntry(r, "succeeded", envs[r]) for r in ("a", "b")])
    assert out == {"a": planned["a"], "b": planned["b"]}
    [(key, lines)] = s3.objects.items()
    assert key == planned["a"].key and [json.loads(line)["id"] for line in lines] == ["a", "b"]
    # write forgets the plans: the next invocation starts a new object at line 1
    assert writer.plan("d", "succeeded", _env("d")) == CheckpointLine(
        checkpoint_key("succeeded", "2026-03-01", "obj-1"), 1
    )


def test_gw_data_10_each_written_line_names_its_own_bytes_in_the_object() -> None:
    """A line's ``span`` is where a ranged GET finds exactly that envelope, newline excluded, multibyte text
    included."""
    s3 = _S3()
    writer = _writer(s3)
    envs = [_env("a"), _env("b\u00e9\u2028"), _env("c")]
    out = writer.write([CheckpointEntry(env.id, "succeeded", env) for env in envs])
    [(key, body)] = s3.bodies.items()
    for env in envs:
        line = out[env.id]
        assert isinstance(line, CheckpointLine) and line.key == key and line.span is not None
        offset, length = line.span
        assert parse_envelope(json.loads(body[offset : offset + length])).id == env.id


def test_p_fan_9_only_the_last_plan_can_be_given_back() -> None:
    writer = _writer(_S3())
    writer.plan("a", "succeeded", _env("a"))
    writer.plan("b", "succeeded", _env("b"))
    with pytest.raises(ValueError, match="not the last one planned"):
        writer.unplan("a")


def test_p_fan_9_a_gap_in_the_planned_lines_fails_the_records_instead_of_misnaming_lines() -> None:
    s3 = _S3()
    writer = _writer(s3)
    writer.plan("a", "succeeded", _env("a"))
    writer.plan("b", "succeeded", _env("b"))
    out = writer.write([CheckpointEntry("b", "succeeded", _env("b"))])  # "a" never came to the write
    assert isinstance(out["b"], CheckpointError)
    assert s3.objects == {}
