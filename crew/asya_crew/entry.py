"""The Lambda entry point of a crew actor: one runtime per Lambda container, built from ``os.environ`` on the first
call (not at import, so importing a crew module has no side effects), then reused by every later invocation."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Protocol

from asya.config import ActorConfig

__all__ = ["LambdaHandler", "lambda_entry"]

LambdaHandler = Callable[[dict[str, Any], Any], dict[str, Any]]


class _Runtime(Protocol):
    def handle(self, event: dict[str, Any], context: Any) -> dict[str, Any]: ...


def lambda_entry(runtime_class: Callable[[ActorConfig], _Runtime]) -> LambdaHandler:
    """A ``lambda_handler`` that builds ``runtime_class(ActorConfig.from_env(os.environ))`` on its first call."""
    runtime: _Runtime | None = None

    def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        nonlocal runtime
        if runtime is None:
            runtime = runtime_class(ActorConfig.from_env(os.environ))
        return runtime.handle(event, context)

    return lambda_handler
