"""to_jsonable (PROTOCOL 3.5): every conversion of P-ABI-19 and the failures of P-ABI-20.

What a fresh interpreter imports for it (no pydantic for plain values) needs a child process: that check is in
``tests/functional/test_serialize_imports.py``."""

from __future__ import annotations

import dataclasses
import enum
import json
import uuid
from collections import OrderedDict, namedtuple
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from pathlib import Path
from typing import Any, NamedTuple

import pydantic
import pytest
from pydantic import v1 as pydantic_v1

from asya.envelope import dumps
from asya.exceptions import SerializationError
from asya.serialize import as_jsonable, copy_json, render_path, to_jsonable

pytestmark = pytest.mark.unit


class Color(enum.Enum):
    RED = "red"
    PAIR = (1, 2)


class Level(enum.IntEnum):
    HIGH = 3


class Mode(enum.StrEnum):
    FAST = "fast"


class Point(NamedTuple):
    x: int
    y: int


LegacyPoint = namedtuple("LegacyPoint", "x y")


@dataclasses.dataclass
class Inner:
    when: datetime
    tags: set[str]


@dataclasses.dataclass(frozen=True)
class Outer:
    name: str
    inner: Inner
    point: Point


class ModelV2(pydantic.BaseModel):
    id: uuid.UUID
    at: datetime
    amount: Decimal


class ModelV1(pydantic_v1.BaseModel):
    name: str
    at: datetime


@pytest.mark.parametrize(
    "value",
    ["text", "", 0, -7, 10**30, 1.5, -0.0, True, False, None, [], {}, [1, "a", None, [2.5]], {"a": {"b": [True]}}],
)
def test_p_abi_19_json_values_pass_through(value: Any) -> None:
    assert to_jsonable(value) == value
    assert json.loads(json.dumps(to_jsonable(value))) == value


def test_p_abi_19_containers_are_rebuilt_never_aliased() -> None:
    inner = {"k": [1, 2]}
    value = {"outer": inner, "items": [inner]}
    out = to_jsonable(value)
    inner["k"].append(3)
    assert out == {"outer": {"k": [1, 2]}, "items": [{"k": [1, 2]}]}
    assert out["outer"] is not out["items"][0]


def test_p_abi_19_pydantic_v2_model_by_model_dump_json_mode() -> None:
    model = ModelV2(
        id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        at=datetime(2026, 3, 1, 10, 0, tzinfo=UTC),
        amount=Decimal("1.50"),
    )
    assert to_jsonable({"m": model}) == {
        "m": {"id": "12345678-1234-5678-1234-567812345678", "at": "2026-03-01T10:00:00Z", "amount": "1.50"}
    }


def test_p_abi_19_pydantic_v1_model_by_dict_then_converted() -> None:
    model = ModelV1(name="n", at=datetime(2026, 3, 1, 10, 0, tzinfo=UTC))
    assert to_jsonable(model) == {"name": "n", "at": "2026-03-01T10:00:00+00:00"}


def test_p_abi_19_dataclasses_as_objects_recursively() -> None:
    value = Outer(
        name="o",
        inner=Inner(when=datetime(2026, 1, 2, 3, 4, 5), tags={"b", "a"}),
        point=Point(1, 2),
    )
    assert to_jsonable(value) == {
        "name": "o",
        "inner": {"when": "2026-01-02T03:04:05", "tags": ["a", "b"]},
        "point": {"x": 1, "y": 2},
    }


def test_p_abi_19_dataclass_class_itself_is_not_an_instance() -> None:
    with pytest.raises(SerializationError, match="type"):
        to_jsonable(Inner)


def test_p_abi_19_named_tuples_as_objects_other_tuples_as_arrays() -> None:
    assert to_jsonable(Point(1, 2)) == {"x": 1, "y": 2}
    assert to_jsonable(LegacyPoint(x="a", y=[1])) == {"x": "a", "y": [1]}
    assert to_jsonable((1, ("a", None))) == [1, ["a", None]]


def test_p_abi_19_datetime_date_time_isoformat() -> None:
    tz = timezone(timedelta(hours=2))
    assert to_jsonable(datetime(2026, 3, 1, 10, 0, 0, 500, tzinfo=tz)) == "2026-03-01T10:00:00.000500+02:00"
    assert to_jsonable(date(2026, 3, 1)) == "2026-03-01"
    assert to_jsonable(time(10, 30)) == "10:30:00"


def test_p_abi_19_uuid_and_decimal_as_strings() -> None:
    value = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert to_jsonable([value, Decimal("3.140")]) == ["12345678-1234-5678-1234-567812345678", "3.140"]


def test_p_abi_19_bytes_as_padded_standard_base64() -> None:
    assert to_jsonable(b"\xfb\xff") == "+/8="
    assert to_jsonable(bytearray(b"a")) == "YQ=="
    assert to_jsonable(b"") == ""


def test_p_abi_19_sets_sorted_when_orderable() -> None:
    assert to_jsonable({3, 1, 2}) == [1, 2, 3]
    assert to_jsonable(frozenset({"b", "a"})) == ["a", "b"]
    assert to_jsonable({date(2026, 1, 2), date(2025, 1, 1)}) == ["2025-01-01", "2026-01-02"]


def test_p_abi_19_sets_of_unorderable_elements_keep_every_element() -> None:
    out = to_jsonable({1, "a", None})
    assert isinstance(out, list)
    assert sorted(out, key=repr) == sorted([1, "a", None], key=repr)


def test_p_abi_19_enum_members_as_their_value() -> None:
    assert to_jsonable([Color.RED, Color.PAIR, Level.HIGH, Mode.FAST]) == ["red", [1, 2], 3, "fast"]
    out = to_jsonable({"level": Level.HIGH})
    assert type(out["level"]) is int


def test_p_abi_19_int_float_bool_keys_as_json_text() -> None:
    out = to_jsonable({10: "a", 2.5: "b", -1e20: "x", True: "c", False: "d", "s": "e", Mode.FAST: "f", Level.HIGH: "g"})
    assert out == {"10": "a", "2.5": "b", "-1e+20": "x", "true": "c", "false": "d", "s": "e", "fast": "f", "3": "g"}
    assert all(type(key) is str for key in out)
    # the same key text json.dumps writes for numeric keys
    assert json.dumps(to_jsonable({2.5: 1, -1e20: 2, True: 3})) == json.dumps({2.5: 1, -1e20: 2, True: 3})


def test_p_abi_19_scalar_subclasses_become_plain_scalars() -> None:
    class Tag(str):
        def __str__(self) -> str:
            return "overridden"

    out = to_jsonable({"tag": Tag("plain"), "od": OrderedDict(a=1)})
    assert out == {"tag": "plain", "od": {"a": 1}}
    assert type(out["tag"]) is str
    assert type(out["od"]) is dict


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_p_abi_20_nan_and_infinity_are_refused(bad: float) -> None:
    with pytest.raises(SerializationError, match="not allowed in JSON"):
        to_jsonable(bad)


def test_p_abi_20_error_names_the_path_of_the_offending_value() -> None:
    with pytest.raises(SerializationError) as info:
        to_jsonable({"items": [1, {"when": float("nan")}]})
    assert ".items[1].when" in str(info.value)


def test_p_abi_20_error_names_the_type_and_bracket_keys() -> None:
    with pytest.raises(SerializationError) as info:
        to_jsonable({"a.b": [object()]})
    message = str(info.value)
    assert "object" in message
    assert '.["a.b"][0]' in message


@pytest.mark.parametrize(
    ("bad", "needle"),
    [
        (complex(1, 2), "complex"),
        (memoryview(b"x"), "memoryview"),
        ({None: 1}, "object key of type NoneType"),
        ({(1, 2): 1}, "object key of type tuple"),
        ({float("nan"): 1}, "object key nan"),
        (timedelta(seconds=1), "datetime.timedelta"),
        (Path("/tmp"), "PosixPath"),
        (iter([1]), "list_iterator"),
    ],
)
def test_p_abi_20_other_types_are_unserialisable(bad: Any, needle: str) -> None:
    with pytest.raises(SerializationError, match=needle):
        to_jsonable(bad)


def test_p_abi_20_serialization_error_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        to_jsonable(object())


def test_p_abi_20_cycles_are_refused() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(SerializationError, match="cycle"):
        to_jsonable(loop)


def test_p_abi_20_failing_pydantic_dump_is_a_serialization_error() -> None:
    class Model(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(arbitrary_types_allowed=True)
        thing: object

    with pytest.raises(SerializationError, match=r"pydantic model .*Model cannot be dumped"):
        to_jsonable(Model(thing=object()))


def test_copy_json_rebuilds_containers() -> None:
    value = {"a": [1, {"b": "c"}], "d": None}
    copied = copy_json(value)
    assert copied == value
    value["a"][1]["b"] = "changed"  # type: ignore[index]
    assert copied["a"][1]["b"] == "c"


@pytest.mark.parametrize(
    ("segments", "expected"),
    [([], "."), (["a", 0, "b-c"], ".a[0].b-c"), ([0], ".[0]"), (["x.y"], '.["x.y"]'), (["a", "é"], '.a["é"]')],
)
def test_render_path_uses_abi_path_syntax(segments: list[str | int], expected: str) -> None:
    assert render_path(segments) == expected


# --- P-ABI-19 (R3): what UTF-8 JSON cannot carry ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"x": 10**5000}, r"integer .* more than 4300 digits at \.x"),
        ({"x": -(10**4300)}, r"more than 4300 digits at \.x"),
        ({"x": "a\ud800b"}, r"lone surrogate \(\\ud800\) .* at \.x"),
        ({"x": ["ok", "\udfff"]}, r"lone surrogate .* at \.x\[1\]"),
        ({"k\ud800": 1}, r"object key with a lone surrogate"),
        ({1: "a", "1": "b"}, r"object keys .* same JSON key '1'"),
        ({"n": {True: 1, "true": 2}}, r"same JSON key 'true' at \.n"),
        ("a\ud800", r"lone surrogate .* at \.$"),
        ((10**4301,), r"digits at \.\[0\]"),
        ({10**4301: 1}, r"digits"),
    ],
    ids=[
        "big-int",
        "big-negative",
        "surrogate",
        "surrogate-in-list",
        "surrogate-key",
        "colliding-keys",
        "colliding-bool-key",
        "bare-surrogate",
        "big-int-in-tuple",
        "big-int-key",
    ],
)
def test_p_abi_19_r3_unencodable_values_raise(value: Any, message: str) -> None:
    """P-ABI-19 (R3): a lone surrogate (value or key), an integer over Python's digit limit and colliding keys raise
    SerializationError naming the path, on every entry point (fast path, full conversion, no-copy check)."""
    for convert in (to_jsonable, as_jsonable):
        with pytest.raises(SerializationError, match=message):
            convert(value)


def test_p_abi_19_r3_what_converts_always_encodes() -> None:
    """P-ABI-19 (R3): the bound is exact: the largest integer with 4300 digits and non-ASCII text pass and encode."""
    value = {"big": 10**4300 - 1, "neg": -(10**4300 - 1), "text": "é😀\u2028", "k\u00e9": [1, "ü"]}
    for convert in (to_jsonable, as_jsonable):
        assert dumps(convert(value)).encode("utf-8")
