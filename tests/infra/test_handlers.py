"""Every Lambda of the synthesized template can start: its ``Handler`` resolves to real code in its assets.

For a Python handler ``pkg.module.function`` the module must be a file of the function's code asset or of one of its
layers (under ``python/``, where Lambda puts layer code on ``sys.path``), it must define ``function`` at top level, and
every module it imports at top level (recursively through the project's own modules) must be in those assets, in the
standard library or in the Lambda runtime (boto3). A function run through an exec wrapper (the Lambda Web Adapter)
names an executable script of its code asset instead, which must put the layers on ``PYTHONPATH`` and whose Python
modules resolve the same way. The assets are the directories ``cdk.out`` holds, found through
the assembly's asset manifest, so this checks exactly what ``cdk deploy`` would upload.

The module tree is read with ``ast``, never imported: layer wheels are built for arm64 and a newer Python.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Final

import pytest

from asya_cdk.testing import SynthesizedMesh
from asya_local.mesh import runtime_entry_point

pytestmark = pytest.mark.infra

#: ``python -m module`` and ``module:attribute`` (an ASGI app or factory) in a wrapped handler script.
_PYTHON_MODULE_RUN: Final = re.compile(r"\bpython3?\s+-m\s+([\w.]+)")
_APP_SPEC: Final = re.compile(r"\s([A-Za-z_][\w.]*):([A-Za-z_]\w*)(?=\s|$)")
_LAYERS_ON_PYTHONPATH: Final = re.compile(r"PYTHONPATH=\S*/opt/python")
#: Packages the Lambda Python runtime provides.
_RUNTIME_PROVIDED: Final = frozenset({"boto3", "botocore", "s3transfer", "jmespath", "dateutil", "urllib3", "six"})


@dataclass(frozen=True)
class _Function:
    logical_id: str
    handler: str
    environment: dict[str, str]
    code: Path
    layers: tuple[Path, ...]

    @property
    def search_path(self) -> tuple[Path, ...]:
        """Lambda's ``sys.path`` order: the code asset, then each layer's ``python/``."""
        return (self.code, *(layer / "python" for layer in self.layers))


def _asset_dirs(synth: SynthesizedMesh) -> dict[str, Path]:
    """S3 object key -> the asset directory ``cdk deploy`` zips and uploads under that key."""
    stack = synth.built.stack
    manifest = json.loads((synth.outdir / f"{stack.artifact_id}.assets.json").read_text(encoding="utf-8"))
    out: dict[str, Path] = {}
    for asset in manifest["files"].values():
        for destination in asset["destinations"].values():
            out[destination["objectKey"]] = synth.outdir / asset["source"]["path"]
    return out


def _functions(synth: SynthesizedMesh) -> list[_Function]:
    assets = _asset_dirs(synth)
    layers = {key: res["Properties"] for key, res in synth.of_type("AWS::Lambda::LayerVersion").items()}
    functions = []
    for key, res in synth.of_type("AWS::Lambda::Function").items():
        props = res["Properties"]
        layer_dirs = tuple(
            assets[layers[layer["Ref"]]["Content"]["S3Key"]]
            for layer in props.get("Layers", [])
            if isinstance(layer, dict) and "Ref" in layer  # an ARN string is a layer published elsewhere (LWA)
        )
        functions.append(
            _Function(
                logical_id=key,
                handler=props["Handler"],
                environment=props.get("Environment", {}).get("Variables", {}),
                code=assets[props["Code"]["S3Key"]],
                layers=layer_dirs,
            )
        )
    return functions


def _module_file(module: str, search_path: Sequence[Path]) -> Path | None:
    parts = module.split(".")
    for root in search_path:
        for candidate in (root.joinpath(*parts).with_suffix(".py"), root.joinpath(*parts, "__init__.py")):
            if candidate.is_file():
                return candidate
    return None


def _top_level_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def _top_level_imports(tree: ast.Module, module: str, is_package: bool) -> Iterator[tuple[str, bool]]:
    """``(module, required)`` for each module imported when ``module`` is imported: top-level statements only (``if
    TYPE_CHECKING:`` and function-level imports do not run at import time). ``from a import b`` requires ``a`` and
    imports ``a.b`` too when that is a module (else ``b`` is an attribute of ``a``)."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            yield from ((alias.name, True) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{node.module}" if node.module else anchor
            else:
                base = node.module or ""
            yield base, True
            yield from ((f"{base}.{alias.name}", False) for alias in node.names)


def _unresolved_imports(entry: str, search_path: Sequence[Path]) -> list[str]:
    """Every module reachable from ``entry``'s top-level imports that neither the assets, the standard library nor
    the runtime provide. Third-party packages found in a layer are trusted to be complete (pip built them)."""
    missing: list[str] = []
    seen: set[str] = set()
    queue = [(entry, True)]
    while queue:
        module, required = queue.pop()
        if module in seen:
            continue
        seen.add(module)
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in _RUNTIME_PROVIDED or top == "__future__":
            continue
        path = _module_file(module, search_path)
        if path is None:
            if required and (_module_file(top, search_path) is None or not _is_dependency(top, search_path)):
                missing.append(module)
            continue
        if _is_dependency(top, search_path):
            continue
        tree = _parsed(path)
        queue.extend(_top_level_imports(tree, module, path.name == "__init__.py"))
    return sorted(missing)


def _parsed(path: Path) -> ast.Module:
    """The module at ``path``, parsed once per content: the functions share their layers, so each checks the same
    modules (the sidecar's tree parsed again for every function was most of this module's CPU). Read every time, so
    a file a test rewrites is parsed again."""
    return _parse(path.read_text(encoding="utf-8"))


@functools.cache
def _parse(source: str) -> ast.Module:
    return ast.parse(source)


def _is_dependency(top: str, search_path: Sequence[Path]) -> bool:
    """True for a package pip installed into a dependencies layer (it has a ``.dist-info`` beside it)."""
    return _is_dependency_in(top, tuple(search_path))


@functools.cache
def _is_dependency_in(top: str, search_path: tuple[Path, ...]) -> bool:
    return any(any(root.glob(f"{top.replace('-', '_')}-*.dist-info")) for root in search_path if root.is_dir())


def _check_python_handler(function: _Function) -> list[str]:
    module, _, attribute = function.handler.rpartition(".")
    if not module:
        return [f"{function.logical_id}: handler {function.handler!r} is not module.function"]
    path = _module_file(module, function.search_path)
    if path is None:
        roots = ", ".join(str(root) for root in function.search_path)
        return [f"{function.logical_id}: handler module {module!r} is in none of its assets ({roots})"]
    problems = []
    if attribute not in _top_level_names(_parsed(path)):
        problems.append(f"{function.logical_id}: {path} defines no top-level {attribute!r}")
    problems.extend(
        f"{function.logical_id}: {module} imports {name}, which its assets do not provide"
        for name in _unresolved_imports(module, function.search_path)
    )
    return problems


def _check_wrapped_handler(function: _Function) -> list[str]:
    """A script run by the exec wrapper: it exists and is executable; when it runs Python, it puts the layers on
    ``PYTHONPATH`` (a wrapped script only gets ``$LAMBDA_RUNTIME_DIR``) and every ``-m module`` and ``module:attr``
    it names resolves like a Python handler."""
    name = f"{function.logical_id}: handler script {function.handler!r}"
    script = function.code / function.handler
    if not script.is_file():
        return [f"{name} is not in its code asset"]
    if not os.access(script, os.X_OK):
        return [f"{name} is not executable"]
    text = script.read_text(encoding="utf-8")
    modules = _PYTHON_MODULE_RUN.findall(text)
    if not modules:
        return []
    problems = []
    if function.layers and not _LAYERS_ON_PYTHONPATH.search(text):
        problems.append(f"{name} runs python without /opt/python on PYTHONPATH: its layers cannot be imported")
    for module in modules:
        if _module_file(module, function.search_path) is None:
            problems.append(f"{name} runs module {module!r}, which its assets do not provide")
    for module, attribute in _APP_SPEC.findall(text):
        problems.extend(_check_python_handler(replace(function, handler=f"{module}.{attribute}")))
    return problems


def test_every_lambda_handler_resolves_to_code_in_its_assets(example_synth: SynthesizedMesh) -> None:
    functions = _functions(example_synth)
    assert len(functions) >= 7  # four user actors, x-sink, x-sump, the gateway (and the backstop)
    problems: list[str] = []
    for function in functions:
        if "AWS_LAMBDA_EXEC_WRAPPER" in function.environment:
            problems.extend(_check_wrapped_handler(function))
        else:
            problems.extend(_check_python_handler(function))
    assert problems == []


def test_actor_lambdas_run_the_entry_module_the_local_mode_runs(example_synth: SynthesizedMesh) -> None:
    """The local mode builds each actor's runtime from the module its deployed Lambda's handler names."""
    actors: dict[str, Any] = {}
    for function in _functions(example_synth):
        actor = function.environment.get("ASYA_ACTOR")
        if actor is not None:
            actors[actor] = function.handler.rpartition(".")[0]
    assert set(actors) == {
        "normalize",
        "analyze",
        "summarize",
        "split",
        "chunk",
        "summarize-chunk",
        "digest",
        "request-review",
        "publish",
        "x-sink",
        "x-sump",
        "x-pause",
        "x-resume",
        "x-fanin-chunk",
        "x-fanin-flow-triage",
    }
    assert {actor: runtime_entry_point(actor)[0] for actor in actors} == actors


def test_the_check_finds_a_missing_module_a_missing_function_and_a_missing_import(tmp_path: Path) -> None:
    code = tmp_path / "code"
    (code / "pkg").mkdir(parents=True)
    (code / "pkg" / "__init__.py").write_text("", encoding="utf-8")
    (code / "pkg" / "entry.py").write_text(
        "from __future__ import annotations\nimport json\nimport boto3\nfrom . import helper\n"
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import not_at_runtime\n"
        "def lambda_handler(event, context):\n    import lazily_imported\n",
        encoding="utf-8",
    )
    (code / "pkg" / "helper.py").write_text("import missing_dependency\n", encoding="utf-8")

    def check(handler: str) -> list[str]:
        return _check_python_handler(_Function("Fn", handler, {}, code, ()))

    assert check("pkg.entry.lambda_handler") == [
        "Fn: pkg.entry imports missing_dependency, which its assets do not provide"
    ]
    (code / "pkg" / "helper.py").write_text("import json\n", encoding="utf-8")
    assert check("pkg.entry.lambda_handler") == []
    assert check("pkg.entry.other") == [f"Fn: {code / 'pkg' / 'entry.py'} defines no top-level 'other'"]
    assert check("pkg.absent.lambda_handler")[0].startswith("Fn: handler module 'pkg.absent' is in none of its assets")


def test_the_check_finds_a_wrapped_script_without_the_layers_on_its_path(tmp_path: Path) -> None:
    code, layer = tmp_path / "code", tmp_path / "layer"
    (code / "app").mkdir(parents=True)
    (code / "app" / "__init__.py").write_text("", encoding="utf-8")
    (code / "app" / "web.py").write_text("def create_app():\n    return None\n", encoding="utf-8")
    (layer / "python" / "uvicorn").mkdir(parents=True)
    (layer / "python" / "uvicorn" / "__init__.py").write_text("", encoding="utf-8")
    (layer / "python" / "uvicorn-0.1.dist-info").mkdir()
    script = code / "run.sh"
    script.write_text("#!/bin/sh\nexec python -m uvicorn app.web:create_app --factory\n", encoding="utf-8")
    script.chmod(0o755)
    function = _Function("Fn", "run.sh", {"AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap"}, code, (layer,))
    assert _check_wrapped_handler(function) == [
        "Fn: handler script 'run.sh' runs python without /opt/python on PYTHONPATH: its layers cannot be imported"
    ]
    script.write_text(
        '#!/bin/sh\nexport PYTHONPATH="/var/task:/opt/python"\nexec python -m uvicorn app.web:make_app --factory\n',
        encoding="utf-8",
    )
    assert _check_wrapped_handler(function) == [f"Fn: {code / 'app' / 'web.py'} defines no top-level 'make_app'"]
    script.write_text(
        '#!/bin/sh\nexport PYTHONPATH="/var/task:/opt/python"\nexec python -m uvicorn app.web:create_app\n',
        encoding="utf-8",
    )
    assert _check_wrapped_handler(function) == []
