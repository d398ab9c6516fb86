"""Fan-in's pure parts: slicing (P-FANIN-3, P-FANIN-4), the merge (P-AGG-5, P-AGG-6) and ``ASYA_FAN_IN``."""

from __future__ import annotations

from typing import Any

import pytest

from asya import routing
from asya.abi_state import Frame
from asya.config import ActorConfig, ConfigError, FanInConfig
from asya.envelope import Envelope, Route, Status
from asya.fanin import MAX_SLICES, FanInRouteError, slices
from asya_crew.fanin_merge import MergeError, merge_payload, merged_envelope

NOW = "2026-03-01T10:00:00Z"


def _entry() -> Envelope:
    return Envelope(
        id="t-1",
        route=Route(prev=["a"], curr="split", next=["embed", "x-fanin-split", "store"]),
        payload={"doc": 1},
        headers={"x-asya-flow": "f"},
        status=Status(phase="processing", actor="split", created_at=NOW, deadline_at="2026-03-01T11:00:00Z"),
    )


def _slices(n: int, final_next: list[str]) -> list[routing.Outgoing]:
    entry = _entry()
    frames = [Frame({"c": i}, ["embed", "x-fanin-split", "store"], {"x-asya-flow": "f"}, None, i) for i in range(n)]
    return slices(
        entry,
        frames,
        actor="split",
        aggregator="x-fanin-split",
        key="/embeddings",
        final_next=final_next,
        final_headers={"x-asya-flow": "f", "h": "end"},
        final_deadline_at="2026-03-01T11:00:00Z",
        payload={"doc": 1},
        now=NOW,
        trace=routing.Trace(),
    )


def test_p_fanin_3_n_plus_one_slices_children_first_and_the_parent_last() -> None:
    out = _slices(2, ["embed", "x-fanin-split", "store"])
    assert [o.actor for o in out] == ["embed", "embed", "x-fanin-split"]
    parent = out[-1].envelope
    assert parent.id == "t-1" and parent.payload == {"doc": 1} and parent.headers["h"] == "end"
    assert parent.route == Route(prev=["a", "split"], curr="x-fanin-split", next=["store"])
    assert [o.envelope.headers["x-asya-fan-in"]["slice_index"] for o in out] == [1, 2, 0]
    assert {o.envelope.headers["x-asya-fan-in"]["slice_count"] for o in out} == {3}
    children = [o.envelope for o in out[:2]]
    assert all(c.parent_id == "t-1" for c in children)
    assert [c.id for c in children] == [routing.child_id(_entry(), 1), routing.child_id(_entry(), 2)]
    assert [c.payload for c in children] == [{"c": 0}, {"c": 1}]


def test_p_fanin_4_aggregator_missing_and_the_slice_limit_are_handler_errors() -> None:
    with pytest.raises(FanInRouteError, match=r"fan_in aggregator 'x-fanin-split' is not in route\.next"):
        _slices(1, ["embed", "store"])
    with pytest.raises(FanInRouteError, match=f"exceed the limit of {MAX_SLICES}"):
        _slices(MAX_SLICES, ["x-fanin-split"])


def test_p_agg_5_merge_sets_the_pointer_creating_objects_and_replacing_values() -> None:
    assert merge_payload({"a": 1}, "/x/y", [1, 2]) == {"a": 1, "x": {"y": [1, 2]}}
    assert merge_payload({"x": "old"}, "/x", []) == {"x": []}
    assert merge_payload({}, "/a~1b/c~0d", [0]) == {"a/b": {"c~d": [0]}}
    original: dict[str, Any] = {"x": {"k": 1}}
    merge_payload(original, "/x/k", [9])
    assert original == {"x": {"k": 1}}  # the stored payload is not mutated


@pytest.mark.parametrize(
    ("parent", "key", "message"),
    [
        ([1], "/x", "must be a JSON object, got list"),
        ({"x": 3}, "/x/y", "goes through '/x', which is a int"),
    ],
)
def test_p_agg_9_merge_failures_name_the_problem(parent: Any, key: str, message: str) -> None:
    with pytest.raises(MergeError, match=message):
        merge_payload(parent, key, [])


def test_p_agg_6_merged_identity_and_end_of_route_to_x_sink() -> None:
    parent = {
        "parent_id": None,
        "route": {"prev": ["split"], "curr": "x-fanin-split", "next": []},
        "headers": {"x-asya-flow": "f"},
        "created_at": NOW,
        "deadline_at": None,
    }
    env, actor = merged_envelope("t-1", parent, {"d": 1}, "/e", [1], aggregator="x-fanin-split", now=NOW)
    assert actor == "x-sink" and env.id == "t-1" and env.parent_id is None
    assert env.status is not None and (env.status.phase, env.status.reason) == ("succeeded", "Completed")
    assert env.headers == {"x-asya-flow": "f", "x-asya-origin-id": "t-1"}
    assert env.route.prev == ["split", "x-fanin-split"] and env.payload == {"d": 1, "e": [1]}


def test_asya_fan_in_is_read_once_and_bad_values_name_the_variable() -> None:
    base = {"ASYA_NAMESPACE": "demo", "ASYA_ACTOR": "split"}
    config = ActorConfig.from_env({**base, "ASYA_FAN_IN": '{"aggregator": "x-fanin-split", "key": "/e"}'})
    assert config.fan_in == FanInConfig(aggregator="x-fanin-split", key="/e")
    assert ActorConfig.from_env(base).fan_in is None
    for raw, message in [
        ("{", "ASYA_FAN_IN must be JSON"),
        ('{"aggregator": "x-sink", "key": "/e"}', "aggregator must be an 'x-' crew name, got 'x-sink'"),
        ('{"aggregator": "x-a", "key": "e"}', "key must be a JSON Pointer starting with '/', got 'e'"),
    ]:
        with pytest.raises(ConfigError, match=message):
            ActorConfig.from_env({**base, "ASYA_FAN_IN": raw})
