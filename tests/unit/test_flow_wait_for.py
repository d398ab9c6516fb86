"""``state = await wait_for(state, event=..., timeout=..., path=...)`` (P-WAIT-4): the compiler, the pause metadata it
becomes, the merge of a signal's data, and the simulated mesh against the plain-Python stand-in (signaled, not
signaled, caught and uncaught)."""

from __future__ import annotations

from typing import Any

import pytest

from asya import naming, pausing
from asya.flows import check_source, compile_flow, wait_for
from tests.flowsim import plain_run, simulate

pytestmark = pytest.mark.unit

SOURCE = """
from asya.flows import flow, wait_for


@flow
async def order(state):
    state = await charge(state)
    try:
        state = await wait_for(state, event="payment.settled", timeout=3600, path="/payment")
    except TimeoutError:
        state["payment"] = {"status": "unknown"}
        state = await reconcile(state)
    state = await ship(state)
    return state
"""

ACTORS = {
    "charge": lambda s: {**s, "charged": True, "payment": {"id": "p1"}},
    "reconcile": lambda s: {**s, "reconciled": True},
    "ship": lambda s: {**s, "shipped": s["payment"].get("status") == "settled"},
}


def _namespace() -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(SOURCE, "<flow>", "exec"), namespace)
    return namespace


def test_p_wait_4_wait_for_compiles_to_a_pause_that_names_its_event() -> None:
    program = compile_flow(SOURCE, flow="order")
    [ins] = [i for i in program.code if i["op"] == "pause"]
    assert ins["event"] == "payment.settled" and ins["path"] == "/payment" and ins["timeout"] == 3600
    assert ins["prompt"] == "Waiting for event 'payment.settled'" and ins["fields"] == []
    metadata = pausing.parse_metadata({k: ins[k] for k in ("prompt", "fields", "event", "path", "timeout")})
    assert (metadata.event, metadata.event_pointer, metadata.timeout) == ("payment.settled", "/payment", 3600)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("wait_for(state)", "wait_for(...) needs event=, the name of the signal it waits for"),
        ("wait_for(state, event='a b')", "wait_for takes event (a name of letters, digits"),
        ("wait_for(state, event='')", "wait_for takes event (a name of letters, digits"),
        ("wait_for(state, event=state['e'])", "wait_for's event must be a literal"),
        ("wait_for(state, event='e', path='x')", "wait_for takes event"),
        ("wait_for(state, event='e', timeout=0)", "pause's timeout must be a positive number of seconds"),
        ("wait_for(state['x'], event='e')", "wait_for(...) takes the state as its one positional argument"),
    ],
)
def test_p_wait_4_a_bad_wait_for_is_a_compile_error(call: str, message: str) -> None:
    problems = [str(p) for p in check_source(f"async def f(state):\n    state = await {call}\n    return state\n")]
    assert any(message in p for p in problems), problems


def test_p_wait_4_signaled_in_time_the_mesh_agrees_with_plain_python() -> None:
    program = compile_flow(SOURCE, flow="order")
    signals = {"payment.settled": {"status": "settled", "amount": 5}}
    mesh = simulate(program, ACTORS, {"sku": "x"}, signals=signals)
    plain = plain_run(_namespace(), "order", ACTORS, {"sku": "x"}, signals=signals)
    assert mesh.key() == plain.key()
    # an object signal is merged into the object at the path (shallow): the charge's id stays
    assert mesh.result["payment"] == {"id": "p1", "status": "settled", "amount": 5}
    assert mesh.result["shipped"] is True
    assert mesh.calls == ["charge", "ship"]


def test_p_wait_4_no_signal_raises_timeout_error_where_the_flow_catches_it() -> None:
    program = compile_flow(SOURCE, flow="order")
    mesh = simulate(program, ACTORS, {"sku": "x"})
    plain = plain_run(_namespace(), "order", ACTORS, {"sku": "x"})
    assert mesh.key() == plain.key()
    assert mesh.result["reconciled"] is True and mesh.result["shipped"] is False
    assert mesh.calls == ["charge", "reconcile", "ship"]


def test_p_wait_4_an_uncaught_wait_timeout_fails_the_task() -> None:
    source = "async def f(state):\n    state = await wait_for(state, event='go')\n    state = await a(state)\n"
    program = compile_flow(source, flow="f")
    assert program.code[0]["event"] == "go" and "path" not in program.code[0]
    assert program.code[0]["op"] == "pause"
    mesh = simulate(program, {"a": lambda s: s}, {})
    assert mesh.key() == (False, "TimeoutError")
    signaled = simulate(program, {"a": lambda s: s}, {}, signals={"go": [1, 2]})
    assert signaled.key() == (True, {"go": [1, 2]})  # the default path is /<event>; a list is set there


def test_p_wait_4_the_signal_merge_at_a_path() -> None:
    def merged(stored: Any, data: Any, path: str | None = "/p") -> Any:
        metadata: dict[str, Any] = {"prompt": "", "fields": [], "event": "e"}
        if path is not None:
            metadata["path"] = path
        return pausing.merge_input({"payload": stored, "pause": {"metadata": metadata}}, data)

    assert merged({"a": 1}, {"x": 1}) == {"a": 1, "p": {"x": 1}}
    assert merged({"p": {"y": 2}}, {"x": 1}) == {"p": {"y": 2, "x": 1}}
    assert merged({"p": {"y": 2}}, 7) == {"p": 7}
    assert merged({"a": {"b": 1}}, "v", "/a/c/d") == {"a": {"b": 1, "c": {"d": "v"}}}
    assert merged({"a": 1}, {"b": 2}, "") == {"a": 1, "b": 2}
    assert merged({"a": 1}, None, None) == {"a": 1, "e": None}
    with pytest.raises(pausing.ResumeMergeError, match="storage reference"):
        merged({}, {"__ref__": "s3://b/k"}, "")


def test_p_wait_4_metadata_event_and_path_are_checked() -> None:
    for bad in ({"event": "a b"}, {"event": ""}, {"event": 3}, {"event": "e", "path": "x"}, {"path": "/x"}):
        with pytest.raises(pausing.PauseMetadataError):
            pausing.parse_metadata({"prompt": "p", "fields": [], **bad})
    assert naming.is_event_name("payment.settled-2_x") and not naming.is_event_name(".x")
    assert not naming.is_event_name("x" * 65)


def test_p_wait_4_the_stand_in() -> None:
    assert wait_for({"a": 1}, event="e", signal={"b": 2}) == {"a": 1, "e": {"b": 2}}
    assert wait_for({"a": 1}, event="e", path="", signal={"b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(TimeoutError, match="no signal 'e' within 5 s"):
        wait_for({"a": 1}, event="e", timeout=5)
    with pytest.raises(TimeoutError):
        wait_for({"a": 1}, event="e", signal=TimeoutError)
