"""Compile warnings for actors that can return two payloads where a flow calls them (P-FLOW-11, issue 29: "the
compiler warns where it can tell"), and ``asya flow check`` showing them without failing."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from asya_deploy.frames import HandlerSource, two_frame_warnings
from asya_local.cli import main

pytestmark = pytest.mark.unit

HANDLERS = """
def loop(payload):
    for part in payload["parts"]:
        yield {"part": part}


def fly_then_one(payload):
    yield ("FLY", "working")
    yield ("SET", ".route.next", [])
    yield payload


def twice(payload):
    yield payload
    yield payload


def branches(payload):
    if payload.get("a"):
        yield {"a": 1}
    else:
        yield {"b": 1}


def delegated(payload):
    yield from loop(payload)


def plain(payload):
    return payload


def nested_helper(payload):
    def inner():
        yield 1
        yield 2
    return list(inner())


class Streamer:
    def run(self, payload):
        while payload["n"] > 0:
            payload["n"] -= 1
            yield dict(payload)
"""

ACTORS = {
    "loop": "h.loop",
    "fly-then-one": "h.fly_then_one",
    "twice": "h.twice",
    "branches": "h.branches",
    "delegated": "h.delegated",
    "plain": "h.plain",
    "nested-helper": "h.nested_helper",
    "streamer": "h.Streamer.run",
    "lost": "nowhere.fn",
}

FLOW = """from asya.flows import flow


@flow
def f(state):
    state = plain(state)
    state = loop(state)
    state = fly_then_one(state)
    if state["x"]:
        state = twice(state)
    state = branches(state)
    state["r"] = [delegated(state), nested_helper(state)]
    state = streamer(state)
    state = lost(state)
    return state
"""


def _handlers(code: Path) -> dict[str, HandlerSource]:
    code.mkdir(exist_ok=True)
    (code / "h.py").write_text(HANDLERS)
    return {name: HandlerSource(spec, code) for name, spec in ACTORS.items()}


def test_p_flow_11_warns_at_each_call_of_an_actor_that_can_send_two_frames(tmp_path: Path) -> None:
    warnings = two_frame_warnings(FLOW, filename="flows/f.py", actors=_handlers(tmp_path / "functions"))
    assert [(w.line, w.col, w.message.split(":")[1].strip()) for w in warnings] == [
        (7, 13, "actor 'loop' can return more than one payload"),
        (10, 17, "actor 'twice' can return more than one payload"),
        (12, 19, "actor 'delegated' can return more than one payload"),
        (13, 13, "actor 'streamer' can return more than one payload"),
    ]
    assert str(warnings[0]) == (
        "flows/f.py:7:13: warning: actor 'loop' can return more than one payload: its handler h.loop yields a payload "
        "inside a loop (line 3); a second frame fails the hop (P-FLOW-11); fix: return one payload (merge the "
        "frames, or call it through a route of its own rather than from the flow)"
    )
    assert "yields a payload at lines 14 and 15" in warnings[1].message
    assert "yields from another generator (line 26)" in warnings[2].message
    assert "h.Streamer.run yields a payload inside a loop (line 42)" in warnings[3].message


def test_no_warning_where_the_source_cannot_tell(tmp_path: Path) -> None:
    """Branches, commands (FLY, SET), a generator nested in a plain handler, a missing module or an unparsable file
    warn nothing: the run-time check (P-FLOW-11) stays."""
    handlers = _handlers(tmp_path / "functions")
    quiet = {k: v for k, v in handlers.items() if k in ("plain", "fly-then-one", "branches", "nested-helper", "lost")}
    assert two_frame_warnings(FLOW, filename="f.py", actors=quiet) == []
    (tmp_path / "functions" / "h.py").write_text("def loop(payload:\n")
    assert two_frame_warnings(FLOW, filename="f.py", actors=handlers) == []
    assert two_frame_warnings("def f(:\n", filename="f.py", actors=handlers) == []


def test_asya_flow_check_shows_warnings_with_file_line_col_and_does_not_fail(tmp_path: Path) -> None:
    _handlers(tmp_path / "functions")
    (tmp_path / "flows").mkdir()
    flow = tmp_path / "flows" / "f.py"
    flow.write_text("@flow\ndef f(state):\n    state = plain(state)\n    state = loop(state)\n    return state\n")
    (tmp_path / "asya.yaml").write_text(
        "namespace: demo\nactors:\n  plain: {handler: h.plain}\n  loop: {handler: h.loop}\n"
        "flows:\n  f: {source: flows/f.py}\n"
    )
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["flow", "check", str(flow), "--manifest", str(tmp_path / "asya.yaml")],
        env={},
        stdout=out,
        stderr=err,
        cwd=tmp_path,
    )
    assert code == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{flow}:4:13: warning: actor 'loop' can return more than one")
    assert err.getvalue().strip().endswith(": ok, 1 warning(s)")


CANCEL_IDIOM = """
def render(payload):
    job = payload["job"]
    while not job:
        yield None  # a point where a cancel can land (docs/guide.md, Cancel)
    for _ in range(3):
        yield
    yield payload
"""


def test_yield_none_in_a_loop_is_the_cancel_idiom_not_a_second_payload(tmp_path: Path) -> None:
    """``yield None`` (or a bare ``yield``) sends no frame (P-ABI-8): a loop of them is where a cancel lands, and the
    one payload after it is the only frame."""
    code = tmp_path / "functions"
    code.mkdir()
    (code / "r.py").write_text(CANCEL_IDIOM)
    flow = "@flow\ndef f(state):\n    state = render(state)\n    return state\n"
    assert two_frame_warnings(flow, filename="f.py", actors={"render": HandlerSource("r.render", code)}) == []
