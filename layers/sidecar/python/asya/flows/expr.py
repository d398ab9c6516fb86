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
are deep-copied on assignment (``asya.serialize.copy_json``), so a flow has JSON value semantics across hops.

Bounded evaluation (P-FLOW-21): a value a mutation stores, and one that ``+``, ``*`` or ``str(...)`` builds, may not
encode to more than :data:`MAX_VALUE_BYTES`, nested values counted in full however often they are shared, and an
integer an expression computes may not reach :data:`MAX_INT_BITS` bits. Sizes are predicted before a repeat or a
concatenation is built, and measured by :func:`encoded_size`, which walks without recursion and stops as soon as the
limit is passed, so a doubled value costs no more than the limit to refuse.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any, Final

from asya.flows.errors import FlowError

__all__ = [
    "BINARY_OPS",
    "COMPARE_OPS",
    "FUNCTIONS",
    "MAX_INT_BITS",
    "MAX_VALUE_BYTES",
    "check_size",
    "encoded_size",
    "evaluate",
]

#: P-FLOW-21: the encoded size a value built or assigned by an expression may reach.
MAX_VALUE_BYTES: Final = 4 * 1024 * 1024
#: P-FLOW-21: an integer an expression computes stays under 2**256 in magnitude.
MAX_INT_BITS: Final = 256

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


def encoded_size(value: Any, limit: int) -> int:
    """About the length of ``value``'s JSON text, counting a shared value every time it occurs (as it is sent); as
    soon as the count passes ``limit`` it stops and answers a number over ``limit``, so a measure never costs more
    than ``limit`` (a doubled value is refused in the time its first ``limit`` characters take). Iterative: any depth
    is measured."""
    if not isinstance(value, dict | list | tuple):
        return _scalar_size(value)
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            total += 2 + 2 * len(item)
            for key, member in item.items():
                total += len(key) + 2 if isinstance(key, str) else 24
                if isinstance(member, dict | list | tuple):
                    stack.append(member)
                else:
                    total += _scalar_size(member)
        else:
            total += 2 + len(item)
            if total > limit:  # a list longer than the limit is refused by its length alone
                return total
            for member in item:
                if isinstance(member, dict | list | tuple):
                    stack.append(member)
                else:
                    total += _scalar_size(member)
        if total > limit:
            return total
    return total


def _scalar_size(item: Any) -> int:
    if isinstance(item, str):
        return len(item) + 2
    if isinstance(item, bool) or item is None:
        return 5
    if isinstance(item, int):
        return item.bit_length() * 3 // 10 + 2
    return 24


def check_size(value: Any, *, what: str = "expression built a value") -> Any:
    """``value`` when it encodes within :data:`MAX_VALUE_BYTES`; :class:`FlowError` otherwise (P-FLOW-21)."""
    if isinstance(value, str | list | dict) and encoded_size(value, MAX_VALUE_BYTES) > MAX_VALUE_BYTES:
        raise FlowError(f"{what} of more than {MAX_VALUE_BYTES} bytes (the limit of a flow value)")
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


def _bounded_int(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() >= MAX_INT_BITS:
        raise FlowError(
            f"expression computed an integer of {value.bit_length()} bits, over the limit of 2**{MAX_INT_BITS}"
        )
    return value


def _sized(value: Any) -> Any:
    return _bounded_int(check_size(value))


def _binary(op: str, left: Any, right: Any) -> Any:
    """``left op right`` with its result's size predicted before a repeat or a concatenation is built."""
    if op == "*":
        for seq, count in ((left, right), (right, left)):
            if isinstance(seq, str | list) and isinstance(count, int) and count > 0:
                unit = encoded_size(seq, MAX_VALUE_BYTES)
                if unit * count > MAX_VALUE_BYTES:
                    raise FlowError(f"expression would build a value of more than {MAX_VALUE_BYTES} bytes")
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and left.bit_length() + right.bit_length() > MAX_INT_BITS + 1
        ):
            raise FlowError(f"expression would compute an integer over the limit of 2**{MAX_INT_BITS}")
    sequences = isinstance(left, str | list) and isinstance(right, str | list)
    if (
        op == "+"
        and sequences
        and encoded_size(left, MAX_VALUE_BYTES) + encoded_size(right, MAX_VALUE_BYTES) > MAX_VALUE_BYTES
    ):
        raise FlowError(f"expression would build a value of more than {MAX_VALUE_BYTES} bytes")
    return _sized(BINARY_OPS[op](left, right))


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
        return _binary(tree[1], _eval(tree[2], state), _eval(tree[3], state))
    if tag == "neg":
        return _bounded_int(-_eval(tree[1], state))
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
    if tag == "list":  # a literal holds what its source names: the assignment storing it measures it (interp)
        return [_eval(item, state) for item in tree[1]]
    if tag == "dict":
        return {_eval(k, state): _eval(v, state) for k, v in tree[1]}
    if tag == "fn":
        args = [_eval(arg, state) for arg in tree[2]]
        if tree[1] == "str" and args:  # str() of a container is as long as its text: refuse before building it
            check_size(args[0])
        return _sized(FUNCTIONS[tree[1]](*args))
    raise FlowError(f"unknown expression tag {tag!r}")
