"""Handlers in a sub-module: ``abi_pkg.handlers.hello`` and ``abi_pkg.handlers.Greeter.greet``."""

from __future__ import annotations

from typing import Any


def hello(payload: Any) -> dict[str, Any]:
    return {"hello": payload}


class Greeter:
    def greet(self, payload: Any) -> dict[str, Any]:
        return {"greeting": f"hi {payload}"}
