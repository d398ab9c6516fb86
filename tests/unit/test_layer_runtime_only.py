"""The Lambda layer ships runtime only: every module under ``layers/sidecar/python/asya`` is reached by the imports
of some code that runs in a Lambda function (the actor runtime's entry point, the crew, the gateway and its backstop,
the example actors). A module only ``cdk/`` or ``local/`` would import belongs in ``deploy/asya_deploy``."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
LAYER = REPO / "layers" / "sidecar" / "python"
#: Code that runs in Lambda beside the layer: what it imports of ``asya`` must ship.
RUNTIME_ROOTS = (REPO / "crew" / "asya_crew", REPO / "gateway" / "asya_gateway", REPO / "functions")
#: The entry points the layer itself names (``asya.naming`` SIDECAR_ENTRY_POINT and the crew's handlers).
LAYER_ENTRY_POINTS = ("asya", "asya.sidecar")


def _layer_modules() -> dict[str, Path]:
    modules = {}
    for path in (LAYER / "asya").rglob("*.py"):
        parts = path.relative_to(LAYER).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def _imports(path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Every ``asya`` module ``path`` imports, at module level or inside a function (lazy imports ship too)."""
    package = ".".join(path.relative_to(LAYER).with_suffix("").parts[:-1]) if path.is_relative_to(LAYER) else ""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield from _prefixes(alias.name, modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            yield from _prefixes(base, modules)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    yield f"{base}.{alias.name}"


def _prefixes(name: str, modules: dict[str, Path]) -> Iterator[str]:
    parts = name.split(".")
    for end in range(1, len(parts) + 1):
        prefix = ".".join(parts[:end])
        if prefix in modules:
            yield prefix


def test_every_layer_module_is_reached_from_code_that_runs_in_lambda() -> None:
    modules = _layer_modules()
    reached: set[str] = set()
    todo = [name for name in LAYER_ENTRY_POINTS if name in modules]
    for root in RUNTIME_ROOTS:
        for path in root.rglob("*.py"):
            todo.extend(_imports(path, modules))
    while todo:
        name = todo.pop()
        if name in reached:
            continue
        reached.add(name)
        todo.extend(_imports(modules[name], modules))
    unreached = sorted(set(modules) - reached)
    assert unreached == [], f"layer modules no Lambda code imports (move them to deploy/asya_deploy): {unreached}"


def test_the_deploy_time_contracts_are_not_in_the_layer() -> None:
    for moved in ("access", "environment", "flows/frames"):
        assert not (LAYER / "asya" / f"{moved}.py").exists()
        assert (REPO / "deploy" / "asya_deploy" / f"{Path(moved).name}.py").is_file()
