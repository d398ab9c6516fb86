"""Bounded maps and spread slices (P-MAP-1..3): the compiled bound, the plain-Python stand-in, the fan-out that sends
slice 0 alone and the children the aggregator starts (asya.flows.mesh.release), and the records an invocation hands
back (asya.spread). The local mesh runs them for real in tests/e2e/test_local_maps.py."""

from __future__ import annotations

import asyncio
import textwrap
from typing import Any

import pytest

from asya import headers as hdr
from asya import naming, routing
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows import STATE_HEADER, FlowState, Program, check_source, compile_flow, continue_outgoing
from asya.flows import map as bounded_map
from asya.flows.mesh import release
from asya.spread import spread
from tests.flowsim import plain_run, simulate

pytestmark = pytest.mark.unit

NOW = "2026-11-27T10:00:00Z"


def _program(body: str, *, header: str = "def f(state):\n") -> Program:
    return compile_flow(header + textwrap.indent(textwrap.dedent(body), "    "), flow="f")


def _ops(program: Program, op: str) -> list[dict[str, Any]]:
    return [dict(ins) for ins in program.code if ins["op"] == op]


def _problems(body: str, *, header: str = "def f(state):\n") -> list[str]:
    source = header + textwrap.indent(textwrap.dedent(body), "    ")
    return [str(p) for p in check_source(source, filename="flows/f.py")]


# -- P-MAP-1: the language ------------------------------------------------------------------------------------------


def test_p_map_1_map_with_a_bound_compiles_to_a_map_with_a_limit() -> None:
    for call in ("map(act, state['items'], max_concurrency=3)", "await map(act, state['items'], max_concurrency=3)"):
        [ins] = _ops(_program(f"state['r'] = {call}"), "map")
        assert ins["actor"] == "act" and ins["target"] == "/r" and ins["limit"] == 3
    [unbounded] = _ops(_program("state['r'] = map(act, state['items'])"), "map")
    assert "limit" not in unbounded


def test_p_map_1_the_flow_bound_applies_to_every_fan_out_and_map_without_its_own() -> None:
    program = _program(
        """
        state['a'] = [x(state), y(state), z(state)]
        state['b'] = [act(i) for i in state['items']]
        state['c'] = map(act, state['items'], max_concurrency=5)
        """,
        header="@flow(max_concurrency=2)\ndef f(state):\n",
    )
    assert [ins["limit"] for ins in program.code if ins["op"] in ("fanout", "map")] == [2, 2, 5]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("state['r'] = map(act, state['items'], max_concurrency=0)", "map takes only max_concurrency"),
        ("state['r'] = map(act, state['items'], max_concurrency=state['k'])", "map takes only max_concurrency"),
        ("state['r'] = map(act, state['items'], limit=2)", "map takes only max_concurrency"),
        ("state['r'] = map(act)", "map(...) takes an actor and a payload list"),
        ("state['r'] = map(act(state), state['items'])", "map(...) takes an actor and a payload list"),
        ("state['r'] = map(act, [1, 2])", "a map runs over a payload list"),
    ],
)
def test_p_map_1_a_malformed_map_is_a_compile_error(body: str, message: str) -> None:
    assert any(message in p and 'fix: state["r"] = map(act' in p for p in _problems(body)), _problems(body)


def test_p_map_1_a_flow_bound_that_is_no_positive_literal_is_a_compile_error() -> None:
    problems = _problems("pass", header="@flow(max_concurrency=0)\ndef f(state):\n")
    assert any("@flow takes only max_iterations and max_concurrency" in p for p in problems)


def test_p_map_1_the_stand_in_runs_as_plain_python_sync_and_async_at_most_k_at_once() -> None:
    assert bounded_map(lambda x: x * 2, [1, 2, 3], max_concurrency=2) == [2, 4, 6]
    running, most = 0, 0

    async def act(x: int) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        for _ in range(3):
            await asyncio.sleep(0)  # let the other slices in, if the bound lets them
        running -= 1
        return x + 1

    async def flow() -> list[int]:
        result: list[int] = await bounded_map(act, range(7), max_concurrency=3)
        return result

    assert asyncio.run(flow()) == [1, 2, 3, 4, 5, 6, 7]
    assert most == 3
    with pytest.raises(ValueError, match="max_concurrency must be a positive integer"):
        bounded_map(act, [], max_concurrency=0)


# -- P-MAP-2: the fan-out and the aggregator's release --------------------------------------------------------------


def _end(program: Program, payload: Any) -> routing.Outgoing:
    env = Envelope(
        id="t",
        route=Route(prev=["a"], curr="", next=[]),
        payload=payload,
        headers={STATE_HEADER: FlowState(flow="f", pc=1, owner="t").to_header()},
        status=Status(phase=Phase.SUCCEEDED.value, reason=Reason.COMPLETED.value, actor="a", created_at=NOW),
    )
    return routing.Outgoing(actor=naming.SINK, envelope=env)


def _without_window(out: routing.Outgoing) -> dict[str, Any]:
    body = out.envelope.to_dict()
    body["headers"][hdr.FAN_IN].pop("window", None)
    return {"actor": out.actor, **body}


def test_p_map_2_a_bounded_map_sends_slice_0_alone_and_release_builds_the_unbounded_children() -> None:
    body = "state = a(state)\nstate['r'] = map(b, state['items']{bound})\nstate = c(state)"
    bounded = _program(body.format(bound=", max_concurrency=2"))
    unbounded = _program(body.format(bound=""))
    payload = {"items": [10, 20, 30, 40, 50]}
    [slice0] = continue_outgoing({"f": bounded}, _end(bounded, payload), now=NOW)
    assert slice0.actor == "x-fanin-flow-f"
    header = slice0.envelope.headers[hdr.FAN_IN]
    assert header["slice_index"] == 0 and header["slice_count"] == 6 and header["window"] == 2
    *children, plain0 = continue_outgoing({"f": unbounded}, _end(unbounded, payload), now=NOW)
    assert "window" not in plain0.envelope.headers[hdr.FAN_IN]
    books = {"f": bounded}
    first = release(books, slice0.envelope, range(1, 3), count=6, set_id=header["set"], window=2, now=NOW)
    later = release(books, slice0.envelope, [5, 3, 4, 3, 9, 0], count=6, set_id=header["set"], window=2, now=NOW)
    assert [c.envelope.payload for c in first + later] == [10, 20, 30, 40, 50]
    for mine, plain in zip(first + later, children, strict=True):
        assert mine.envelope.headers[hdr.FAN_IN]["window"] == 2
        assert _without_window(mine) == _without_window(plain)  # the same ids, routes, headers and payloads


def test_p_map_2_a_bound_not_below_the_slices_is_an_ordinary_fan_out() -> None:
    program = _program("state = a(state)\nstate['r'] = map(b, state['items'], max_concurrency=3)")
    outs = continue_outgoing({"f": program}, _end(program, {"items": [1, 2, 3]}), now=NOW)
    assert [o.actor for o in outs] == ["b", "b", "b", "x-fanin-flow-f"]
    assert all("window" not in o.envelope.headers[hdr.FAN_IN] for o in outs)


def test_p_map_2_release_without_a_fan_out_at_the_position_fails_the_task() -> None:
    program = _program("state = a(state)\nstate['r'] = map(b, state['items'], max_concurrency=1)")
    [slice0] = continue_outgoing({"f": program}, _end(program, {"items": [1, 2]}), now=NOW)
    slice0.envelope.headers[STATE_HEADER] = {**slice0.envelope.headers[STATE_HEADER], "pc": 1}
    [failed] = release({"f": program}, slice0.envelope, [2], count=3, set_id="t/1", window=1, now=NOW)
    assert failed.actor == naming.SINK and failed.envelope.status is not None
    assert failed.envelope.status.phase == Phase.FAILED.value and failed.envelope.id == "t"
    assert "no fan-out before position 1" in str((failed.envelope.status.error or {}).get("message"))


@pytest.mark.parametrize("is_async", [False, True])
def test_p_map_2_a_bounded_map_in_a_try_agrees_with_plain_python(is_async: bool) -> None:
    wait = "await " if is_async else ""
    fanout = "await asyncio.gather(inc(state), dbl(state))" if is_async else "[inc(state), dbl(state)]"
    source = textwrap.dedent(
        f"""
        import asyncio

        from asya.flows import flow, map


        @flow(max_concurrency=1)
        {"async def" if is_async else "def"} g(state):
            try:
                state["m"] = {wait}map(check, state["items"], max_concurrency=2)
                state["r"] = {fanout}
            except ValueError:
                state["caught"] = True
            return state
        """
    )
    from tests.flowgen import FlowProgram
    from tests.flowgen_actors import ACTORS

    program = FlowProgram(name="g", source=source, exact_calls=False, pauses=False)
    for items in ([2, 4, 6, 8, 10], [], [2, 3, 4]):
        payload = {"n": 1, "log": [], "items": items}
        plain = plain_run(program.namespace(), "g", ACTORS, payload)
        assert simulate(program.compile(), ACTORS, payload).key() == plain.key()
        assert simulate(program.compile(), ACTORS, payload, duplicate_every=True).key() == plain.key()


# -- P-MAP-3: spreading a batch's slices ----------------------------------------------------------------------------


def _slice(message_id: str, origin: str, index: int, *, group: str | None = "t/1", receives: int = 1) -> Any:
    fan_in: dict[str, Any] = {"origin_id": origin, "slice_index": index, "slice_count": 9, "aggregation_key": "/r"}
    if group is not None:
        fan_in["set"] = group
    env = Envelope(
        id=f"{origin}-{index}", route=Route(prev=[], curr="b", next=[]), payload={}, headers={hdr.FAN_IN: fan_in}
    )
    record = {"messageId": message_id, "attributes": {"ApproximateReceiveCount": str(receives)}}
    return record, env


def test_p_map_3_the_first_slice_of_each_fan_out_starts_and_later_first_deliveries_are_handed_back() -> None:
    rows = [
        _slice("m1", "t", 1),
        _slice("m2", "t", 2),
        _slice("m3", "u", 1, group=None),  # a fan-in actor's frames keep their batch
        _slice("m4", "t", 3, receives=2),  # delivered again: runs where it lands
        _slice("m5", "t", 4, group="t/7"),  # another fan-out of the same task
        _slice("m6", "u", 2, group=None),
        _slice("m10", "t", 5, group="t/7"),
        _slice("m7", "t", 0),  # slice 0 goes to the aggregator, never to an actor, but is no child either
    ]
    plain = Envelope(id="p", route=Route(prev=[], curr="b", next=[]), payload={})
    records = [r for r, _ in rows] + [{"messageId": "m8"}, {"messageId": "m9"}]
    envelopes: dict[str, Envelope | None] = {r["messageId"]: e for r, e in rows}
    envelopes.update({"m8": plain, "m9": None})
    assert spread(records, envelopes) == ["m2", "m10"]
    assert spread(records[:1], envelopes) == []
