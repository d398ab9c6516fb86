"""A pause that nobody resumes in time raises ``TimeoutError`` in the flow (P-WAIT-1, P-WAIT-2): the compiler,
the cap of the manifest, the metadata x-pause reads, the continuation x-resume runs, and the plain-Python stand-in
that the simulated mesh must agree with."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from asya import headers as hdr
from asya import naming, pausing
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows import DEFAULT_MAX_PAUSE, STATE_HEADER, FlowState, Program, check_source, compile_flow, pause, start
from asya.flows.mesh import on_pause_timeout
from tests.flowsim import plain_run, simulate

pytestmark = pytest.mark.unit

NOW = "2026-11-27T10:00:00Z"

ESCALATING = """
from asya.flows import flow, pause


@flow
async def review(state):
    state = await draft(state)
    try:
        state = await pause(state, prompt="Publish?", fields=[{"name": "ok", "type": "boolean"}], timeout=3600)
    except TimeoutError:
        state["escalated"] = True
        state = await escalate(state)
    state = await publish(state)
    return state
"""

UNCAUGHT = """
from asya.flows import flow, pause


@flow
async def review(state):
    state = await draft(state)
    state = await pause(state, prompt="Publish?", timeout=60)
    state = await publish(state)
    return state
"""

ACTORS = {
    "draft": lambda s: {**s, "text": "hello"},
    "escalate": lambda s: {**s, "owner": "manager"},
    "publish": lambda s: {**s, "published": s.get("ok", False)},
}


def _compile(source: str, **kwargs: Any) -> Program:
    return compile_flow(source, flow="review", **kwargs)


def _namespace(source: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(source, "<flow>", "exec"), namespace)
    return namespace


def test_p_wait_1_timeout_compiles_onto_the_pause_and_reaches_the_metadata() -> None:
    program = _compile(ESCALATING)
    [ins] = [i for i in program.code if i["op"] == "pause"]
    assert ins["timeout"] == 3600
    env = Envelope(id="t", route=Route(prev=[], curr="", next=[]), payload={}, status=Status(created_at=NOW))
    [draft] = start(program, env, now=NOW)
    assert draft.actor == "draft"


def test_p_wait_1_a_pause_without_timeout_gets_the_default_cap_and_null_lifts_it() -> None:
    program = _compile(UNCAUGHT.replace(", timeout=60", ""))
    assert program.max_pause == DEFAULT_MAX_PAUSE == 7 * 24 * 3600
    assert program.pause_timeout(None) == DEFAULT_MAX_PAUSE
    assert program.pause_timeout(60) == 60
    assert program.pause_timeout(10**9) == DEFAULT_MAX_PAUSE
    unbounded = Program.from_json({**program.to_json(), "max_pause": None})
    assert unbounded.pause_timeout(None) is None
    assert unbounded.pause_timeout(10**9) == 10**9
    # the default is left out of the canonical JSON: programs compiled before the cap keep their digests
    assert "max_pause" not in program.to_json()
    assert unbounded.digest != program.digest


@pytest.mark.parametrize(
    ("argument", "message"),
    [
        ("timeout=0", "pause's timeout must be a positive number of seconds, got 0"),
        ("timeout=-5", "pause's timeout must be a positive number of seconds, got -5"),
        ("timeout=None", "pause's timeout must be a positive number of seconds, got None"),
        ("timeout='1h'", "pause's timeout must be a positive number of seconds, got '1h'"),
        ("timeout=state['t']", "pause's timeout must be a literal"),
    ],
)
def test_p_wait_1_a_bad_timeout_is_a_compile_error(argument: str, message: str) -> None:
    source = f"def f(state):\n    state = a(state)\n    state = pause(state, prompt='ok?', {argument})\n"
    problems = [str(p) for p in check_source(source)]
    assert any(message in p for p in problems), problems


def test_p_wait_1_a_fractional_timeout_rounds_up() -> None:
    program = compile_flow("def f(state):\n    state = pause(state, timeout=1.2)\n    return state\n", flow="f")
    assert [i["timeout"] for i in program.code if i["op"] == "pause"] == [2]


def test_p_wait_2_metadata_timeout_is_checked() -> None:
    assert pausing.parse_metadata({"prompt": "p", "fields": [], "timeout": 5}).timeout == 5
    assert pausing.parse_metadata({"prompt": "p", "fields": [], "timeout": 5}).to_dict()["timeout"] == 5
    assert pausing.parse_metadata({"prompt": "p", "fields": []}).timeout is None
    for bad in (0, -1, 1.5, "5", True):
        with pytest.raises(pausing.PauseMetadataError, match=r"x-asya-pause\.timeout"):
            pausing.parse_metadata({"prompt": "p", "fields": [], "timeout": bad})


def test_p_wait_2_the_expiry_envelope_round_trips() -> None:
    now = datetime(2026, 11, 27, 10, 0, tzinfo=UTC)
    expiry = pausing.PauseExpiry(fence=(3, 1), seconds=1200, due_at=pausing.expiry_due(now, 1200))
    env = pausing.expiry_envelope("t", expiry, now=now)
    assert env.route.curr == naming.RESUME
    assert env.headers[hdr.RESUME_TASK] == "t"
    assert env.headers[hdr.DELAY_UNTIL] == "2026-11-27T10:20:00Z"
    assert pausing.expiry_of(env.headers) == expiry
    assert pausing.expiry_of({}) is None
    with pytest.raises(pausing.PauseMetadataError, match="x-asya-pause-expiry"):
        pausing.expiry_of({hdr.PAUSE_EXPIRY: {"fence": [3], "seconds": 1, "due_at": "x"}})


def test_p_wait_1_the_mesh_agrees_with_plain_python_when_the_pause_times_out() -> None:
    program = _compile(ESCALATING)
    namespace = _namespace(ESCALATING)
    mesh = simulate(program, ACTORS, {"title": "t"}, pause_timeout=True)
    plain = plain_run(namespace, "review", ACTORS, {"title": "t"}, pause_timeout=True)
    assert mesh.key() == plain.key()
    assert mesh.ok
    assert mesh.result == {"title": "t", "text": "hello", "escalated": True, "owner": "manager", "published": False}
    assert mesh.calls == plain.calls == ["draft", "escalate", "publish"]


def test_p_wait_1_the_mesh_agrees_with_plain_python_when_resumed_in_time() -> None:
    program = _compile(ESCALATING)
    namespace = _namespace(ESCALATING)
    mesh = simulate(program, ACTORS, {"title": "t"}, resume={"ok": True})
    plain = plain_run(namespace, "review", ACTORS, {"title": "t"}, resume={"ok": True})
    assert mesh.key() == plain.key()
    assert mesh.result["published"] is True
    assert mesh.calls == ["draft", "publish"]


def test_p_wait_1_an_uncaught_pause_timeout_fails_the_task_with_timeout_error() -> None:
    program = _compile(UNCAUGHT)
    mesh = simulate(program, ACTORS, {"title": "t"}, pause_timeout=True)
    plain = plain_run(_namespace(UNCAUGHT), "review", ACTORS, {"title": "t"}, pause_timeout=True)
    assert mesh.key() == plain.key() == (False, "TimeoutError")
    assert mesh.calls == ["draft"]


def _paused(program: Program, payload: Any, pc: int) -> Envelope:
    state = FlowState(flow="review", pc=pc, owner="t", tries=(), digest=program.digest)
    return Envelope(
        id="t",
        route=Route(prev=["draft", naming.PAUSE], curr="", next=[]),
        payload=payload,
        headers={STATE_HEADER: state.to_header()},
        status=Status(created_at=NOW),
    )


def test_p_wait_2_an_uncaught_expiry_fails_with_reason_timeout_and_names_the_pause() -> None:
    program = _compile(UNCAUGHT)
    pc = next(i for i, ins in enumerate(program.code) if ins["op"] == "pause") + 1
    [out] = on_pause_timeout({"review": program}, _paused(program, {"a": 1}, pc), seconds=60, now=NOW, deadline_at=None)
    assert out.actor == naming.SINK
    status = out.envelope.status
    assert status is not None
    assert (status.phase, status.reason) == (Phase.FAILED.value, Reason.TIMEOUT.value)
    assert status.error is not None
    assert status.error["type"] == "TimeoutError"
    assert status.error["message"] == "pause timed out after 60 s: nobody resumed the task"
    assert out.envelope.payload["original_payload"] == {"a": 1}


def test_p_wait_2_a_caught_expiry_goes_on_at_the_except_with_the_state_at_the_pause() -> None:
    program = _compile(ESCALATING)
    try_pc = next(i for i, ins in enumerate(program.code) if ins["op"] == "try")
    pc = next(i for i, ins in enumerate(program.code) if ins["op"] == "pause") + 1
    paused = _paused(program, {"text": "hello"}, pc)
    paused.headers[STATE_HEADER] = FlowState(
        flow="review", pc=pc, owner="t", tries=((try_pc, 0),), digest=program.digest
    ).to_header()
    [out] = on_pause_timeout({"review": program}, paused, seconds=3600, now=NOW, deadline_at="2026-11-27T10:05:00Z")
    assert out.actor == "escalate"
    assert out.envelope.id == "t"
    assert out.envelope.payload == {"text": "hello", "escalated": True}
    assert out.envelope.route.prev == ["draft", naming.PAUSE, naming.RESUME]
    assert out.envelope.status is not None
    assert out.envelope.status.deadline_at == "2026-11-27T10:05:00Z"
    assert out.envelope.status.error is not None  # the history shows the pause's step failed, caught
    assert out.envelope.status.error["type"] == "TimeoutError"


def test_p_wait_1_the_stand_in_raises_timeout_error_when_told_nobody_resumed() -> None:
    assert pause({"a": 1}, prompt="p", timeout=5, resume={"b": 2}) == {"a": 1, "b": 2}
    with pytest.raises(TimeoutError, match="pause timed out after 5 s"):
        pause({"a": 1}, prompt="p", timeout=5, resume=TimeoutError)
    with pytest.raises(TimeoutError, match="late"):
        pause({"a": 1}, resume=TimeoutError("late"))

    async def flow(state: dict[str, Any]) -> dict[str, Any]:
        try:
            state = await pause(state, prompt="p", timeout=5, resume=TimeoutError)
        except TimeoutError:
            state["escalated"] = True
        return state

    assert asyncio.run(flow({})) == {"escalated": True}


def test_p_wait_1_the_manifest_cap_reaches_the_program(tmp_path: Any) -> None:
    from asya.manifest import load_manifest

    (tmp_path / "flows").mkdir()
    (tmp_path / "flows" / "review.py").write_text(UNCAUGHT.replace(", timeout=60", ""))
    (tmp_path / "handlers.py").write_text("def f(p):\n    return p\n")
    actors = "".join(f"  {a}:\n    handler: handlers.f\n" for a in ("draft", "publish"))
    base = f"namespace: t\nactors:\n{actors}flows:\n  review:\n    source: flows/review.py\n"
    (tmp_path / "asya.yaml").write_text(base)
    program = load_manifest(tmp_path / "asya.yaml").flows["review"].program
    assert program is not None and program.max_pause == DEFAULT_MAX_PAUSE
    (tmp_path / "asya.yaml").write_text(base + "    max_pause: 1h\n")
    program = load_manifest(tmp_path / "asya.yaml").flows["review"].program
    assert program is not None and program.max_pause == 3600
    (tmp_path / "asya.yaml").write_text(base + "    max_pause: null\n")
    program = load_manifest(tmp_path / "asya.yaml").flows["review"].program
    assert program is not None and program.max_pause is None
