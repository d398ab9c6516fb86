"""Fast paths of asya.serialize (PROTOCOL 3.5): plain JSON is copied or passed in one pass, everything else converts
and fails exactly as P-ABI-19/P-ABI-20 say; and ``Handler.run(copy_result=False)`` built on ``as_jsonable``."""

from __future__ import annotations

import asyncio
import enum
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from asya.abi import AbiState, Frame, Handler, HandlerError
from asya.exceptions import SerializationError
from asya.serialize import PLAIN_MAX_DEPTH, as_jsonable, to_jsonable

pytestmark = pytest.mark.unit


class Level(enum.IntEnum):
    HIGH = 3


class Tag(str):
    pass


def _plain() -> dict[str, Any]:
    return {"s": "x", "i": 1, "f": 0.5, "b": True, "n": None, "l": [1, "a", [2.5, {"k": False}]], "d": {"e": {}}}


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def _containers(value: Any) -> list[int]:
    """ids of every dict and list inside ``value``, ``value`` included."""
    found: list[int] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found.append(id(item))
            stack.extend(item.values())
        elif isinstance(item, list):
            found.append(id(item))
            stack.extend(item)
    return found


# Values that are not plain JSON, with what P-ABI-19 makes of them: the fast paths must hand them to the full rules.
NOT_PLAIN = [
    ({"a": [1, {"when": datetime(2026, 1, 2, tzinfo=UTC)}]}, {"a": [1, {"when": "2026-01-02T00:00:00+00:00"}]}),
    ({"t": (1, 2)}, {"t": [1, 2]}),
    ({7: "int key", 2.5: "float key", False: "bool key"}, {"7": "int key", "2.5": "float key", "false": "bool key"}),
    ({"level": Level.HIGH}, {"level": 3}),
    ({"tag": Tag("v")}, {"tag": "v"}),
    (OrderedDict(a=[1]), {"a": [1]}),
    ([1, 2, {3}], [1, 2, [3]]),
    ({"deep": [{"x": b"\x00"}]}, {"deep": [{"x": "AA=="}]}),
]


def test_p_abi_19_to_jsonable_fast_path_copies_every_container() -> None:
    value = _plain()
    out = to_jsonable(value)
    assert out == value
    assert not set(_containers(out)) & set(_containers(value))


@pytest.mark.parametrize(("value", "expected"), NOT_PLAIN)
def test_p_abi_19_to_jsonable_converts_values_the_fast_path_leaves(value: Any, expected: Any) -> None:
    out = to_jsonable(value)
    assert out == expected
    assert type(out) is type(expected)
    assert not set(_containers(out)) & set(_containers(value))


def test_p_abi_19_as_jsonable_returns_plain_json_itself() -> None:
    value = _plain()
    assert as_jsonable(value) is value
    for scalar in ("s", 0, 1.5, False, None):
        assert as_jsonable(scalar) is scalar


@pytest.mark.parametrize(("value", "expected"), NOT_PLAIN)
def test_p_abi_19_as_jsonable_converts_other_values_into_a_copy(value: Any, expected: Any) -> None:
    out = as_jsonable(value)
    assert out == expected
    assert type(out) is type(expected)
    assert not set(_containers(out)) & set(_containers(value))


@pytest.mark.parametrize("convert", [to_jsonable, as_jsonable])
def test_p_abi_19_scalar_subclasses_inside_plain_values_become_exact_scalars(convert: Callable[[Any], Any]) -> None:
    out = convert({"plain": [1, "a"], "level": Level.HIGH, "tag": Tag("v")})
    assert out == {"plain": [1, "a"], "level": 3, "tag": "v"}
    assert (type(out["level"]), type(out["tag"])) == (int, str)


@pytest.mark.parametrize("convert", [to_jsonable, as_jsonable])
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_p_abi_20_fast_paths_refuse_non_finite_floats_with_the_path(convert: Callable[[Any], Any], bad: float) -> None:
    with pytest.raises(SerializationError, match="not allowed in JSON") as info:
        convert({"items": [1, {"when": bad}]})
    assert ".items[1].when" in str(info.value)


@pytest.mark.parametrize("convert", [to_jsonable, as_jsonable])
def test_p_abi_20_fast_paths_refuse_other_types_and_keys(convert: Callable[[Any], Any]) -> None:
    with pytest.raises(SerializationError, match=r"type object is not serialisable at \.a\[0\]$"):
        convert({"a": [object()]})
    with pytest.raises(SerializationError, match="object key of type NoneType"):
        convert({"ok": 1, None: 2})


@pytest.mark.parametrize("convert", [to_jsonable, as_jsonable])
def test_p_abi_20_fast_paths_refuse_cycles(convert: Callable[[Any], Any]) -> None:
    loop: dict[str, Any] = {"a": 1}
    loop["self"] = loop
    with pytest.raises(SerializationError, match="cycle"):
        convert(loop)


@pytest.mark.parametrize("convert", [to_jsonable, as_jsonable])
def test_p_abi_20_nesting_beyond_the_fast_path_is_judged_by_the_full_rules(convert: Callable[[Any], Any]) -> None:
    """Past PLAIN_MAX_DEPTH the fast paths step aside: moderate nesting converts, excessive nesting still fails."""
    moderate = _nested(PLAIN_MAX_DEPTH + 5)
    out = convert(moderate)
    assert out == moderate
    assert out is not moderate
    with pytest.raises(SerializationError, match="nested too deeply"):
        convert(_nested(100_000))


@pytest.mark.parametrize("convert", [to_jsonable, as_jsonable])
def test_p_abi_19_a_list_of_strings_is_judged_like_any_other_list(convert: Callable[[Any], Any]) -> None:
    """A list of strings (checked inline by the plain pass) still fails on a lone surrogate with its path, and one
    holding anything else still converts it."""
    with pytest.raises(SerializationError, match=r"lone surrogate \(\\ud800\) cannot be UTF-8 at \.tags\[1\]$"):
        convert({"tags": ["a", "b\ud800"]})
    assert convert({"tags": ["a", Tag("b"), "c"]}) == {"tags": ["a", "b", "c"]}
    assert convert({"tags": ["a", Level.HIGH]}) == {"tags": ["a", 3]}
    plain = {"tags": ["a", "é", ""]}
    assert (convert(plain) is plain) == (convert is as_jsonable)


@pytest.mark.parametrize("convert", [to_jsonable, as_jsonable])
def test_p_abi_19_a_list_of_strings_at_the_fast_path_depth_takes_the_full_rules(convert: Callable[[Any], Any]) -> None:
    value: Any = ["a", "b"]
    for _ in range(PLAIN_MAX_DEPTH - 1):
        value = [value]
    assert convert(value) == value
    deeper = [value]
    out = convert(deeper)
    assert out == deeper and out is not deeper  # past the fast path's depth: the full conversion, a copy


# --- Handler.run(copy_result=...) -------------------------------------------------------------------------------------


def _state() -> AbiState:
    return AbiState(id="task-1", curr="me", next=["post"], headers={"x-asya-flow": "demo"})


@pytest.fixture
def run_handler() -> Iterator[Callable[..., list[Frame]]]:
    handlers: list[Handler] = []

    def run(target: Callable[[Any], Any], payload: Any, *, copy_result: bool) -> list[Frame]:
        handler = Handler(target)
        handlers.append(handler)
        frames: list[Frame] = []
        handler.run(payload, _state(), on_frame=frames.append, on_fly=lambda _v: None, copy_result=copy_result)
        return frames

    yield run
    for handler in handlers:
        handler.close()


def test_p_abi_6_copy_result_false_passes_a_plain_return_value_uncopied(run_handler: Any) -> None:
    payload = _plain()
    frames = run_handler(lambda p: p, payload, copy_result=False)
    assert [f.payload for f in frames] == [_plain()]
    assert frames[0].payload is payload


def test_p_abi_6_copy_result_false_async_return_value(run_handler: Any) -> None:
    async def handler(p: Any) -> Any:
        await asyncio.sleep(0)
        return p

    payload = _plain()
    assert run_handler(handler, payload, copy_result=False)[0].payload is payload


def test_p_abi_19_copy_result_false_still_converts_a_non_plain_return_value(run_handler: Any) -> None:
    frames = run_handler(lambda p: {**p, "at": datetime(2026, 1, 2, tzinfo=UTC)}, {"a": 1}, copy_result=False)
    assert [f.payload for f in frames] == [{"a": 1, "at": "2026-01-02T00:00:00+00:00"}]


def test_p_abi_19_copy_result_false_still_refuses_an_unserialisable_return_value(run_handler: Any) -> None:
    """P-ABI-19 (R3): the handler's error, a SerializationError, on the no-copy path too."""
    for value in ({"x": float("nan")}, {"x": "a\ud800"}, {"x": 10**4301}):
        with pytest.raises(HandlerError, match=r"SerializationError: frame 0 cannot be serialised: .*\.x") as info:
            run_handler(lambda p, value=value: value, None, copy_result=False)
        assert isinstance(info.value.exc, SerializationError)


def test_p_abi_9_copy_result_false_generator_frames_are_still_copies(run_handler: Any) -> None:
    """The generator keeps running after a yield, so its frames never share its objects."""
    shared: dict[str, Any] = {"k": [1]}

    def handler(p: Any) -> Iterator[Any]:
        yield shared
        shared["k"].append(2)
        yield shared

    frames = run_handler(handler, None, copy_result=False)
    assert [f.payload for f in frames] == [{"k": [1]}, {"k": [1, 2]}]


def test_p_abi_9_copy_result_false_async_generator_frames_are_still_copies(run_handler: Any) -> None:
    shared: dict[str, Any] = {"k": [1]}

    async def handler(p: Any) -> AsyncIterator[Any]:
        yield shared
        shared["k"].append(2)

    frames = run_handler(handler, None, copy_result=False)
    assert [f.payload for f in frames] == [{"k": [1]}]


def test_p_abi_7_copy_result_true_is_the_default_and_copies(run_handler: Any) -> None:
    payload = _plain()
    frames = run_handler(lambda p: p, payload, copy_result=True)
    assert frames[0].payload == payload
    assert frames[0].payload is not payload
