"""Release 1 and the current code side by side, as during a CloudFormation rollout (docs/protocol.md P-COMPAT-2,
P-COMPAT-3): each relays what the other wrote without changing it, a compatible addition is dropped by the old side
without harm, and a change of a value an old reader checks is misread or refused by it, which is why such a change
needs a bump over two releases."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from asya.envelope import parse_envelope
from asya.flows import STATE_HEADER, FlowState
from tests.compat.r1 import envelope as r1_envelope
from tests.compat.r1 import flowstate as r1_flowstate
from tests.compat.writers import envelopes

pytestmark = pytest.mark.unit

GOLDENS = Path(__file__).resolve().parents[1] / "compat" / "r1" / "goldens"
R1_ENVELOPES: dict[str, Any] = json.loads((GOLDENS / "envelopes.json").read_text(encoding="utf-8"))
BODIES = {
    **{f"r1:{name}": json.dumps(raw) for name, raw in R1_ENVELOPES.items()},
    **{f"now:{name}": env.to_json() for name, env in envelopes().items()},
}


def _old_hop(body: str) -> str:
    """What a release 1 layer sends on for ``body``: its envelope as it reads it, its flow state as it reads it."""
    env = r1_envelope.parse_envelope(body)
    if STATE_HEADER in env.headers:
        env.headers[STATE_HEADER] = r1_flowstate.FlowState.from_header(env.headers[STATE_HEADER]).to_header()
    return env.to_json()


def _new_hop(body: str) -> str:
    env = parse_envelope(body)
    if STATE_HEADER in env.headers:
        env.headers[STATE_HEADER] = FlowState.from_header(env.headers[STATE_HEADER]).to_header()
    return env.to_json()


@pytest.mark.parametrize("name", sorted(BODIES))
def test_old_and_new_layers_relay_each_others_envelopes_unchanged(name: str) -> None:
    first = _new_hop(BODIES[name])
    body = first
    for hop in (_old_hop, _new_hop, _old_hop, _new_hop):
        body = hop(body)
        assert json.loads(body) == json.loads(first), f"changed by {hop.__name__}"


def _next_release(body: str, **changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = json.loads(body)
    for path, value in changes.items():
        *parents, leaf = path.split("__")
        node = raw
        for part in parents:
            node = node[part]
        node[leaf] = value
    return raw


def test_a_compatible_addition_is_dropped_by_the_old_side_and_the_rest_is_read_as_meant() -> None:
    """P-COMPAT-2: a new optional member of the envelope and of the flow state, and a new optional header."""
    base = envelopes()["flow_first_route"].to_json()
    raw = _next_release(base, priority=5)
    raw["headers"]["x-asya-priority"] = {"level": "high"}
    raw["headers"][STATE_HEADER]["budget"] = 3
    relayed = json.loads(_old_hop(json.dumps(raw)))
    assert "priority" not in relayed, "an unknown envelope member is dropped (P-ENV-4)"
    assert relayed["headers"]["x-asya-priority"] == {"level": "high"}, "an unknown header travels on"
    assert "budget" not in relayed["headers"][STATE_HEADER], "an unknown flow-state member is dropped"
    expected = json.loads(_new_hop(base))
    expected["headers"]["x-asya-priority"] = {"level": "high"}
    assert relayed == expected, "everything release 1 knows it reads and writes as the writer meant"


def test_a_new_value_in_a_closed_set_is_misread_by_the_old_side() -> None:
    """P-COMPAT-3: a phase release 1 does not know reads as ``pending``: without a bump the task would run again."""
    body = json.dumps(_next_release(envelopes()["handler_failure"].to_json(), status__phase="suspended"))
    assert r1_envelope.parse_envelope(body).status is not None
    assert r1_envelope.parse_envelope(body).to_dict()["status"]["phase"] == "pending"


def test_a_changed_member_format_is_refused_by_the_old_side_so_the_bump_takes_two_releases() -> None:
    """P-COMPAT-3: release N+2 may write a new digest form; release N+1 still writes the old one, which release 1
    reads, while it reads both. Release 1 refuses the new form: it must not meet it before it is gone."""
    flow_state = json.loads(envelopes()["flow_first_route"].to_json())["headers"][STATE_HEADER]
    old_form = dict(flow_state)
    new_form = {**flow_state, "digest": f"sha3-256:{flow_state['digest']}"}
    assert r1_flowstate.FlowState.from_header(old_form).digest == flow_state["digest"]
    with pytest.raises(r1_flowstate.FlowError, match="digest must be 64 lowercase hex digits"):
        r1_flowstate.FlowState.from_header(new_form)
