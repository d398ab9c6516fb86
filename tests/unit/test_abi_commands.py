"""Generator commands and paths (PROTOCOL 3.3, 3.4: P-ABI-12 .. P-ABI-18)."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest

from asya.abi import AbiState, Frame, Handler, HandlerError
from asya.abi_paths import parse_path
from asya.exceptions import AbiProtocolError, SerializationError

pytestmark = pytest.mark.unit

DEADLINE = "2026-03-01T10:05:00Z"


def make_state() -> AbiState:
    return AbiState(
        id="task-1",
        parent_id="",
        prev=["prep", "clean"],
        curr="me",
        next=["post", "final"],
        headers={"x-asya-flow": "demo", "x.y": "dotted", "list": [10, 20, 30], "nested": {"k": 1}},
        status={"phase": "processing", "actor": "me", "attempt": 1, "max_attempts": 1, "deadline_at": DEADLINE},
    )


def run_commands(*commands: tuple[Any, ...]) -> tuple[list[Any], AbiState, list[Frame]]:
    """Yield each command, record what the generator got back (the value or the exception thrown in)."""
    replies: list[Any] = []
    state = make_state()
    frames: list[Frame] = []

    def handler(payload: Any) -> Iterator[Any]:
        for command in commands:
            try:
                replies.append((yield command))
            except Exception as exc:
                replies.append(exc)

    Handler(handler).run(None, state, on_frame=frames.append, on_fly=lambda _: None)
    return replies, state, frames


def reply_of(command: tuple[Any, ...]) -> Any:
    return run_commands(command)[0][0]


# --- GET --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (".id", "task-1"),
        (".parent_id", ""),
        (".route", {"prev": ["prep", "clean"], "curr": "me", "next": ["post", "final"]}),
        (".route.prev", ["prep", "clean"]),
        (".route.curr", "me"),
        (".route.next[0]", "post"),
        (".route.next[-1]", "final"),
        (".route.prev[-2]", "prep"),
        (".route.next[1:]", ["final"]),
        (".route.next[:1]", ["post"]),
        (".route.next[:]", ["post", "final"]),
        (".route.next[-1:]", ["final"]),
        (".route.next[5:]", []),
        (".headers.x-asya-flow", "demo"),
        ('.headers["x.y"]', "dotted"),
        ('.["headers"]["x-asya-flow"]', "demo"),
        (".headers.list[1]", 20),
        (".headers.nested.k", 1),
        (".status.deadline_at", DEADLINE),
        (".status.phase", "processing"),
    ],
)
def test_p_abi_12_p_abi_17_get_paths(path: str, expected: Any) -> None:
    assert reply_of(("GET", path)) == expected


def test_p_abi_17_get_dot_is_the_whole_context() -> None:
    assert reply_of(("GET", ".")) == {
        "id": "task-1",
        "parent_id": "",
        "route": {"prev": ["prep", "clean"], "curr": "me", "next": ["post", "final"]},
        "headers": {"x-asya-flow": "demo", "x.y": "dotted", "list": [10, 20, 30], "nested": {"k": 1}},
        "status": {"phase": "processing", "actor": "me", "attempt": 1, "max_attempts": 1, "deadline_at": DEADLINE},
    }


def test_p_abi_12_get_returns_a_deep_copy() -> None:
    state = make_state()

    def handler(payload: Any) -> Generator[Any, Any, None]:
        headers = yield ("GET", ".headers")
        headers["nested"]["k"] = 99
        headers["new"] = True
        nxt = yield ("GET", ".route.next")
        nxt.append("sneaky")
        yield "done"

    frames: list[Frame] = []
    Handler(handler).run(None, state, on_frame=frames.append, on_fly=lambda _: None)
    assert frames[0].headers["nested"] == {"k": 1}
    assert "new" not in state.headers
    assert state.next == ["post", "final"]


def test_p_abi_12_handler_sees_its_own_writes() -> None:
    replies, _, _ = run_commands(("SET", ".headers.a", {"b": [1]}), ("GET", ".headers.a.b[0]"), ("GET", ".headers.a"))
    assert replies == [None, 1, {"b": [1]}]


@pytest.mark.parametrize(
    ("path", "error"),
    [
        (".headers.missing", KeyError),
        (".nope", KeyError),
        (".route.next[2]", IndexError),
        (".route.next[-3]", IndexError),
        (".headers.x-asya-flow.deeper", TypeError),
        (".headers[0]", TypeError),
        (".route.next.first", TypeError),
        (".id[0:1]", TypeError),
    ],
)
def test_p_abi_14_get_missing_or_mistyped_raises_into_the_generator(path: str, error: type[Exception]) -> None:
    reply = reply_of(("GET", path))
    assert type(reply) is error
    assert path in str(reply)


# --- SET --------------------------------------------------------------------------------------------------------------


def test_p_abi_18_set_slice_inserts_actors_before_the_rest() -> None:
    _, state, _ = run_commands(("SET", ".route.next[0:0]", ["review", "x-pause"]))
    assert state.next == ["review", "x-pause", "post", "final"]


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (".route.next", ["a", "b"], ["a", "b"]),
        (".route.next", (), []),
        (".route.next[0]", "first", ["first", "final"]),
        (".route.next[-1]", "last", ["post", "last"]),
        (".route.next[1:]", ["x", "y"], ["post", "x", "y"]),
        (".route.next[:]", [], []),
        (".route.next[-1:]", ("t",), ["post", "t"]),
        ('.route["next"]', ["z"], ["z"]),
    ],
)
def test_p_abi_18_set_route_next(path: str, value: Any, expected: list[str]) -> None:
    replies, state, _ = run_commands(("SET", path, value))
    assert replies == [None]
    assert state.next == expected


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (".route.next", ["Bad_Name"]),
        (".route.next", "post"),
        (".route.next", [1]),
        (".route.next[0]", "UPPER"),
        (".route.next[0:0]", ["a" * 41]),
        (".route.next", {"a": 1}),
    ],
)
def test_p_abi_15_route_next_must_stay_a_list_of_valid_actor_names(path: str, value: Any) -> None:
    replies, state, _ = run_commands(("SET", path, value))
    assert type(replies[0]) is ValueError
    assert "route.next" in str(replies[0])
    assert state.next == ["post", "final"]


def test_p_abi_18_slice_assignment_needs_a_list() -> None:
    replies, state, _ = run_commands(("SET", ".route.next[0:0]", "ab"), ("SET", ".headers.list[0:1]", 5))
    assert [type(r) for r in replies] == [TypeError, TypeError]
    assert state.next == ["post", "final"]
    assert state.headers["list"] == [10, 20, 30]


def test_set_headers_creates_missing_intermediate_objects() -> None:
    _, state, _ = run_commands(("SET", ".headers.a.b.c", 1), ("SET", '.headers["x.y"]', "replaced"))
    assert state.headers["a"] == {"b": {"c": 1}}
    assert state.headers["x.y"] == "replaced"


def test_set_headers_list_elements_with_negative_index_and_slice() -> None:
    _, state, _ = run_commands(("SET", ".headers.list[-1]", 99), ("SET", ".headers.list[0:1]", [1, 2]))
    assert state.headers["list"] == [1, 2, 20, 99]


def test_set_stores_a_deep_copy_of_the_converted_value() -> None:
    value = {"k": [1, 2]}
    state = make_state()

    def handler(payload: Any) -> Iterator[Any]:
        yield ("SET", ".headers.v", value)
        value["k"].append(3)
        yield ("SET", ".headers.when", (1, 2))

    Handler(handler).run(None, state, on_frame=lambda _: None, on_fly=lambda _: None)
    assert state.headers["v"] == {"k": [1, 2]}
    assert state.headers["when"] == [1, 2]


def test_p_abi_15_unserialisable_set_value_is_a_type_error() -> None:
    """P-ABI-15: a TypeError; P-ABI-19 (R3): the SerializationError kind of TypeError, thrown at the yield."""
    replies, state, _ = run_commands(
        ("SET", ".headers.bad", {"x": float("nan")}),
        ("SET", ".headers.obj", object()),
        ("SET", ".headers.text", "a\ud800"),
        ("SET", ".headers.big", [10**4301]),
        ("SET", ".headers.keys", {1: "a", "1": "b"}),
    )
    assert [type(r) for r in replies] == [SerializationError] * 5
    assert all(isinstance(r, TypeError) for r in replies)
    assert ".headers.bad" in str(replies[0]) and "lone surrogate" in str(replies[2])
    assert not {"bad", "obj", "text", "big", "keys"} & set(state.headers)


@pytest.mark.parametrize(
    ("path", "value"),
    [(".headers", "text"), (".headers", [1]), (".status", None)],
)
def test_headers_and_status_stay_objects(path: str, value: Any) -> None:
    replies, state, _ = run_commands(("SET", path, value))
    assert type(replies[0]) is ValueError
    assert state.headers["x-asya-flow"] == "demo"
    assert state.status["phase"] == "processing"


def test_set_whole_headers_and_status() -> None:
    # the layer's header stays as it was (P-HDR-5)
    _, state, _ = run_commands(
        ("SET", ".headers", {"x-asya-flow": "demo", "only": 1}), ("SET", ".status", {"deadline_at": None})
    )
    assert state.headers == {"x-asya-flow": "demo", "only": 1}
    assert state.status == {"deadline_at": None}
    assert state.deadline_at is None


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (".status.deadline_at", "tomorrow"),
        (".status.deadline_at", 1700000000),
        (".status.deadline_at.x", 1),
        (".status", {"deadline_at": "nope"}),
    ],
)
def test_p_abi_16_deadline_at_must_stay_a_timestamp(path: str, value: Any) -> None:
    replies, state, _ = run_commands(("SET", path, value))
    assert type(replies[0]) is ValueError
    assert state.deadline_at == DEADLINE


def test_p_abi_16_other_status_writes_are_visible_to_get_only() -> None:
    replies, state, _ = run_commands(("SET", ".status.note", "x"), ("GET", ".status.note"))
    assert replies == [None, "x"]
    assert state.deadline_at == DEADLINE


@pytest.mark.parametrize(
    "path",
    [
        ".",
        ".id",
        ".parent_id",
        ".route",
        ".route.prev",
        ".route.prev[0]",
        ".route.prev[0:0]",
        ".route.curr",
        '.["id"]',
        ".route.other",
        ".unknown",
        ".[0]",
    ],
)
def test_p_abi_13_read_only_paths_refuse_set_and_del(path: str) -> None:
    """Also P-ROUTE-6: a handler cannot change ``route.prev`` or ``route.curr`` (nor the route as a whole); only
    ``route.next`` is writable."""
    replies, state, _ = run_commands(("SET", path, "x"), ("DEL", path))
    assert [type(r) for r in replies] == [AbiProtocolError, AbiProtocolError]
    assert "read-only" in str(replies[0])
    assert state.to_dict() == make_state().to_dict()


# --- DEL --------------------------------------------------------------------------------------------------------------


def test_del_keys_and_indexes() -> None:
    replies, state, _ = run_commands(
        ("DEL", ".headers.nested.k"),
        ("DEL", '.headers["x.y"]'),
        ("DEL", ".headers.list[-1]"),
        ("DEL", ".route.next[0]"),
        ("DEL", ".status.deadline_at"),
    )
    assert replies == [None] * 5
    assert state.headers == {"x-asya-flow": "demo", "list": [10, 20], "nested": {}}
    assert state.next == ["final"]
    assert state.deadline_at is None


def test_del_route_next_leaves_empty_list_and_headers_empty_object() -> None:
    replies, state, _ = run_commands(
        ("DEL", ".route.next"), ("DEL", ".headers"), ("DEL", ".headers.x-asya-flow"), ("DEL", ".status")
    )
    assert type(replies[1]) is ValueError  # it would remove the layer's x-asya-flow (P-HDR-5)
    assert type(replies[2]) is ValueError
    assert state.next == []
    assert state.headers["x-asya-flow"] == "demo"
    assert state.status == {}


def test_del_headers_leaves_an_empty_object_without_layer_headers() -> None:
    replies, state, _ = run_commands(("SET", ".headers", {"x-asya-flow": "demo"}), ("DEL", ".headers"))
    assert type(replies[1]) is ValueError
    state = AbiState(id="t", headers={"mine": 1})
    state.delete(".headers")
    assert state.headers == {}


@pytest.mark.parametrize(
    ("path", "error"),
    [(".headers.missing", KeyError), (".headers.list[7]", IndexError), (".route.next[2]", IndexError)],
)
def test_p_abi_14_del_missing_raises(path: str, error: type[Exception]) -> None:
    assert type(reply_of(("DEL", path))) is error


def test_p_abi_14_del_with_a_slice_is_a_protocol_error() -> None:
    replies, state, _ = run_commands(("DEL", ".route.next[0:1]"), ("DEL", ".headers.list[:]"))
    assert [type(r) for r in replies] == [AbiProtocolError, AbiProtocolError]
    assert state.next == ["post", "final"]


# --- FLY --------------------------------------------------------------------------------------------------------------


def test_p_stat_15_fly_values_reach_on_fly_converted_in_order() -> None:
    flies: list[Any] = []

    def handler(payload: Any) -> Iterator[Any]:
        reply = yield ("FLY", {"token": "a"})
        yield ("FLY", ("b", {1}))
        yield ("FLY", None)
        yield {"reply": reply}

    frames: list[Frame] = []
    Handler(handler).run(None, make_state(), on_frame=frames.append, on_fly=flies.append)
    assert flies == [{"token": "a"}, ["b", [1]], None]
    assert frames[0].payload == {"reply": None}


@pytest.mark.parametrize(
    "value",
    [{"x": float("nan")}, "a\ud800b", {"k\udc00": 1}, 10**4301, {1: 2, "1": 3}],
    ids=["nan", "surrogate", "surrogate-key", "big-int", "colliding-keys"],
)
def test_p_abi_19_r3_unserialisable_fly_is_thrown_at_the_yield(value: Any) -> None:
    """P-ABI-19 (R3): a FLY value that cannot be encoded raises SerializationError at its yield (it was dropped with
    a WARNING, issue 25 defect 6); uncaught, it is the handler's error; nothing reaches on_fly."""
    flies: list[Any] = []

    def handler(payload: Any) -> Iterator[Any]:
        yield ("FLY", value)
        yield "never"

    frames: list[Frame] = []
    with pytest.raises(HandlerError, match="SerializationError: FLY value cannot be serialised") as info:
        Handler(handler).run(None, make_state(), on_frame=frames.append, on_fly=flies.append)
    assert isinstance(info.value.exc, SerializationError)
    assert frames == [] and flies == []


# --- malformed commands -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        (),
        ("GET",),
        ("GET", ".id", 1),
        ("SET", ".headers.a"),
        ("SET", ".headers.a", 1, 2),
        ("DEL",),
        ("DEL", ".headers.a", 1),
        ("FLY",),
        ("FLY", 1, 2),
        ("PUT", ".id"),
        ("get", ".id"),
        (1, ".id"),
        (None,),
    ],
)
def test_p_abi_14_unknown_verb_or_wrong_arity_is_a_protocol_error(command: tuple[Any, ...]) -> None:
    reply = reply_of(command)
    assert type(reply) is AbiProtocolError
    assert isinstance(reply, ValueError)


@pytest.mark.parametrize(
    "path",
    [
        5,
        None,
        "",
        "id",
        "headers.x",
        "..",
        ".a..b",
        ".a.",
        ".a[",
        ".a[x]",
        ".a[1:2:3]",
        ".a[1:2].b",
        ". a",
        ".a b",
        ".a.[0]",
        ".a['x']",
        '.a["x"',
        ".é",
    ],
)
def test_p_abi_14_malformed_path_is_a_protocol_error(path: Any) -> None:
    replies, _, _ = run_commands(("GET", path), ("SET", path, 1), ("DEL", path))
    assert [type(r) for r in replies] == [AbiProtocolError] * 3


def test_p_abi_14_errors_are_thrown_at_the_yield_and_the_generator_continues() -> None:
    frames: list[Frame] = []

    def handler(payload: Any) -> Iterator[Any]:
        try:
            yield ("GET", ".headers.absent")
        except KeyError:
            value = yield ("GET", ".headers.x-asya-flow")
            yield {"recovered": value}

    Handler(handler).run(None, make_state(), on_frame=frames.append, on_fly=lambda _: None)
    assert [f.payload for f in frames] == [{"recovered": "demo"}]


@pytest.mark.parametrize(
    ("command", "error"),
    [
        (("GET", ".headers.absent"), KeyError),
        (("BOOM", 1), AbiProtocolError),
        (("SET", ".route.next", ["Bad"]), ValueError),  # P-ABI-15: plain ValueError, not AbiProtocolError
    ],
)
def test_p_abi_14_uncaught_command_errors_are_handler_errors(command: tuple[Any, ...], error: type[Exception]) -> None:
    def handler(payload: Any) -> Iterator[Any]:
        yield command

    with pytest.raises(HandlerError) as info:
        Handler(handler).run(None, make_state(), on_frame=lambda _: None, on_fly=lambda _: None)
    assert type(info.value.exc) is error


# --- path grammar -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "segments"),
    [
        (".", ()),
        (".id", ("id",)),
        (".headers.x-asya-pause", ("headers", "x-asya-pause")),
        ('.headers["x.y"]', ("headers", "x.y")),
        ('.headers["quote \\" and \\u00e9"]', ("headers", 'quote " and é')),
        ('.["a b"].c', ("a b", "c")),
        (".route.next[0]", ("route", "next", 0)),
        (".route.next[-12]", ("route", "next", -12)),
        (".route.next[0:0]", ("route", "next", slice(0, 0))),
        (".route.next[-2:]", ("route", "next", slice(-2, None))),
        (".route.next[:3]", ("route", "next", slice(None, 3))),
        (".route.next[:]", ("route", "next", slice(None, None))),
        (".a[0][1].b_2", ("a", 0, 1, "b_2")),
        (".0", ("0",)),
    ],
)
def test_p_abi_17_path_grammar(path: str, segments: tuple[Any, ...]) -> None:
    assert parse_path(path) == segments


def test_p_abi_17_state_methods_share_the_command_rules() -> None:
    state = make_state()
    state.set(".route.next[0:0]", ["review"])
    state.delete(".headers.list[0]")
    assert state.get(".route.next") == ["review", "post", "final"]
    assert state.get(".headers.list") == [20, 30]
    with pytest.raises(AbiProtocolError):
        state.set(".route.curr", "x")
    with pytest.raises(AbiProtocolError):
        state.delete(".route.next[0:1]")


# --- P-ABI-15 (R3): crew names in a SET route -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x-sink", "x-sump", "x-deadline", "x-resume", "x-fanin-me", "x-merge"])
@pytest.mark.parametrize(("path", "wrap"), [(".route.next[0:0]", list), (".route.next", list), (".route.next[0]", str)])
def test_p_abi_15_r3_set_refuses_crew_names_in_route_next(name: str, path: str, wrap: Any) -> None:
    """P-ABI-15 (R3): x-sink, x-sump, x-deadline, x-resume and fan-in aggregators (any other ``x-`` name) are refused
    at the yield with ValueError naming the crew actor; route.next is unchanged."""
    value = [name] if wrap is list else name
    replies, state, _ = run_commands(("SET", path, value))
    assert type(replies[0]) is ValueError
    assert name in str(replies[0]) and "crew" in str(replies[0])
    assert state.next == ["post", "final"]


def test_p_abi_15_r3_set_may_route_to_x_pause() -> None:
    """P-ABI-15 (R3): a handler may pause dynamically."""
    replies, state, _ = run_commands(("SET", ".route.next[0:0]", ["x-pause"]))
    assert replies == [None]
    assert state.next == ["x-pause", "post", "final"]


def test_p_abi_15_r3_crew_already_in_the_route_is_not_refused() -> None:
    """P-ABI-15 (R3): only names a SET puts into route.next count; an aggregator the layer or manifest spliced in
    stays, and the handler may still insert actors before it."""
    # the route as layer-internal splicing leaves it (not a SET)
    state = AbiState(id="t", parent_id="", prev=[], curr="me", next=["x-fanin-me", "final"], headers={}, status={})
    state.set(".route.next[0:0]", ["post"])
    assert state.next == ["post", "x-fanin-me", "final"]
    with pytest.raises(ValueError, match="crew"):
        state.set(".route.next[0:0]", ["x-fanin-me"])
