"""Programs versioned by content (P-FLOWV-1, P-FLOWV-2): a changed flow never runs an old task's position against
the new program.

The property test edits a corpus flow (tests/flows) at random, inserting statements anywhere in its body, and
deploys the edited program while a task of the original is in flight, between two random envelopes of the simulated
mesh (tests/flowsim.py). With the old program retained by the store, the old task finishes exactly as the original
runs as plain Python: same result or failure, same actors in the same order. Without it, the old task either had
nothing left to run or fails with ``FlowVersionMissing``, never with another outcome; and a task created on the new
program follows the edited plain-Python function.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, find, given, settings
from hypothesis import Phase as Stage
from hypothesis import strategies as st

from asya import naming, routing
from asya.envelope import Envelope, Phase, Reason, Route, Status
from asya.flows import STATE_HEADER, FlowError, FlowState, Program, compile_flow, continue_outgoing, start
from asya.flows.versions import FlowVersionMissingError, ProgramBook, resolve
from tests.flowsim import NOW, plain_run, simulate

pytestmark = pytest.mark.unit

CORPUS = Path(__file__).resolve().parents[1] / "flows"
NAMES = sorted(p.stem for p in CORPUS.glob("*.py") if p.stem != "__init__")
MISSING = "asya.flows.versions.FlowVersionMissingError"
#: Statements an edit inserts; each touches only keys of its own, so an old task that ran one shows it in its result.
_INSERTS = (
    'state["v2_{n}"] = {n}',
    'if state.get("v2_{n}") is None:\n    state["v2_seen"] = {n}',
    'state["v2_count"] = state.get("v2_count", 0) + {n}',
)
_TERMINAL = (ast.Return, ast.Break, ast.Continue)


def _load(name: str) -> tuple[Any, str, Program]:
    module = importlib.import_module(f"tests.flows.{name}")
    source = (CORPUS / f"{name}.py").read_text()
    return module, source, _compile(source, name, module)


def _compile(source: str, name: str, module: Any) -> Program:
    return compile_flow(source, flow=name, filename=f"tests/flows/{name}.py", actors=set(module.ACTORS))


def _slots(body: list[ast.stmt], out: list[tuple[list[ast.stmt], int]]) -> list[tuple[list[ast.stmt], int]]:
    """Every place a statement may be inserted: before each statement, and at the end of a block that does not end
    in ``return``/``break``/``continue``."""
    for index, stmt in enumerate(body):
        out.append((body, index))
        for child in (getattr(stmt, "body", None), getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None)):
            if isinstance(child, list) and child and isinstance(child[0], ast.stmt):
                _slots(child, out)
        for handler in getattr(stmt, "handlers", []):
            _slots(handler.body, out)
    if not body or not isinstance(body[-1], _TERMINAL):
        out.append((body, len(body)))
    return out


def _edited(source: str, name: str, edits: list[tuple[int, int, int]]) -> str:
    """``source`` with one statement inserted per edit ``(place, kind, n)`` into the flow function ``name``."""
    tree = ast.parse(source)
    function = next(n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)
    for place, kind, n in edits:
        slots = _slots(function.body, [])
        body, index = slots[place % len(slots)]
        body.insert(index, ast.parse(_INSERTS[kind].format(n=n)).body[0])
    return ast.unparse(ast.fix_missing_locations(tree))


def _namespace(module: Any, source: str, name: str) -> dict[str, Any]:
    """The original module's namespace with its flow function replaced by the edited one, for a plain run (only the
    function is executed: the module's classes, such as the errors its actors raise, stay the same objects)."""
    function = next(
        n for n in ast.parse(source).body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name
    )
    namespace = dict(vars(module))
    code = compile(ast.Module(body=[function], type_ignores=[]), f"<edited {module.__name__}>", "exec")
    exec(code, namespace)
    return namespace


_EDITS = st.lists(
    st.tuples(st.integers(0, 10_000), st.integers(0, len(_INSERTS) - 1), st.integers(0, 9)), min_size=1, max_size=4
)


@pytest.mark.parametrize("name", NAMES)
def test_a_redeploy_never_moves_an_old_task_to_the_new_program(name: str) -> None:
    module, source, v1 = _load(name)
    resume = getattr(module, "RESUME", None)
    seen = {"mid_flight": 0, "succeeded": 0, "changed": 0}

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(payload=module.payloads(), edits=_EDITS, data=st.data())
    def check(payload: dict[str, Any], edits: list[tuple[int, int, int]], data: st.DataObject) -> None:
        v2_source = _edited(source, name, edits)
        v2 = _compile(v2_source, name, module)
        assert v2.digest != v1.digest
        plain = plain_run(vars(module), name, module.ACTORS, payload, resume=resume)
        undisturbed = simulate(v1, module.ACTORS, payload, resume=resume)
        at = data.draw(st.integers(min_value=2, max_value=max(2, undisturbed.hops)), label="redeploy before envelope")

        old = simulate(v1, module.ACTORS, payload, resume=resume, redeploy=(at, v2))
        assert old.key() == plain.key()
        assert old.calls == plain.calls

        lost = simulate(v1, module.ACTORS, payload, resume=resume, redeploy=(at, v2), retain=False)
        assert lost.key() == plain.key() or lost.error_type == MISSING
        assert lost.calls == plain.calls[: len(lost.calls)]

        plain_v2 = plain_run(_namespace(module, v2_source, name), name, module.ACTORS, payload, resume=resume)
        new = simulate(v2, module.ACTORS, payload, resume=resume)
        assert new.key() == plain_v2.key()
        assert new.calls == plain_v2.calls

        seen["mid_flight"] += at <= undisturbed.hops
        seen["succeeded"] += old.ok
        seen["changed"] += lost.error_type == MISSING

    check()
    # the property is not met vacuously: deploys land mid-flight, old tasks succeed, and losing the old program shows
    assert seen["mid_flight"] and seen["succeeded"] and seen["changed"], seen


def test_failing_every_old_task_does_not_pass_the_property() -> None:
    """The control: an old task whose program is gone ends FlowVersionMissing, which is not its plain-Python
    outcome, so a store that kept nothing (or a resolver that failed every old task) fails the property above."""
    module, source, v1 = _load("review")
    v2 = _compile(_edited(source, "review", [(0, 0, 1)]), "review", module)
    # any payload that succeeds will do: no shrinking (it took minutes), the same example every run
    payload = find(
        module.payloads(),
        lambda p: plain_run(vars(module), "review", module.ACTORS, p).ok,
        settings=settings(phases=[Stage.generate], derandomize=True, database=None),
    )
    plain = plain_run(vars(module), "review", module.ACTORS, payload)
    lost = simulate(v1, module.ACTORS, payload, redeploy=(2, v2), retain=False)
    assert lost.error_type == MISSING
    assert lost.key() != plain.key()
    kept = simulate(v1, module.ACTORS, payload, redeploy=(2, v2))
    assert kept.key() == plain.key()


def _begun(program: Program, payload: dict[str, Any]) -> routing.Outgoing:
    created = Envelope(id="t-1", route=Route(prev=[], curr="", next=[]), payload=payload, status=Status(created_at=NOW))
    return start(program, created, now=NOW)[-1]


def _route_end(out: routing.Outgoing, state: dict[str, Any], result: Any) -> routing.Outgoing:
    env = out.envelope
    headers = {**env.headers, STATE_HEADER: state}
    done = Envelope(
        id=env.id,
        route=Route(prev=[*env.route.prev, env.route.curr], curr="", next=[]),
        payload=result,
        headers=headers,
        status=Status(phase=Phase.SUCCEEDED.value, reason=Reason.COMPLETED.value, actor=env.route.curr, created_at=NOW),
    )
    return routing.Outgoing(naming.SINK, done)


def test_the_created_task_carries_its_programs_digest() -> None:
    _, _, v1 = _load("pause_timeout")
    first = _begun(v1, {"needs_review": True, "parts": []})
    assert first.envelope.headers[STATE_HEADER]["digest"] == v1.digest
    assert FlowState.from_header(first.envelope.headers[STATE_HEADER]).digest == v1.digest


def test_a_state_without_a_digest_runs_the_current_program() -> None:
    """The transition: a task started before programs were versioned (or whose last continuation ran on a layer
    that ignores the digest) has no digest, and goes on with the program of its flow name, as before."""
    module, source, v1 = _load("pause_timeout")
    v2 = _compile(_edited(source, "pause_timeout", [(0, 0, 7)]), "pause_timeout", module)
    first = _begun(v1, {"needs_review": False, "parts": []})
    state = dict(first.envelope.headers[STATE_HEADER])
    state.pop("digest")
    outs = continue_outgoing({v2.flow: v2}, _route_end(first, state, {"needs_review": False, "parts": []}), now=NOW)
    # v2 from v1's position 1: v2 starts with the inserted mutation, so its position 1 calls draft again (the hazard
    # digests remove); v1 would have gone on to polish
    assert [o.envelope.route.curr for o in outs] == ["draft"]
    assert STATE_HEADER in outs[-1].envelope.headers
    assert "digest" not in outs[-1].envelope.headers[STATE_HEADER]
    pinned = ProgramBook({v2.flow: v2})
    pinned.add(v1)
    payload = {"needs_review": False, "parts": []}
    outs = continue_outgoing(pinned, _route_end(first, first.envelope.headers[STATE_HEADER], payload), now=NOW)
    assert [o.envelope.route.curr for o in outs] == ["polish"]  # with its digest: v1's position in v1


def test_a_digest_nothing_holds_fails_the_task_naming_flow_and_digest() -> None:
    module, source, v1 = _load("pause_timeout")
    v2 = _compile(_edited(source, "pause_timeout", [(0, 0, 7)]), "pause_timeout", module)
    first = _begun(v1, {"needs_review": False, "parts": []})
    state = first.envelope.headers[STATE_HEADER]
    outs = continue_outgoing({v2.flow: v2}, _route_end(first, state, {"needs_review": False, "parts": []}), now=NOW)
    assert len(outs) == 1 and outs[0].actor == naming.SINK
    status = outs[0].envelope.status
    assert status is not None and status.phase == "failed" and status.reason == "RuntimeError"
    error = status.error or {}
    assert error["type"] == MISSING
    assert "FlowVersionMissing" in error["message"] and "'pause_timeout'" in error["message"]
    assert v1.digest in error["message"]


def test_resolve_takes_the_version_the_book_holds_and_never_another_flows() -> None:
    _, _, v1 = _load("pause_timeout")
    _, _, other = _load("loops")
    module, source, _ = _load("pause_timeout")
    v2 = _compile(_edited(source, "pause_timeout", [(3, 1, 2)]), "pause_timeout", module)
    book = ProgramBook({v2.flow: v2, other.flow: other})
    state = FlowState(flow=v1.flow, pc=1, digest=v1.digest)
    with pytest.raises(FlowVersionMissingError):
        resolve(book, state)
    book.add(v1)
    assert resolve(book, state) is v1
    assert resolve(book, FlowState(flow=v1.flow, pc=1)) is v2  # no digest: the current program
    with pytest.raises(FlowVersionMissingError):  # a digest of another flow's program is not this flow's
        resolve(book, FlowState(flow=v1.flow, pc=1, digest=other.digest))
    with pytest.raises(FlowError):
        resolve(ProgramBook({}), FlowState(flow="gone", pc=0))


@pytest.mark.parametrize("bad", ["ABC", "0" * 63, 7, "g" * 64])
def test_a_malformed_digest_is_a_malformed_flow_state(bad: object) -> None:
    with pytest.raises(FlowError, match="digest"):
        FlowState.from_header({"flow": "f", "pc": 0, "digest": bad})


def test_the_digest_is_the_sha256_of_the_canonical_json_and_survives_a_round_trip() -> None:
    import hashlib
    import json

    _, _, v1 = _load("review")
    assert v1.digest == hashlib.sha256(v1.canonical()).hexdigest()
    assert Program.from_json(json.loads(v1.canonical())).digest == v1.digest
    assert json.loads(v1.canonical()) == v1.to_json()
