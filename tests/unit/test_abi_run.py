"""Running handlers (PROTOCOL 3.2: P-ABI-4 .. P-ABI-11): kinds, frames, errors."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from asya.abi import AbiState, Frame, Handler, HandlerError
from asya.envelope import parse_envelope
from asya.exceptions import AbiProtocolError, SerializationError

pytestmark = pytest.mark.unit

DEADLINE = "2026-03-01T10:05:00Z"


def make_state() -> AbiState:
    return AbiState(
        id="task-1",
        prev=["prep"],
        curr="me",
        next=["post", "final"],
        headers={"x-asya-flow": "demo", "nested": {"k": [1]}},
        status={"phase": "processing", "actor": "me", "attempt": 1, "max_attempts": 1, "deadline_at": DEADLINE},
    )


@dataclass
class Run:
    """Drives one Handler and records what reached the callbacks."""

    target: Callable[[Any], Any]
    state: AbiState = field(default_factory=make_state)
    frames: list[Frame] = field(default_factory=list)
    flies: list[Any] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.handler = Handler(self.target)

    def __call__(self, payload: Any = None) -> list[Frame]:
        self.handler.run(payload, self.state, on_frame=self.frames.append, on_fly=self.flies.append)
        return self.frames


@pytest.fixture
def runs() -> Iterator[Callable[[Callable[[Any], Any]], Run]]:
    created: list[Run] = []

    def make(target: Callable[[Any], Any]) -> Run:
        run = Run(target)
        created.append(run)
        return run

    yield make
    for run in created:
        run.handler.close()


# --- function handlers ------------------------------------------------------------------------------------------------


def test_p_abi_6_p_abi_7_function_return_is_one_frame_with_the_input_state(runs: Any) -> None:
    frames = runs(lambda p: {**p, "sentiment": "positive"})({"text": "hi"})
    assert frames == [
        Frame(
            payload={"text": "hi", "sentiment": "positive"},
            next=["post", "final"],
            headers={"x-asya-flow": "demo", "nested": {"k": [1]}},
            deadline_at=DEADLINE,
            index=0,
        )
    ]


def test_p_abi_6_returned_list_is_one_payload_never_a_fan_out(runs: Any) -> None:
    frames = runs(lambda p: [1, 2, 3])(None)
    assert [f.payload for f in frames] == [[1, 2, 3]]


def test_p_abi_6_returned_tuple_is_one_array_payload(runs: Any) -> None:
    frames = runs(lambda p: ("GET", ".id"))(None)
    assert [f.payload for f in frames] == [["GET", ".id"]]


@pytest.mark.parametrize("value", [0, "", False, [], {}])
def test_p_abi_6_falsy_values_other_than_none_are_frames(runs: Any, value: Any) -> None:
    assert [f.payload for f in runs(lambda p: value)(None)] == [value]


def test_p_abi_6_none_means_zero_frames(runs: Any) -> None:
    assert runs(lambda p: None)({"a": 1}) == []


def test_p_abi_7_frame_does_not_alias_handler_objects(runs: Any) -> None:
    kept: dict[str, Any] = {"k": [1]}
    run = runs(lambda p: kept)
    frame = run(None)[0]
    kept["k"].append(2)
    frame.headers["x-asya-flow"] = "changed"
    assert frame.payload == {"k": [1]}
    assert run.state.headers["x-asya-flow"] == "demo"


def test_p_abi_5_handler_receives_exactly_the_payload(runs: Any) -> None:
    seen: list[Any] = []
    runs(seen.append)({"text": "hi"})
    assert seen == [{"text": "hi"}]


def test_p_abi_4_async_function(runs: Any) -> None:
    async def handler(payload: Any) -> Any:
        await asyncio.sleep(0)
        return {"doubled": payload * 2}

    assert [f.payload for f in runs(handler)(21)] == [{"doubled": 42}]


def test_p_abi_4_async_function_returning_none_has_zero_frames(runs: Any) -> None:
    async def handler(payload: Any) -> None:
        await asyncio.sleep(0)

    assert runs(handler)(1) == []


def test_p_abi_4_async_handlers_reuse_one_event_loop_per_handler(runs: Any) -> None:
    async def loop_id(payload: Any) -> int:
        return id(asyncio.get_running_loop())

    first = runs(loop_id)
    ids = [first(None)[-1].payload, first(None)[-1].payload]
    other = runs(loop_id)(None)[0].payload
    assert ids[0] == ids[1]
    assert other != ids[0]


def test_p_abi_4_background_task_survives_into_the_next_call(runs: Any) -> None:
    events: list[str] = []

    async def handler(payload: str) -> None:
        async def later() -> None:
            events.append(f"late {payload}")

        handler.pending = asyncio.get_running_loop().create_task(later())  # type: ignore[attr-defined]
        events.append(f"call {payload}")

    run = runs(handler)
    run("a")
    run("b")
    assert events[:2] == ["call a", "late a"]


def test_handler_close_is_idempotent_and_loop_recreated(runs: Any) -> None:
    async def handler(payload: Any) -> Any:
        return payload

    run = runs(handler)
    run(1)
    run.handler.close()
    run.handler.close()
    assert [f.payload for f in run(2)] == [1, 2]


# --- generators -------------------------------------------------------------------------------------------------------


def test_p_abi_8_p_abi_9_generator_frames_numbered_in_yield_order_none_ignored(runs: Any) -> None:
    def handler(payload: Any) -> Iterator[Any]:
        yield {"n": 0}
        yield None
        yield [1, 2]
        yield "three"

    frames = runs(handler)(None)
    assert [(f.index, f.payload) for f in frames] == [(0, {"n": 0}), (1, [1, 2]), (2, "three")]


def test_p_abi_9_generator_without_payload_yields_has_zero_frames(runs: Any) -> None:
    def handler(payload: Any) -> Iterator[Any]:
        yield None
        yield ("SET", ".headers.done", True)

    run = runs(handler)
    assert run(None) == []
    assert run.state.headers["done"] is True


def test_p_abi_8_empty_generator(runs: Any) -> None:
    def handler(payload: Any) -> Iterator[Any]:
        return
        yield

    assert runs(handler)(None) == []


def test_p_abi_4_async_generator_with_commands(runs: Any) -> None:
    async def handler(payload: Any) -> AsyncIterator[Any]:
        actor = yield ("GET", ".route.curr")
        await asyncio.sleep(0)
        yield ("FLY", {"progress": 0.5})
        yield ("SET", ".route.next", ["other"])
        yield {"from": actor}
        yield None
        yield {"second": True}

    run = runs(handler)
    frames = run(None)
    assert [(f.index, f.payload, f.next) for f in frames] == [
        (0, {"from": "me"}, ["other"]),
        (1, {"second": True}, ["other"]),
    ]
    assert run.flies == [{"progress": 0.5}]


def test_p_abi_4_generator_method_of_a_class(runs: Any) -> None:
    class Splitter:
        def __init__(self) -> None:
            self.sep = " "

        def process(self, payload: str) -> Iterator[str]:
            yield from payload.split(self.sep)

    assert [f.payload for f in runs(Splitter().process)("a b c")] == ["a", "b", "c"]


def test_decorated_generator_is_driven_as_a_generator(runs: Any) -> None:
    """A plain wrapper returning a generator behaves like the generator it wraps (chosen)."""

    def gen(payload: Any) -> Iterator[Any]:
        yield ("SET", ".headers.wrapped", True)
        yield payload

    @functools.wraps(gen)
    def wrapper(payload: Any) -> Any:
        return gen(payload)

    run = runs(wrapper)
    frames = run("x")
    assert [(f.payload, f.headers.get("wrapped")) for f in frames] == [("x", True)]


def test_p_abi_10_frames_snapshot_the_state_at_yield_time(runs: Any) -> None:
    def handler(payload: Any) -> Iterator[Any]:
        yield "before"
        yield ("SET", ".headers.stage", 2)
        yield ("SET", ".route.next", ["review"])
        yield ("SET", ".status.deadline_at", "2026-03-01T11:00:00Z")
        yield "after"
        yield ("DEL", ".headers.nested")
        yield ("DEL", ".status.deadline_at")
        yield "last"

    frames = runs(handler)(None)
    assert [(f.payload, f.next, f.headers, f.deadline_at) for f in frames] == [
        ("before", ["post", "final"], {"x-asya-flow": "demo", "nested": {"k": [1]}}, DEADLINE),
        ("after", ["review"], {"x-asya-flow": "demo", "nested": {"k": [1]}, "stage": 2}, "2026-03-01T11:00:00Z"),
        ("last", ["review"], {"x-asya-flow": "demo", "stage": 2}, None),
    ]


def test_p_abi_10_frame_snapshots_are_independent_of_later_nested_writes(runs: Any) -> None:
    def handler(payload: Any) -> Iterator[Any]:
        yield "first"
        yield ("SET", ".headers.nested.k[0]", 99)
        yield "second"

    frames = runs(handler)(None)
    assert frames[0].headers["nested"] == {"k": [1]}
    assert frames[1].headers["nested"] == {"k": [99]}


def test_p_route_5_state_holds_the_final_headers_and_next_after_the_call(runs: Any) -> None:
    def handler(payload: Any) -> Iterator[Any]:
        yield ("SET", ".headers.x-asya-pause", {"prompt": "ok?"})
        yield ("DEL", ".route.next[0]")

    run = runs(handler)
    assert run(None) == []
    assert run.state.headers["x-asya-pause"] == {"prompt": "ok?"}
    assert run.state.next == ["final"]


def test_p_abi_12_state_from_an_entry_updated_envelope() -> None:
    env = parse_envelope(
        {
            "id": "e1",
            "route": {"prev": ["a"], "curr": "me", "next": ["b"]},
            "status": {"phase": "processing", "actor": "me", "deadline_at": DEADLINE},
            "payload": None,
        }
    )
    state = AbiState.from_envelope(env)
    assert state.to_dict() == {
        "id": "e1",
        "parent_id": "",
        "route": {"prev": ["a"], "curr": "me", "next": ["b"]},
        "headers": {},
        "status": {"phase": "processing", "actor": "me", "attempt": 1, "max_attempts": 1, "deadline_at": DEADLINE},
    }
    state.set(".route.next[0:0]", ["c"])
    state.set(".headers.h", 1)
    assert env.route.next == ["b"]
    assert env.headers == {}


def test_p_abi_12_state_copies_envelope_headers_and_keeps_parent_id() -> None:
    env = parse_envelope(
        {
            "id": "c1",
            "parent_id": "p1",
            "route": {"prev": [], "curr": "me", "next": []},
            "headers": {"a": {"b": 1}},
            "payload": 1,
        }
    )
    state = AbiState.from_envelope(env)
    state.set(".headers.a.b", 2)
    assert state.parent_id == "p1"
    assert env.headers == {"a": {"b": 1}}
    assert state.to_dict()["status"]["phase"] == "pending"


# --- errors -----------------------------------------------------------------------------------------------------------


class Boom(ValueError):
    pass


def test_p_abi_11_function_exception_is_a_handler_error(runs: Any) -> None:
    def handler(payload: Any) -> Any:
        raise Boom("bad input")

    with pytest.raises(HandlerError) as info:
        runs(handler)(None)
    assert isinstance(info.value.exc, Boom)
    assert str(info.value.exc) == "bad input"


def test_p_abi_11_async_exception_is_a_handler_error(runs: Any) -> None:
    async def handler(payload: Any) -> Any:
        await asyncio.sleep(0)
        raise Boom("async bad")

    with pytest.raises(HandlerError) as info:
        runs(handler)(None)
    assert isinstance(info.value.exc, Boom)


@pytest.mark.parametrize("is_async", [False, True])
def test_p_abi_11_frames_before_a_generator_exception_stay_sent(runs: Any, is_async: bool) -> None:
    def sync_handler(payload: Any) -> Iterator[Any]:
        yield "one"
        yield "two"
        raise Boom("third failed")

    async def async_handler(payload: Any) -> AsyncIterator[Any]:
        yield "one"
        yield "two"
        raise Boom("third failed")

    run = runs(async_handler if is_async else sync_handler)
    with pytest.raises(HandlerError) as info:
        run(None)
    assert isinstance(info.value.exc, Boom)
    assert [f.payload for f in run.frames] == ["one", "two"]


@pytest.mark.parametrize("is_async", [False, True])
def test_p_abi_11_base_exception_is_not_caught(runs: Any, is_async: bool) -> None:
    def sync_handler(payload: Any) -> Iterator[Any]:
        yield "one"
        raise SystemExit(3)

    async def async_handler(payload: Any) -> AsyncIterator[Any]:
        yield "one"
        raise SystemExit(3)

    run = runs(async_handler if is_async else sync_handler)
    with pytest.raises(SystemExit):
        run(None)
    assert [f.payload for f in run.frames] == ["one"]


def test_p_abi_11_base_exception_from_a_function_is_not_caught(runs: Any) -> None:
    def handler(payload: Any) -> Any:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        runs(handler)(None)


def test_p_abi_14_uncaught_abi_error_is_a_handler_error(runs: Any) -> None:
    def handler(payload: Any) -> Iterator[Any]:
        yield "kept"
        yield ("SET", ".id", "other")
        yield "never"

    run = runs(handler)
    with pytest.raises(HandlerError) as info:
        run(None)
    assert isinstance(info.value.exc, AbiProtocolError)
    assert [f.payload for f in run.frames] == ["kept"]


@pytest.mark.parametrize("is_async", [False, True])
def test_p_abi_19_r3_unserialisable_frame_is_thrown_at_its_yield(runs: Any, is_async: bool) -> None:
    """P-ABI-19 (R3): the frame is not passed on; uncaught at the yield, its SerializationError is the handler's."""
    closed: list[bool] = []

    def sync_handler(payload: Any) -> Iterator[Any]:
        try:
            yield "ok"
            yield {"bad": float("nan")}
            yield "never"
        finally:
            closed.append(True)

    async def async_handler(payload: Any) -> AsyncIterator[Any]:
        try:
            yield "ok"
            yield {"bad": float("nan")}
            yield "never"
        finally:
            closed.append(True)

    run = runs(async_handler if is_async else sync_handler)
    with pytest.raises(HandlerError, match=r"SerializationError: frame 1 cannot be serialised.*\.bad") as info:
        run(None)
    assert isinstance(info.value.exc, SerializationError)
    assert [f.payload for f in run.frames] == ["ok"]
    assert closed == [True]


def test_p_abi_19_r3_unserialisable_function_return_is_the_handlers_error(runs: Any) -> None:
    run = runs(lambda p: object())
    with pytest.raises(HandlerError, match="frame 0") as info:
        run(None)
    assert isinstance(info.value.exc, SerializationError)
    assert run.frames == []


def test_p_abi_19_r3_unserialisable_async_return_is_the_handlers_error(runs: Any) -> None:
    async def handler(payload: Any) -> Any:
        return {1j: 1}

    with pytest.raises(HandlerError, match="object key of type complex") as info:
        runs(handler)(None)
    assert isinstance(info.value.exc, SerializationError)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"x": 10**5000}, "digits"),
        ({"x": "a\ud800b"}, "lone surrogate"),
        ({1: "a", "1": "b"}, "same JSON key"),
    ],
    ids=["big-int", "surrogate", "colliding-keys"],
)
def test_p_abi_19_r3_unencodable_return_and_yield_are_handler_errors(runs: Any, value: Any, message: str) -> None:
    """P-ABI-19 (R3): nothing of the value reaches on_frame; the handler's error is a SerializationError."""
    for target in (lambda p: value, lambda p: (yield value)):
        run = runs(target)
        with pytest.raises(HandlerError, match=message) as info:
            run(None)
        assert isinstance(info.value.exc, SerializationError)
        assert run.frames == []


def test_p_abi_19_r3_generator_caught_at_the_yield_goes_on(runs: Any) -> None:
    """P-ABI-19 (R3): thrown at the yield that produced it, so the handler may catch it and yield something else."""

    def handler(payload: Any) -> Iterator[Any]:
        try:
            yield {"x": "a\ud800b"}
        except SerializationError as exc:
            yield {"error": str(exc)[:40]}
        try:
            yield ("FLY", "\udfff")
        except SerializationError:
            yield ("FLY", "replaced")

    run = runs(handler)
    frames = run(None)
    assert [f.index for f in frames] == [0]
    assert frames[0].payload["error"].startswith("frame 0 cannot be serialised")
    assert run.flies == ["replaced"]


def test_p_abi_6_r3_plain_function_returning_a_generator_is_one_frame(runs: Any) -> None:
    """Issue 25 defect 6: a function's return value is one frame (P-ABI-6), a generator object is not encodable
    (P-ABI-19 R3): it is not fanned out."""
    seen: list[Any] = []

    def gen() -> Iterator[Any]:
        seen.append("ran")
        yield "a"
        yield "b"

    run = runs(lambda p: gen())
    with pytest.raises(HandlerError, match=r"SerializationError: frame 0 .* generator") as info:
        run(None)
    assert isinstance(info.value.exc, SerializationError)
    assert run.frames == [] and seen == []

    async def agen() -> AsyncIterator[Any]:
        yield "a"

    with pytest.raises(HandlerError, match="async_generator"):
        runs(lambda p: agen())(None)


def test_callback_errors_propagate_unchanged_and_close_the_generator(runs: Any) -> None:
    closed: list[bool] = []

    def handler(payload: Any) -> Iterator[Any]:
        try:
            yield "a"
            yield "b"
        finally:
            closed.append(True)

    class SendFailedError(Exception):
        pass

    def on_frame(frame: Frame) -> None:
        raise SendFailedError(frame.index)

    run = runs(handler)
    with pytest.raises(SendFailedError):
        run.handler.run(None, run.state, on_frame=on_frame, on_fly=run.flies.append)
    assert closed == [True]


def test_generator_failing_on_close_is_logged_not_masking_the_error(
    runs: Any, caplog: pytest.LogCaptureFixture
) -> None:
    def handler(payload: Any) -> Iterator[Any]:
        try:
            yield "a"
        finally:
            raise RuntimeError("cleanup failed")

    class SendFailedError(Exception):
        pass

    def on_frame(frame: Frame) -> None:
        raise SendFailedError(frame.index)

    run = runs(handler)
    with pytest.raises(SendFailedError):
        run.handler.run(None, run.state, on_frame=on_frame, on_fly=run.flies.append)
    assert "failed while being closed" in caplog.text
    assert "cleanup failed" in caplog.text
