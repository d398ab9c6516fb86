"""Paths into the ABI context (P-ABI-17, P-ABI-18) and the three primitive operations on them.

Grammar::

    path    = "." / "." first *seg
    first   = name / bracket
    seg     = "." name / bracket
    name    = 1*( ALPHA / DIGIT / "_" / "-" )
    bracket = "[" ( json-string / int / slice ) "]"
    int     = ["-"] 1*DIGIT
    slice   = [int] ":" [int]

A parsed path is a tuple of segments: ``str`` (an object key, from a name or a bracketed JSON string), ``int`` (a list
index, negative counts from the end) or ``slice`` (only as the last segment, P-ABI-18). ``.`` alone is the empty tuple.
Parsing is cached: handlers use a handful of constant paths.

Errors: a non-string or malformed path raises :class:`AbiProtocolError`; a missing key ``KeyError``; an index out of
range ``IndexError``; a key applied to a non-object, or an index or slice applied to a non-array, ``TypeError``
(chosen); a slice assignment whose value is not an array ``TypeError``. Every message names the path.
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from typing import Any, Final

from asya.exceptions import AbiProtocolError

__all__ = ["Segment", "delete_value", "get_value", "parse_path", "set_value"]

Segment = str | int | slice

_NAME_RE: Final = re.compile(r"[A-Za-z0-9_-]+")
_BRACKET: Final = r"""\[(?:
        ("(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*")   # json-string
        |(-?[0-9]+)                                                  # int
        |(-?[0-9]+)?:(-?[0-9]+)?                                     # slice
    )\]"""


@cache
def _bracket() -> re.Pattern[str]:
    # compiled on first use, not at import: only handlers that use bracket paths need it
    return re.compile(_BRACKET, re.VERBOSE)


def parse_path(path: object) -> tuple[Segment, ...]:
    """The segments of ``path``; :class:`AbiProtocolError` when it is not a string or not well formed."""
    if not isinstance(path, str):
        raise AbiProtocolError(f"path must be a string, got {type(path).__name__} {path!r}")
    return _parse(path)


@lru_cache(maxsize=512)
def _parse(path: str) -> tuple[Segment, ...]:
    if not path.startswith("."):
        raise AbiProtocolError(f"malformed path {path!r}: a path starts with '.'")
    segments: list[Segment] = []
    pos, end = 1, len(path)
    while pos < end:
        if path[pos] == "[":
            match = _bracket().match(path, pos)
            if match is None:
                raise AbiProtocolError(f"malformed path {path!r}: bad bracket segment at position {pos}")
            text, index, start, stop = match.groups()
            if text is not None:
                segments.append(json.loads(text))
            elif index is not None:
                segments.append(int(index))
            else:
                segments.append(slice(None if start is None else int(start), None if stop is None else int(stop)))
        else:
            if segments:
                if path[pos] != ".":
                    raise AbiProtocolError(f"malformed path {path!r}: expected '.' or '[' at position {pos}")
                pos += 1
            match = _NAME_RE.match(path, pos)
            if match is None:
                raise AbiProtocolError(
                    f"malformed path {path!r}: expected a name (letters, digits, '_', '-') at position {pos}; "
                    'use the bracket form .["key"] for other characters'
                )
            segments.append(match.group())
        pos = match.end()
    if any(isinstance(seg, slice) for seg in segments[:-1]):
        raise AbiProtocolError(f"malformed path {path!r}: a slice is allowed only as the last segment")
    return tuple(segments)


def get_value(root: Any, segments: tuple[Segment, ...], path: str) -> Any:
    """The live value at ``segments`` (a slice returns a new list); the caller copies before handing it out."""
    node = root
    for seg in segments:
        node = _step(node, seg, path)
    return node


def set_value(root: Any, segments: tuple[Segment, ...], value: Any, path: str) -> None:
    """Assign ``value`` at ``segments`` (non-empty); missing intermediate object keys are created as objects."""
    node = root
    for seg in segments[:-1]:
        if isinstance(seg, str) and isinstance(node, dict) and seg not in node:
            node[seg] = {}
        node = _step(node, seg, path)
    last = segments[-1]
    if isinstance(last, str):
        _require(node, dict, last, path)[last] = value
    elif isinstance(last, int):
        items = _require(node, list, last, path)
        try:
            items[last] = value
        except IndexError:
            raise _out_of_range(path, last, items) from None
    else:
        if not isinstance(value, list):
            raise TypeError(f"{path}: a slice assignment needs an array value, got {type(value).__name__}")
        _require(node, list, last, path)[last] = value


def delete_value(root: Any, segments: tuple[Segment, ...], path: str) -> None:
    """Delete the key or index at ``segments`` (non-empty, not ending in a slice)."""
    node = root
    for seg in segments[:-1]:
        node = _step(node, seg, path)
    last = segments[-1]
    if isinstance(last, str):
        target = _require(node, dict, last, path)
        if last not in target:
            raise _no_key(path, last)
        del target[last]
    elif isinstance(last, int):
        items = _require(node, list, last, path)
        try:
            del items[last]
        except IndexError:
            raise _out_of_range(path, last, items) from None
    else:
        raise AbiProtocolError(f"{path}: a slice cannot be deleted")


def _step(node: Any, seg: Segment, path: str) -> Any:
    if isinstance(seg, str):
        target = _require(node, dict, seg, path)
        try:
            return target[seg]
        except KeyError:
            raise _no_key(path, seg) from None
    items = _require(node, list, seg, path)
    try:
        return items[seg]
    except IndexError:
        raise _out_of_range(path, seg, items) from None


def _no_key(path: str, key: str) -> KeyError:
    return KeyError(f"{path}: no key {key!r}")


def _out_of_range(path: str, index: Segment, items: list[Any]) -> IndexError:
    return IndexError(f"{path}: index {index} out of range for an array of {len(items)}")


def _require(node: Any, kind: type[Any], seg: Segment, path: str) -> Any:
    if not isinstance(node, kind):
        wanted = "an object" if kind is dict else "an array"
        raise TypeError(f"{path}: {_describe(seg)} needs {wanted}, got {_json_type(node)}")
    return node


def _describe(seg: Segment) -> str:
    if isinstance(seg, str):
        return f"key {seg!r}"
    if isinstance(seg, int):
        return f"index {seg}"
    return "a slice"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
