"""Conversion of handler values to JSON-ready Python values (P-ABI-19, P-ABI-20).

``to_jsonable(value)`` returns a new value made only of ``dict`` (``str`` keys), ``list``, ``str``, ``int``, finite
``float``, ``bool`` and ``None``; containers are always rebuilt, so the result never aliases the input. Conversions
(P-ABI-19), applied recursively:

- pydantic v2 models by ``model_dump(mode="json")``, v1 models by ``.dict()`` (pydantic is never imported here: a model
  is recognised by its ``BaseModel`` base class living in ``pydantic.main`` or ``pydantic.v1.main``);
- dataclass instances as objects of their fields (the result of ``dataclasses.asdict``);
- named tuples as objects via ``_asdict()``, other tuples as arrays;
- ``datetime``, ``date``, ``time`` by ``isoformat()``; ``UUID`` and ``Decimal`` as strings;
- ``bytes``/``bytearray`` as standard padded base64; ``set``/``frozenset`` as arrays, sorted when the elements are
  mutually orderable; ``Enum`` members as their value;
- object keys that are ``int``, ``float`` or ``bool`` as their JSON text (``1``, ``1.5``, ``true``).

``NaN``, ``Infinity`` and every other type raise :class:`asya.exceptions.SerializationError` naming the offending type
and its path inside the value in ABI path syntax (``.items[3].when``) (P-ABI-20). So does what JSON cannot carry as
UTF-8 (P-ABI-19): a string (value or key) holding a lone surrogate, an integer with more digits than Python converts
to text (``sys.get_int_max_str_digits()`` as read at import, 4,300 by default), and two keys of one object that become
the same JSON key (``1`` and ``"1"``). A value these functions return therefore always encodes (``asya.envelope.dumps``
then ``.encode("utf-8")``): the check rides on the pass they make anyway, and no value is encoded twice.

``as_jsonable(value)`` is ``to_jsonable`` without the copy when it is not needed: a value that is already plain JSON
(exact ``dict`` with ``str`` keys, ``list``, ``str``, ``int``, finite ``float``, ``bool``, ``None``, nested at most
:data:`PLAIN_MAX_DEPTH` containers deep) is validated in one pass and returned as it is (the same object); any other
value gets ``to_jsonable(value)``. Use it only where nobody can mutate the value before it is encoded (a function
handler's return value); frames of a running generator, FLY and SET values need the copy.

Both take a fast path for plain JSON (one pass with exact-type checks) and fall back to the full conversion at the
first value that is not plain, so conversions, errors and the depth at which nesting is refused are those of the
conversion rules above whatever the path.

``copy_json(value)`` is a fast deep copy for values that are already JSON-ready (parsed JSON, ``to_jsonable`` output).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import re
import sys
import uuid
from datetime import date, datetime, time
from decimal import Decimal
from enum import Enum
from typing import Any, Final

from asya.exceptions import SerializationError

__all__ = ["PLAIN_MAX_DEPTH", "as_jsonable", "copy_json", "render_path", "to_jsonable"]

_PYDANTIC_V2_MODULE: Final = "pydantic.main"
_PYDANTIC_V1_MODULE: Final = "pydantic.v1.main"
#: Exact types returned as they are (float is not: NaN and Infinity are checked).
_SCALARS: Final = frozenset({str, int, bool, type(None)})
_CONTAINERS: Final = frozenset({dict, list})
_isfinite: Final = math.isfinite
_NAME_RE: Final = re.compile(r"[A-Za-z0-9_-]+")
#: Containers nested deeper than this leave the fast path, so the full conversion decides how deep is too deep.
PLAIN_MAX_DEPTH: Final = 100
#: UTF-8 cannot encode a lone surrogate (P-ABI-19); only non-ASCII text is searched.
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
_has_surrogate: Final = _SURROGATE_RE.search
#: Integers strictly between -_INT_BOUND and _INT_BOUND have at most the digits ``str(int)`` accepts (0: no limit).
_INT_BOUND: Final = 10 ** sys.get_int_max_str_digits() if sys.get_int_max_str_digits() else math.inf


class _NotPlainError(Exception):
    """Internal: the fast path met a value that is not plain JSON; the full conversion takes over."""


class _UnserializableError(Exception):
    """Internal: carries the reason and the path (innermost segment first) up to ``to_jsonable``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.path: list[str | int] = []


def to_jsonable(value: Any) -> Any:
    """Convert ``value`` per P-ABI-19 into a new value; raise :class:`SerializationError` per P-ABI-20."""
    try:
        return _plain_copy(value, 0)
    except (_NotPlainError, RecursionError):
        pass  # the full conversion converts what is not plain and reports what cannot be converted
    try:
        return _convert(value)
    except _UnserializableError as exc:
        raise SerializationError(f"{exc.reason} at {render_path(reversed(exc.path))}") from None
    except RecursionError:
        raise SerializationError("value is nested too deeply or contains a reference cycle") from None


def as_jsonable(value: Any) -> Any:
    """``value`` itself when it is plain JSON (see the module docstring), else ``to_jsonable(value)``."""
    try:
        _check_plain(value, 0)
    except (_NotPlainError, RecursionError):
        pass
    else:
        return value
    return to_jsonable(value)


def copy_json(value: Any) -> Any:
    """Deep copy of a JSON-ready value: containers are rebuilt, scalars (immutable) are shared."""
    kind = type(value)
    if kind is dict:
        return {key: copy_json(item) if type(item) in _CONTAINERS else item for key, item in value.items()}
    if kind is list:
        return [copy_json(item) if type(item) in _CONTAINERS else item for item in value]
    return value


def render_path(segments: Any) -> str:
    """ABI path syntax (P-ABI-17) for a sequence of keys and indexes; ``.`` for the empty path."""
    parts: list[str] = []
    for seg in segments:
        if isinstance(seg, int):
            parts.append(f"[{seg}]")
        elif _NAME_RE.fullmatch(seg):
            parts.append(f".{seg}")
        else:
            parts.append("[" + json.dumps(seg, ensure_ascii=False) + "]")
    text = "".join(parts)
    if not text:
        return "."
    return text if text.startswith(".") else "." + text


def _plain_copy(value: Any, depth: int) -> Any:
    """Deep copy of a plain JSON value; :class:`_NotPlainError` at the first value that is not plain."""
    kind = type(value)
    if kind is dict:
        if depth >= PLAIN_MAX_DEPTH:
            raise _NotPlainError
        out: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str or (not key.isascii() and _has_surrogate(key)):
                raise _NotPlainError
            item_kind = type(item)
            if item_kind is str:  # leaves inlined: most values of a payload are leaves
                if not item.isascii() and _has_surrogate(item):
                    raise _NotPlainError
                out[key] = item
            elif item_kind is int:
                if not -_INT_BOUND < item < _INT_BOUND:
                    raise _NotPlainError
                out[key] = item
            elif item_kind in _SCALARS:
                out[key] = item
            elif item_kind is float:
                if not _isfinite(item):
                    raise _NotPlainError
                out[key] = item
            else:
                out[key] = _plain_copy(item, depth + 1)
        return out
    if kind is list:
        if depth >= PLAIN_MAX_DEPTH:
            raise _NotPlainError
        items: list[Any] = []
        append = items.append
        for item in value:
            item_kind = type(item)
            if item_kind is str:
                if not item.isascii() and _has_surrogate(item):
                    raise _NotPlainError
                append(item)
            elif item_kind is int:
                if not -_INT_BOUND < item < _INT_BOUND:
                    raise _NotPlainError
                append(item)
            elif item_kind in _SCALARS:
                append(item)
            elif item_kind is float:
                if not _isfinite(item):
                    raise _NotPlainError
                append(item)
            else:
                append(_plain_copy(item, depth + 1))
        return items
    if kind in _SCALARS or (kind is float and _isfinite(value)):
        _check_plain_leaf(value, kind)
        return value
    raise _NotPlainError


def _check_plain_leaf(value: Any, kind: type) -> None:
    if kind is str:
        if not value.isascii() and _has_surrogate(value):
            raise _NotPlainError
    elif kind is int and not -_INT_BOUND < value < _INT_BOUND:
        raise _NotPlainError


def _check_plain(value: Any, depth: int) -> None:
    """:class:`_NotPlainError` unless ``value`` is plain JSON; the same checks as :func:`_plain_copy`, no copy."""
    kind = type(value)
    items: Any
    if kind is dict:
        if depth >= PLAIN_MAX_DEPTH:
            raise _NotPlainError
        # keys first, then values: two plain loops are ~5% faster than unpacking items(); unlike _plain_copy, nothing
        # here needs a key and its value together
        for key in value:
            if type(key) is not str or (not key.isascii() and _has_surrogate(key)):
                raise _NotPlainError
        items = value.values()
    elif kind is list:
        if depth >= PLAIN_MAX_DEPTH:
            raise _NotPlainError
        items = value
    else:
        if kind is float:
            if not _isfinite(value):
                raise _NotPlainError
        elif kind not in _SCALARS:
            raise _NotPlainError
        _check_plain_leaf(value, kind)
        return
    for item in items:
        item_kind = type(item)
        if item_kind is str:
            if item.isascii() or not _has_surrogate(item):
                continue
            raise _NotPlainError
        if item_kind is int:
            if -_INT_BOUND < item < _INT_BOUND:
                continue
            raise _NotPlainError
        if item_kind is bool or item is None:
            continue
        if item_kind is float:
            if _isfinite(item):
                continue
            raise _NotPlainError
        if item_kind is list and depth + 1 < PLAIN_MAX_DEPTH:
            # a list of plain strings (tags, names, ids) is checked here, without a call per list; anything else in
            # it (or a string that fails) goes to the full check below, which decides
            for sub in item:
                if type(sub) is not str or not (sub.isascii() or not _has_surrogate(sub)):
                    break
            else:
                continue
        _check_plain(item, depth + 1)


def _convert(value: Any) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return _leaf(value, kind)
    if kind is float:
        if not math.isfinite(value):
            raise _UnserializableError(f"float {value!r} is not allowed in JSON")
        return value
    if kind is dict:
        return _convert_dict(value)
    if kind is list:
        return _convert_items(value)
    return _convert_other(value)


def _convert_dict(value: dict[Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        name = _convert_key(key)
        if name in out:  # P-ABI-19: JSON would keep one of the two silently
            raise _UnserializableError(f"object keys {key!r} and {name!r} are the same JSON key {name!r}")
        if type(item) in _SCALARS:  # inlined leaf case: most values of a payload are leaves
            try:
                out[name] = _leaf(item, type(item))
            except _UnserializableError as exc:
                exc.path.append(name)
                raise
            continue
        try:
            out[name] = _convert(item)
        except _UnserializableError as exc:
            exc.path.append(name)
            raise
    return out


def _convert_items(items: Any) -> list[Any]:
    out: list[Any] = []
    for index, item in enumerate(items):
        if type(item) in _SCALARS:
            try:
                out.append(_leaf(item, type(item)))
            except _UnserializableError as exc:
                exc.path.append(index)
                raise
            continue
        try:
            out.append(_convert(item))
        except _UnserializableError as exc:
            exc.path.append(index)
            raise
    return out


def _leaf(value: Any, kind: type) -> Any:
    """A ``str``/``int``/``bool``/``None`` of exact type, checked for what UTF-8 JSON cannot carry (P-ABI-19)."""
    if kind is str:
        if not value.isascii() and _has_surrogate(value):
            raise _UnserializableError(f"string with a lone surrogate ({_surrogate_of(value)}) cannot be UTF-8")
    elif kind is int and not -_INT_BOUND < value < _INT_BOUND:
        raise _UnserializableError(
            f"integer of {value.bit_length()} bits has more than {sys.get_int_max_str_digits()} digits"
        )
    return value


def _surrogate_of(text: str) -> str:
    found = _has_surrogate(text)
    return f"\\u{ord(found.group()):04x}" if found else "?"


def _convert_key(key: Any) -> str:
    if type(key) is str:
        if not key.isascii() and _has_surrogate(key):
            raise _UnserializableError(f"object key with a lone surrogate ({_surrogate_of(key)}) cannot be UTF-8")
        return key
    if isinstance(key, str):
        return _convert_key(str.__str__(key))
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return int.__repr__(_leaf(int(key), int))
    if isinstance(key, float):
        if math.isnan(key) or math.isinf(key):
            raise _UnserializableError(f"object key {key!r} is not allowed in JSON")
        return float.__repr__(key)
    raise _UnserializableError(f"object key of type {_type_name(key)} ({key!r}) is not serialisable")


def _convert_other(value: Any) -> Any:
    # Order matters: Enum before the scalar subclasses (IntEnum, StrEnum), datetime before date.
    if isinstance(value, Enum):
        return _convert(value.value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return _leaf(str.__str__(value), str)
    if isinstance(value, int):
        return _leaf(int(value), int)
    if isinstance(value, float):
        return _convert(float(value))
    if isinstance(value, dict):
        return _convert_dict(value)
    if isinstance(value, list):
        return _convert_items(value)
    if isinstance(value, tuple):
        if hasattr(value, "_asdict") and hasattr(value, "_fields"):
            return _convert_dict(value._asdict())
        return _convert_items(value)
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, (uuid.UUID, Decimal)):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (set, frozenset)):
        return _convert_items(_maybe_sorted(value))
    model = _pydantic_major(value)
    if model is not None:
        return _convert_model(value, model)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _convert_dict({field.name: getattr(value, field.name) for field in dataclasses.fields(value)})
    raise _UnserializableError(f"value of type {_type_name(value)} is not serialisable")


def _maybe_sorted(values: set[Any] | frozenset[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return list(values)


def _pydantic_major(value: Any) -> int | None:
    """2 or 1 for a pydantic model instance, else ``None``; duck-typed so pydantic is never imported here."""
    for klass in type(value).__mro__:
        if klass.__name__ != "BaseModel":
            continue
        if klass.__module__ == _PYDANTIC_V2_MODULE:
            # pydantic 1.x also defines pydantic.main.BaseModel, without model_dump
            return 2 if hasattr(klass, "model_dump") else 1
        if klass.__module__ == _PYDANTIC_V1_MODULE:
            return 1
    return None


def _convert_model(value: Any, major: int) -> Any:
    try:
        dumped = value.model_dump(mode="json") if major == 2 else value.dict()
    except Exception as exc:
        raise _UnserializableError(
            f"pydantic model {_type_name(value)} cannot be dumped: {type(exc).__name__}: {exc}"
        ) from None
    return _convert(dumped)


def _type_name(value: Any) -> str:
    kind = type(value)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"
