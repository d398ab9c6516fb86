"""``await sleep(seconds)`` (P-WAIT-3): the compiler, the continuation that sends the task to x-resume delayed, the
transport that delays it, and the simulated mesh against the plain-Python stand-in, with the sleep first, in the
middle, last and in a loop."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from asya import headers as hdr
from asya import naming, routing
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows import STATE_HEADER, FlowState, check_source, compile_flow, continue_outgoing, sleep, start
from asya.transport import Transport
from tests.flowsim import plain_run, simulate

pytestmark = pytest.mark.unit

NOW = "2026-11-27T10:00:00Z"

ACTORS = {
    "a": lambda s: {**s, "trail": [*s.get("trail", []), "a"]},
    "b": lambda s: {**s, "trail": [*s.get("trail", []), "b"]},
}

SOURCES = {
    "first": """
async def f(state):
    await sleep(30)
    state = await a(state)
    return state
""",
    "middle": """
async def f(state):
    state = await a(state)
    await asyncio.sleep(1200)
    state["slept"] = True
    state = await b(state)
    return state
""",
    "last": """
async def f(state):
    state = await a(state)
    state = await b(state)
    await sleep(5)
    return state
""",
    "loop": """
async def f(state):
    state["n"] = 0
    while state["n"] < 3:
        state["n"] += 1
        await sleep(60)
        state = await a(state)
    return state
""",
    "sync": """
def f(state):
    state = a(state)
    sleep(2)
    state = b(state)
    return state
""",
}


def _namespace(source: str) -> dict[str, Any]:
    # the stand-in returns at once; a plain asyncio.sleep(1200) would really wait, so the plain run gets it too
    namespace: dict[str, Any] = {"sleep": sleep, "asyncio": SimpleNamespace(sleep=sleep)}
    exec(compile(source, "<flow>", "exec"), namespace)
    return namespace


@pytest.mark.parametrize("position", sorted(SOURCES))
def test_p_wait_3_a_sleep_anywhere_agrees_with_plain_python(position: str) -> None:
    source = SOURCES[position]
    program = compile_flow(source, flow="f")
    assert any(ins["op"] == "sleep" for ins in program.code)
    mesh = simulate(program, ACTORS, {"x": 1})
    plain = plain_run(_namespace(source), "f", ACTORS, {"x": 1})
    assert mesh.key() == plain.key()
    assert mesh.ok and mesh.calls == plain.calls
    again = simulate(program, ACTORS, {"x": 1}, duplicate_every=True)  # a copy of a wake is absorbed
    assert again.key() == mesh.key()


@pytest.mark.parametrize(
    "call", ["sleep(0)", "sleep(-1)", "sleep(state['s'])", "sleep()", "sleep(1, 2)", "sleep(seconds=1)", "sleep('1')"]
)
def test_p_wait_3_sleep_takes_one_positive_number_literal(call: str) -> None:
    problems = [str(p) for p in check_source(f"async def f(state):\n    await {call}\n    return state\n")]
    assert any("sleep(...) takes one positive number literal, the seconds; fix: await sleep(60)" in p for p in problems)


def test_p_wait_3_a_fraction_rounds_up_and_asyncio_sleep_is_the_same() -> None:
    program = compile_flow("async def f(state):\n    await asyncio.sleep(0.5)\n    return state\n", flow="f")
    assert [ins["seconds"] for ins in program.code if ins["op"] == "sleep"] == [1]


def test_p_wait_3_the_continuation_sends_the_task_to_x_resume_delayed_with_its_deadline() -> None:
    program = compile_flow(SOURCES["middle"], flow="f")
    env = Envelope(
        id="t",
        route=Route(prev=["a"], curr="", next=[]),
        payload={"x": 1},
        headers={STATE_HEADER: FlowState(flow="f", pc=1, owner="t", digest=program.digest).to_header()},
        status=Status(
            phase=Phase.SUCCEEDED.value,
            reason=Reason.COMPLETED.value,
            actor="a",
            created_at=NOW,
            deadline_at="2026-11-27T11:00:00Z",
        ),
    )
    [out] = continue_outgoing({"f": program}, routing.Outgoing(naming.SINK, env), now=NOW)
    assert out.actor == naming.RESUME
    assert out.envelope.id == "t"
    assert out.envelope.route == Route(prev=["a"], curr=naming.RESUME, next=[])
    assert out.envelope.headers[hdr.DELAY_UNTIL] == "2026-11-27T10:20:00Z"
    assert out.envelope.headers[hdr.WAKE] == {"seconds": 1200}
    assert out.envelope.payload == {"x": 1}  # the mutation after the sleep runs when it is over
    assert out.envelope.status is not None
    assert out.envelope.status.deadline_at == "2026-11-27T11:00:00Z"  # the deadline runs during the sleep


def test_p_wait_3_a_flow_that_starts_with_a_sleep_is_sent_to_x_resume_at_create() -> None:
    program = compile_flow(SOURCES["first"], flow="f")
    created = Envelope(id="t", route=Route(prev=[], curr="", next=[]), payload={}, status=Status(created_at=NOW))
    [out] = start(program, created, now=NOW)
    assert out.actor == naming.RESUME and out.envelope.headers[hdr.DELAY_UNTIL] == "2026-11-27T10:00:30Z"


class _Clock:
    def __init__(self, moment: datetime) -> None:
        self.moment = moment

    def __call__(self) -> datetime:
        return self.moment


def test_p_wait_3_the_transport_delays_an_envelope_up_to_its_delay_until() -> None:
    clock = _Clock(datetime(2026, 11, 27, 10, 0, tzinfo=UTC))
    transport = Transport(namespace="t", account_id="1", clock=clock)
    env = Envelope(id="t", route=Route(prev=[], curr="x-resume", next=[]), payload={})
    assert transport.delay_of(env) == 0
    env.headers[hdr.DELAY_UNTIL] = "2026-11-27T10:00:30Z"
    assert transport.delay_of(env) == 30
    env.headers[hdr.DELAY_UNTIL] = "2026-11-27T12:00:00Z"
    assert transport.delay_of(env) == 900  # SQS's limit; x-resume sends it on until it is due
    clock.moment += timedelta(hours=3)
    assert transport.delay_of(env) == 0


def test_p_wait_3_the_stand_in_returns_at_once() -> None:
    assert asyncio.run(_slept()) == "done"
    with pytest.raises(ValueError, match="sleep takes a positive number of seconds"):
        sleep(0)


async def _slept() -> str:
    await sleep(3600)
    return "done"
