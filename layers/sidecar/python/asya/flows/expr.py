"""The expression subset of flows, evaluated without ``eval`` (P-FLOW-2: side-effect free).

An expression is a JSON tree, a list whose first item is its tag:

- ``["const", v]``; ``["state"]`` (the whole payload); ``["sub", e, key]`` (``e[key]``);
  ``["get", e, key, default]`` (``e.get(key, default)``, ``e`` a dict);
- ``["bin", op, a, b]`` with ``op`` in ``+ - * / // %``; ``["neg", e]``; ``["not", e]``;
- ``["and", [e, ...]]``, ``["or", [e, ...]]`` (Python's short-circuit, returning an operand);
- ``["cmp", e, [[op, e], ...]]`` with ``op`` in ``== != < <= > >= in notin is isnot`` (chained as in Python);
- ``["if", test, then, else]``; ``["list", [e, ...]]``; ``["dict", [[k, v], ...]]``;
- ``["fn", name, [e, ...]]`` with ``name`` in :data:`FUNCTIONS`.

Any Python error while evaluating (a missing key, a type mismatch, a division by zero) is raised as
:class:`~asya.flows.errors.FlowError` naming the expression's source line when known. Results that are containers
are deep-copied on assignment (:func:`copy_json`), so a flow has JSON value semantics across hops.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, Final

from asya.flows.errors import FlowError

__all__ = ["BINARY_OPS", "COMPARE_OPS", "FUNCTIONS", "copy_json", "evaluate"]

#: Bound on the size of a string or list an expression may build, so a flow cannot exhaust memory.
_MAX_SIZE: Final = 1_000_000

BINARY_OPS: Final[Mapping[str, Callable[[Any, Any], Any]]] = {
    "+": operator.add,
    "-": operator.sub,
    "*": operator.mul,
    "/": operator.truediv,
    "//": operator.floordiv,
    "%": operator.mod,
}

COMPARE_OPS: Final[Mapping[str, Callable[[Any, Any], Any]]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "in": lambda a, b: a in b,
    "notin": lambda a, b: a not in b,
    "is": operator.is_,
    "isnot": operator.is_not,
}

FUNCTIONS: Final[Mapping[str, Callable[..., Any]]] = {
    "len": len,
    "min": min,
    "max": max,
    "abs": abs,
    "int": int,
    "float": float,
    "str": str,
    "bool": bool,
}


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars)."""
    if isinstance(value, dict):
        return {k: copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_json(v) for v in value]
    return value


def evaluate(tree: Any, state: Any, *, line: int | None = None) -> Any:
    """The value of expression ``tree`` over payload ``state``; raises :class:`FlowError`."""
    try:
        return _eval(tree, state)
    except FlowError:
        raise
    except Exception as exc:  # any Python error of the user's expression fails the flow, named
        where = f" at line {line}" if line else ""
        raise FlowError(f"expression{where} failed: {type(exc).__name__}: {exc}") from exc


def _sized(value: Any) -> Any:
    if isinstance(value, str | list) and len(value) > _MAX_SIZE:
        raise FlowError(f"expression built a value of {len(value)} items, over the limit of {_MAX_SIZE}")
    return value


def _eval(tree: Any, state: Any) -> Any:
    tag = tree[0]
    if tag == "const":
        return tree[1]
    if tag == "state":
        return state
    if tag == "sub":
        return _eval(tree[1], state)[_eval(tree[2], state)]
    if tag == "get":
        target = _eval(tree[1], state)
        if not isinstance(target, dict):
            raise TypeError(f"'.get' on a {type(target).__name__}")
        return target.get(_eval(tree[2], state), _eval(tree[3], state))
    if tag == "bin":
        left, right = _eval(tree[2], state), _eval(tree[3], state)
        big = any(isinstance(v, int) and v > _MAX_SIZE for v in (left, right))
        if tree[1] == "*" and big and any(isinstance(v, str | list) for v in (left, right)):
            raise FlowError(f"expression would build a value over the limit of {_MAX_SIZE} items")
        return _sized(BINARY_OPS[tree[1]](left, right))
    if tag == "neg":
        return -_eval(tree[1], state)
    if tag == "not":
        return not _eval(tree[1], state)
    if tag == "and":
        value: Any = True
        for item in tree[1]:
            value = _eval(item, state)
            if not value:
                return value
        return value
    if tag == "or":
        value = False
        for item in tree[1]:
            value = _eval(item, state)
            if value:
                return value
        return value
    if tag == "cmp":
        left = _eval(tree[1], state)
        for op, right_tree in tree[2]:
            right = _eval(right_tree, state)
            if not COMPARE_OPS[op](left, right):
                return False
            left = right
        return True
    if tag == "if":
        return _eval(tree[2], state) if _eval(tree[1], state) else _eval(tree[3], state)
    if tag == "list":
        return [_eval(item, state) for item in tree[1]]
    if tag == "dict":
        return {_eval(k, state): _eval(v, state) for k, v in tree[1]}
    if tag == "fn":
        return _sized(FUNCTIONS[tree[1]](*(_eval(arg, state) for arg in tree[2])))
    raise FlowError(f"unknown expression tag {tag!r}")
