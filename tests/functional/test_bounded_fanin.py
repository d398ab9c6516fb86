"""A bounded map through the real layer and aggregator against moto (P-MAP-2): the fan-out sends slice 0 alone, the
aggregator starts children 1..K when it stores slice 0 and child i + K when it stores child i, a redelivery starts
the same children again (their ids do not change), and the merged state is the plain run's."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asya.config import ActorConfig
from asya.flows import STATE_HEADER, compile_flow
from asya_crew.aggregator import AggregatorRuntime
from tests.functional.actors import NOW, Context, Harness, actor_env, deliver, drain, envelope, queue_arn

pytestmark = pytest.mark.functional

SOURCE = """
def triage(state):
    state = normalize(state)
    state["r"] = map(summarize_chunk, state["items"], max_concurrency=2)
    return state
"""
AGG = "x-fanin-flow-triage"
WORKER = "summarize-chunk"


def _index(env: dict[str, Any]) -> int:
    return int(env["headers"]["x-asya-fan-in"]["slice_index"])


def test_p_map_2_the_aggregator_starts_a_bounded_maps_children_as_earlier_ones_finish(mesh: Any) -> None:
    program = compile_flow(SOURCE, flow="triage", filename="triage.py", actors={"normalize", WORKER})
    flows = {"ASYA_FLOWS": json.dumps({"triage": program.to_json()})}
    first = Harness(mesh, "echo", actor="normalize", clock=lambda: NOW, env=flows)
    work = Harness(mesh, "echo", actor=WORKER, clock=lambda: NOW, env=flows)
    aggregator = AggregatorRuntime(
        ActorConfig.from_env(actor_env(mesh, AGG, **flows)),
        sqs=mesh.aws.sqs,
        dynamodb=mesh.aws.dynamodb,
        s3=mesh.aws.s3,
        clock=lambda: NOW,
    )
    sqs, urls = mesh.aws.sqs, mesh.resources.queue_urls

    def aggregate(*bodies: dict[str, Any]) -> None:
        event = deliver(sqs, urls[AGG], list(bodies), arn=queue_arn(mesh, AGG))
        assert aggregator.handle(event, Context())["batchItemFailures"] == []

    items = [{"part": i} for i in range(5)]
    start = envelope("t-bounded", nxt=[], payload={"items": items})
    start["headers"] = {STATE_HEADER: {"flow": "triage", "pc": 1, "owner": "t-bounded", "digest": program.digest}}
    assert first.run(start)[1] == []
    assert drain(sqs, urls[WORKER]) == []  # a bounded fan-out sends no child itself
    (slice0,) = drain(sqs, urls[AGG])
    assert _index(slice0) == 0 and slice0["headers"]["x-asya-fan-in"]["window"] == 2

    aggregate(slice0)
    children = drain(sqs, urls[WORKER])
    assert sorted(_index(c) for c in children) == [1, 2]
    aggregate(slice0)  # a redelivery starts the same two again; their hop claims absorb the copies
    assert sorted(c["id"] for c in drain(sqs, urls[WORKER])) == sorted(c["id"] for c in children)

    started = {_index(c): c for c in children}
    done: list[int] = []
    while len(done) < len(items):
        index = min(i for i in started if i not in done)
        assert work.run(started[index])[1] == []
        (merged_slice,) = drain(sqs, urls[AGG])
        aggregate(merged_slice)
        done.append(index)
        if index + 2 <= len(items):
            (released,) = drain(sqs, urls[WORKER])  # child i starts child i + 2, and nothing else
            assert _index(released) == index + 2
            assert released["payload"] == items[index + 1] and released["parent_id"] == "t-bounded"
            started[index + 2] = released
        else:
            assert drain(sqs, urls[WORKER]) == []
    (final,) = drain(sqs, urls["x-sink"])
    assert final["id"] == "t-bounded" and final["status"]["phase"] == "succeeded"
    assert final["payload"]["r"] == [{**item, "seen": True} for item in items]  # echo marks what it saw, in order


def test_p_map_3_an_invocation_runs_one_slice_of_a_fan_out_and_hands_the_others_back(mesh: Any) -> None:
    source = SOURCE.replace(", max_concurrency=2", "")
    program = compile_flow(source, flow="triage", filename="triage.py", actors={"normalize", WORKER})
    flows = {"ASYA_FLOWS": json.dumps({"triage": program.to_json()})}
    first = Harness(mesh, "echo", actor="normalize", clock=lambda: NOW, env=flows)
    work = Harness(mesh, "echo", actor=WORKER, clock=lambda: NOW, env=flows)
    sqs, urls = mesh.aws.sqs, mesh.resources.queue_urls
    start = envelope("t-spread", nxt=[], payload={"items": [{"part": i} for i in range(3)]})
    start["headers"] = {STATE_HEADER: {"flow": "triage", "pc": 1, "owner": "t-spread", "digest": program.digest}}
    assert first.run(start)[1] == []
    children = drain(sqs, urls[WORKER])
    assert sorted(_index(c) for c in children) == [1, 2, 3]
    assert work.run(*children)[1] == []  # one batch: the first slice runs, the others go back unchanged
    ran = drain(sqs, urls[AGG])
    assert [_index(s) for s in ran if _index(s)] == [_index(children[0])]
    back = drain(sqs, urls[WORKER])
    assert back == children[1:]
    assert work.run(*back)[1] == []
    assert [_index(s) for s in drain(sqs, urls[AGG])] == [_index(back[0])]
    assert drain(sqs, urls[WORKER]) == back[1:]
