"""The actors of generated flow programs (tests/flowgen.py): plain functions of a payload, deterministic, used as
ordinary functions by the plain-Python run and the simulator, and as handlers by the local mesh (the e2e test copies
this file into its generated project). Each takes the state (an object with an integer ``n`` and a list ``log``)
or, in a map, one integer item; ``check`` raises ``ValueError`` on an odd number and ``lookup`` raises ``KeyError``
on a multiple of 3, so that ``try``/``except`` has something to catch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def _step(value: Any, name: str, change: Callable[[int], int]) -> Any:
    if isinstance(value, dict):
        return {**value, "n": change(value["n"]), "log": [*value["log"], name]}
    return change(value)


def _number(value: Any) -> Any:
    return value["n"] if isinstance(value, dict) else value


def inc(payload: Any) -> Any:
    return _step(payload, "inc", lambda n: n + 1)


def dbl(payload: Any) -> Any:
    return _step(payload, "dbl", lambda n: n * 2)


def add_three(payload: Any) -> Any:
    return _step(payload, "add-three", lambda n: n + 3)


def check(payload: Any) -> Any:
    if _number(payload) % 2:
        raise ValueError(f"odd: {_number(payload)}")
    return _step(payload, "check", lambda n: n - 5)


def lookup(payload: Any) -> Any:
    if _number(payload) % 3 == 0:
        raise KeyError(f"multiple of three: {_number(payload)}")
    return _step(payload, "lookup", lambda n: n + 7)


#: Manifest name -> function; a ``-`` in a name is called with ``_`` in a flow.
ACTORS: dict[str, Callable[[Any], Any]] = {
    "inc": inc,
    "dbl": dbl,
    "add-three": add_three,
    "check": check,
    "lookup": lookup,
}
#: The actors that never raise on a well-formed payload.
SAFE = ("inc", "dbl", "add-three")
#: The actors that raise, with the error each raises.
RAISING = {"check": "ValueError", "lookup": "KeyError"}
