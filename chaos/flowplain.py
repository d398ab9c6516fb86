"""The plain-Python run of the chaos mesh's compiled flow (``chaos/mesh/flows/calc.py``): the actors it calls, in
order, and its result, with the actors as the plain functions the chaos handlers compute (``chaos.actors``). The
checker's ``flows`` property compares every ``calc`` task of a chaos run with it."""

from __future__ import annotations

import asyncio
import copy
import importlib.util
import threading
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from chaos.actors import double_value, inc_value

__all__ = ["FLOW_FILE", "plain_run"]

FLOW_FILE: Final = Path(__file__).resolve().parent / "mesh" / "flows" / "calc.py"
_LOCK: Final = threading.Lock()  # the actors are bound in the module's globals for one run at a time


@cache
def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chaos_calc_flow", FLOW_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def plain_run(payload: dict[str, Any]) -> tuple[list[str], Any]:
    """``(actors called, result)`` of the flow run as plain Python on a copy of ``payload``."""
    module = _module()
    called: list[str] = []

    def actor(name: str, compute: Any) -> Any:
        async def call(state: dict[str, Any]) -> dict[str, Any]:
            called.append(name)
            result: dict[str, Any] = compute(state)
            return result

        return call

    with _LOCK:
        namespace = vars(module)
        namespace["inc"], namespace["double"] = actor("inc", inc_value), actor("double", double_value)
        result = asyncio.run(module.calc(copy.deepcopy(payload)))
    return called, result
