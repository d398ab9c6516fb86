"""Envelope compatibility across releases (docs/protocol.md section 8.1): the current code reads the envelopes and flow
states release 1 wrote (tests/compat/r1/goldens) unchanged, and writes nothing release 1's frozen readers
(tests/compat/r1) refuse, so old and new layers can run side by side during a deploy."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from asya.envelope import parse_envelope
from asya.flows import STATE_HEADER, FlowState
from tests.compat.r1 import envelope as r1_envelope
from tests.compat.r1 import flowstate as r1_flowstate
from tests.compat.writers import envelopes, flow_states

pytestmark = pytest.mark.unit

GOLDENS = Path(__file__).resolve().parents[1] / "compat" / "r1" / "goldens"
R1_ENVELOPES: dict[str, Any] = json.loads((GOLDENS / "envelopes.json").read_text(encoding="utf-8"))
R1_STATES: dict[str, Any] = json.loads((GOLDENS / "flow_states.json").read_text(encoding="utf-8"))
NOW_ENVELOPES = envelopes()


def test_the_goldens_cover_every_kind_of_envelope() -> None:
    assert set(R1_ENVELOPES) >= {"static_route", "flow_first_route", "flow_fanout_child", "flow_pause", "fanin_child"}


@pytest.mark.parametrize("name", sorted(R1_ENVELOPES))
def test_the_current_reader_reads_a_release_1_envelope_as_release_1_did(name: str) -> None:
    body = json.dumps(R1_ENVELOPES[name])
    now, then = parse_envelope(body), r1_envelope.parse_envelope(body)
    assert now.to_dict() == then.to_dict()
    if STATE_HEADER in now.headers:
        state = FlowState.from_header(now.headers[STATE_HEADER])
        assert state.to_header() == now.headers[STATE_HEADER]


@pytest.mark.parametrize("name", sorted(R1_STATES))
def test_the_current_reader_reads_a_release_1_flow_state(name: str) -> None:
    assert FlowState.from_header(R1_STATES[name]).to_header() == R1_STATES[name]


@pytest.mark.parametrize("name", sorted(NOW_ENVELOPES))
def test_release_1_reads_what_the_current_code_writes(name: str) -> None:
    """Release 1 drops members it does not know (P-ENV-4); everything it knows it reads as the writer meant."""
    body = NOW_ENVELOPES[name].to_json()
    then = r1_envelope.parse_envelope(body)
    assert then.to_dict() == parse_envelope(body).to_dict()
    raw = json.loads(body)["headers"].get(STATE_HEADER)
    if raw is not None:
        old = r1_flowstate.FlowState.from_header(raw)
        assert (old.flow, old.pc, old.digest, old.owner) == (
            raw["flow"],
            raw["pc"],
            raw.get("digest", ""),
            raw["owner"],
        )


@pytest.mark.parametrize("name", sorted(flow_states()))
def test_release_1_reads_the_flow_states_the_current_code_writes(name: str) -> None:
    header = flow_states()[name]
    assert r1_flowstate.FlowState.from_header(header).to_header() == header


def test_the_frozen_reader_refuses_what_release_1_refused() -> None:
    """The frozen readers are real readers: a check against them can fail."""
    with pytest.raises(r1_envelope.EnvelopeParseError):
        r1_envelope.parse_envelope('{"route": {"prev": [], "curr": "a", "next": []}}')
    with pytest.raises(r1_flowstate.FlowError):
        r1_flowstate.FlowState.from_header({"flow": "f", "pc": 0, "digest": "not a digest"})
