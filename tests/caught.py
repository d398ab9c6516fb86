"""The envelopes a flow's ``except`` clause sends on for a failed call (P-FLOW-9), built by the real continuation
code (``asya.flows.mesh.on_failure``) from a compiled program: what the run histories see a caught call send."""

from __future__ import annotations

from typing import Any

from asya import naming, routing
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows import compile_flow, continue_outgoing, on_failure, start

NOW = "2026-11-27T12:00:00Z"

#: The caught error, and how the run histories show it on the failed call's step.
ERROR = {"type": "ValueError", "message": "boom", "mro": ["Exception"]}
SHOWN = "ValueError: boom (caught by the flow's except)"

_FLOWS = {
    # the except calls another actor
    "call": "def f(state):\n    try:\n        state = a(state)\n    except ValueError:\n        state = b(state)\n"
    "    return state\n",
    # the except only sets a field and the flow ends: the next send is x-sink, succeeded
    "end": "def f(state):\n    try:\n        state = a(state)\n    except ValueError:\n        state['failed'] = True\n"
    "    return state\n",
    # a map inside the try: a failed slice's except goes on under the task's id, not the slice's (P-FLOW-10)
    "slice": "def f(state):\n    state = b(state)\n    try:\n        state['r'] = [a(x) for x in state['items']]\n"
    "    except ValueError:\n        state = b(state)\n    return state\n",
}


def caught_envelopes(
    kind: str, task_id: str, *, headers: dict[str, Any] | None = None
) -> tuple[Envelope, list[routing.Outgoing]]:
    """``(the envelope actor a receives, what its caught failure sends on)`` for flow ``kind`` (``call``, ``end`` or
    ``slice``)."""
    program = compile_flow(_FLOWS[kind], flow="f", actors={"a", "b"})
    created = Envelope(
        id=task_id,
        route=Route([], "", []),
        payload={"n": 0, "items": [1]},
        headers=dict(headers or {}),
        status=Status(created_at=NOW),
    )
    [first] = start(program, created, now=NOW)
    if kind == "slice":  # b ran: the flow fans out, and the slice sent to a fails
        ended = Envelope(
            id=task_id,
            route=Route(["b"], "", []),
            payload=first.envelope.payload,
            headers=dict(first.envelope.headers),
            status=Status(phase=Phase.SUCCEEDED.value, reason=Reason.COMPLETED.value, actor="b", created_at=NOW),
        )
        sent = continue_outgoing({"f": program}, routing.Outgoing(naming.SINK, ended), now=NOW)
        [first] = [out for out in sent if out.actor == "a"]
    assert first.actor == "a"
    entry = first.envelope
    failed = Envelope(
        id=entry.id,
        parent_id=entry.parent_id,
        route=entry.route,
        payload=routing.error_payload(ERROR, entry.payload),
        headers=dict(entry.headers),
        status=Status(
            phase=Phase.FAILED.value, reason=Reason.RUNTIME_ERROR.value, actor="a", created_at=NOW, error=dict(ERROR)
        ),
    )
    caught = on_failure({"f": program}, routing.Outgoing(naming.SINK, failed), original_payload=entry.payload, now=NOW)
    assert caught is not None
    return entry, caught
