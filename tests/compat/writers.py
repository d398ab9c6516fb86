"""What the current code writes across a deploy, built through the code paths that write it: envelopes of the
gateway's create, of a compiled flow's continuations (its first route, a fan-out inside a ``try``, a pause), of a
handler failure and of an offloaded payload, carrying the mesh's headers; and task records in each phase.

``tests/compat/record.py`` stored this release's output under ``tests/compat/r1/goldens/``; tests/unit/test_compat.py
checks that what the code writes NOW is still read by the frozen readers of r1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from asya import headers as hdr
from asya import naming, routing
from asya.abi import error_details
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows import FlowState, compile_flow, continue_outgoing, start
from asya.flows.ir import Program

NOW = "2026-12-07T10:00:00Z"
DEADLINE = "2026-12-07T10:05:00Z"
TASK = "5b7e0c2a-4f1d-4c1e-9a51-0c2f1e3d4b6a"
REPO = Path(__file__).resolve().parents[2]


def triage() -> Program:
    """The example mesh's compiled flow (flows/triage.py)."""
    source = (REPO / "flows" / "triage.py").read_text(encoding="utf-8")
    actors = {"normalize", "analyze", "summarize", "summarize-chunk"}
    return compile_flow(source, flow="triage", filename="flows/triage.py", actors=actors)


def _pausing() -> Program:
    source = (
        "async def approve(state):\n"
        "    state = await analyze(state)\n"
        '    state = await pause(state, prompt="Publish it?", fields=[{"name": "approved", "type": "boolean"}])\n'
        "    state = await publish(state)\n"
        "    return state\n"
    )
    return compile_flow(source, flow="approve", filename="flows/approve.py", actors={"analyze", "publish"})


def _mesh_headers() -> dict[str, Any]:
    return {
        hdr.TRACEPARENT: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        hdr.FLOW: "text-pipeline",
        hdr.PROGRESS: "detailed",
        hdr.HOPS: 3,
        hdr.HISTORY: "4096",
        hdr.GATEWAY_URL: "https://gateway.example/",
        hdr.A2A_TASK_ID: "a2a-task-1",
        hdr.A2A_CONTEXT_ID: "a2a-context-1",
        hdr.ROUTE_OVERRIDE: {"summarize": "summarize-v2"},
        "x-custom": {"any": ["json", 1]},
    }


def _at(actor: str, *, prev: list[str], nxt: list[str], headers: dict[str, Any], payload: Any) -> Envelope:
    return Envelope(
        id=TASK,
        route=Route(prev=prev, curr=actor, next=nxt),
        payload=payload,
        headers=headers,
        status=Status(
            phase=Phase.PENDING.value,
            actor=actor,
            attempt=1,
            max_attempts=1,
            created_at=NOW,
            updated_at=NOW,
            deadline_at=DEADLINE,
        ),
    )


def _ended(env: Envelope, payload: Any) -> routing.Outgoing:
    """``env``'s hop returned ``payload`` and its route is exhausted: what the layer hands the continuation."""
    done = Envelope(
        id=env.id,
        parent_id=env.parent_id,
        route=Route(prev=[*env.route.prev, env.route.curr], curr="", next=[]),
        payload=payload,
        headers=dict(env.headers),
        status=Status(
            phase=Phase.SUCCEEDED.value,
            reason=Reason.COMPLETED.value,
            actor=env.route.curr,
            created_at=NOW,
            updated_at=NOW,
            deadline_at=DEADLINE,
        ),
    )
    return routing.Outgoing(naming.SINK, done)


def envelopes() -> dict[str, Envelope]:
    """Named envelopes as the current code writes them."""
    out: dict[str, Envelope] = {}
    out["static_route"] = _at(
        "analyze", prev=["normalize"], nxt=["summarize"], headers=_mesh_headers(), payload={"text": "a good day"}
    )
    created = Envelope(
        id=TASK,
        route=Route(prev=[], curr="", next=[]),
        payload={"text": "a good day", "parts": ["one", "two"]},
        headers={hdr.FLOW: "triage"},
        status=Status(created_at=NOW, updated_at=NOW, deadline_at=DEADLINE),
    )
    program = triage()
    [first] = start(program, created, now=NOW)
    out["flow_first_route"] = first.envelope
    analyzed = {**first.envelope.payload, "sentiment": "positive"}
    slices = continue_outgoing({program.flow: program}, _ended(first.envelope, analyzed), now=NOW)
    out["flow_fanout_child"] = slices[0].envelope
    out["flow_fanout_slice0"] = slices[-1].envelope
    pausing = _pausing()
    [begun] = start(pausing, created, now=NOW)
    [paused] = continue_outgoing({pausing.flow: pausing}, _ended(begun.envelope, {"text": "ok"}), now=NOW)
    out["flow_pause"] = paused.envelope
    try:
        raise ValueError("the text is empty")
    except ValueError as exc:
        details = error_details(exc)
    details["traceback"] = (
        'Traceback (most recent call last):\n  File "text.py", line 9\nValueError: the text is empty\n'
    )
    failed = routing.failure_envelope(
        out["static_route"],
        details,
        actor="analyze",
        now=NOW,
        original_payload={"text": ""},
        trace=routing.Trace.for_hop({}, enabled=False),
    )
    out["handler_failure"] = failed.envelope
    out["offloaded_payload"] = _at(
        "summarize",
        prev=["normalize", "analyze"],
        nxt=[],
        headers={hdr.FLOW: "text-pipeline", hdr.HOPS: 2},
        payload={"__ref__": f"s3://asya-demo-storage/payloads/{TASK}/0002-summarize-0a1b2c3d.json"},
    )
    child = _at("chunk", prev=["split"], nxt=["x-fanin-chunk"], headers={}, payload={"text": "one"})
    child.parent_id = TASK
    child.id = "8d3f5a10-2b4c-5e6f-8a9b-0c1d2e3f4a5b"
    child.headers[hdr.FAN_IN] = {
        "origin_id": TASK,
        "slice_index": 1,
        "slice_count": 3,
        "aggregation_key": "/chunks",
    }
    out["fanin_child"] = child
    return out


def flow_states() -> dict[str, dict[str, Any]]:
    """Flow state headers as the current code writes them, the rich members included."""
    full = FlowState(
        flow="triage",
        pc=12,
        owner=TASK,
        loops={"7": 2},
        tries=((14, 0),),
        deadlines=(None, DEADLINE),
        base={"text": "before the fan-out"},
        digest=triage().digest,
    )
    return {
        "full": full.to_header(),
        "first": FlowState(flow="triage", pc=2, owner=TASK, digest=triage().digest).to_header(),
    }


def task_records(store: Any) -> dict[str, str]:
    """Tasks in each phase, written through ``store`` (an ``asya.store.TaskStore``); their ids by name."""
    from asya.store import StatusUpdate

    ids = {
        name: f"{TASK[:-2]}{index:02d}"
        for index, name in enumerate(("pending", "running", "succeeded", "succeeded_large", "failed", "paused"))
    }
    for name, task_id in ids.items():
        store.create_task(
            task_id=task_id, actor="normalize", flow="text-pipeline", payload={"text": name}, deadline_at=DEADLINE
        )
    store.apply_status(ids["running"], StatusUpdate(status="running", actor="analyze", envelope_id=ids["running"]))
    store.apply_status(
        ids["succeeded"],
        StatusUpdate(status="succeeded", actor="x-sink", result={"said": "HI"}, envelope_id=ids["succeeded"]),
    )
    store.apply_status(
        ids["succeeded_large"],
        StatusUpdate(
            status="succeeded",
            actor="x-sink",
            result={"summary": "word " * 200},
            envelope_id=ids["succeeded_large"],
        ),
    )
    store.apply_status(
        ids["failed"],
        StatusUpdate(
            status="failed",
            actor="x-sink",
            error="ValueError: the text is empty",
            error_details={"message": "the text is empty", "type": "ValueError", "mro": ["Exception"]},
            failed_actor="analyze",
            envelope_id=ids["failed"],
        ),
    )
    store.apply_status(
        ids["paused"],
        StatusUpdate(
            status="paused",
            actor="x-pause",
            pause_metadata={"prompt": "Publish it?", "fields": [{"name": "approved", "type": "boolean"}]},
            envelope_id=ids["paused"],
        ),
    )
    return ids
