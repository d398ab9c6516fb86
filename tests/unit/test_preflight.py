"""Fail fast (issue 20, point 5): every handler and deployment problem of a manifest, found before anything starts,
in one message (P-ABI-1..3, P-MAN-3)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from asya.manifest import parse_manifest
from asya_local.exceptions import LocalModeError
from asya_local.preflight import check_mesh, mesh_problems

pytestmark = pytest.mark.unit


def _module(code: Path, source: str) -> str:
    """A module with a unique name (imports are cached per process) in ``code``."""
    name = f"pf_{uuid.uuid4().hex[:12]}"
    code.mkdir(exist_ok=True)
    (code / f"{name}.py").write_text(source, encoding="utf-8")
    return name


def test_every_problem_is_reported_at_once_in_manifest_order(tmp_path: Path) -> None:
    code = tmp_path / "functions"
    mod = _module(
        code,
        "def ok(payload):\n    return payload\n"
        "def two(payload, extra):\n    return payload\n"
        "class Needs:\n    def __init__(self, model):\n        pass\n"
        "    def run(self, payload):\n        return payload\n",
    )
    manifest = parse_manifest(
        {
            "namespace": "pf",
            "actors": {
                "good": {"handler": f"{mod}.ok", "fan_in": {"key": "/items"}},
                "gone": {"handler": "no_such_module.handler"},
                "typo": {"handler": f"{mod}.okk"},
                "wide": {"handler": f"{mod}.two"},
                "needy": {"handler": f"{mod}.Needs.run"},
                "away": {"handler": f"{mod}.ok", "code": "elsewhere/"},
            },
            "flows": {"f": {"route": ["good", "x-fanin-good"]}},
        },
        base_dir=tmp_path,
    )
    with pytest.raises(LocalModeError) as caught:
        check_mesh(manifest, source="asya.yaml", instantiate=False)
    assert str(caught.value) == (
        "asya.yaml: 5 problems, nothing started:\n"
        "  actors.gone.handler: handler 'no_such_module.handler': no module could be imported; tried no_such_module "
        "(No module named 'no_such_module')\n"
        f"  actors.typo.handler: handler '{mod}.okk': {mod} has no attribute 'okk' (did you mean 'ok'?)\n"
        f"  actors.wide.handler: handler '{mod}.two' must take exactly one positional argument (the payload); its "
        "signature is (payload, extra)\n"
        f"  actors.needy.handler: handler '{mod}.Needs.run': class {mod}.Needs cannot be instantiated without "
        "arguments: "
        "__init__ parameters model have no default (P-ABI-3)\n"
        f"  actors.away.code: directory {(tmp_path / 'elsewhere').resolve()} does not exist (relative to the "
        f"manifest's directory {tmp_path.resolve()})"
    )


def test_synth_checks_never_instantiate_but_dev_loads_as_lambda_does(tmp_path: Path) -> None:
    code = tmp_path / "functions"
    marker = tmp_path / "instantiated"
    mod = _module(
        code,
        "from pathlib import Path\n"
        "class Model:\n"
        "    def __init__(self):\n"
        f"        Path({str(marker)!r}).write_text('yes')\n"
        "        raise RuntimeError('no GPU here')\n"
        "    def run(self, payload):\n        return payload\n"
        "    @staticmethod\n    def pure(payload):\n        return payload\n",
    )
    manifest = parse_manifest(
        {"namespace": "pf", "actors": {"m": {"handler": f"{mod}.Model.run"}, "s": {"handler": f"{mod}.Model.pure"}}},
        base_dir=tmp_path,
    )
    assert mesh_problems(manifest, instantiate=False) == []
    assert not marker.exists()
    assert mesh_problems(manifest, instantiate=True) == [
        f"actors.m.handler: handler '{mod}.Model.run': instantiating {mod}.Model() failed: RuntimeError: no GPU here",
        f"actors.s.handler: handler '{mod}.Model.pure': instantiating {mod}.Model() failed: RuntimeError: no GPU here",
    ]


def test_a_module_that_fails_on_import_names_the_error(tmp_path: Path) -> None:
    mod = _module(tmp_path / "functions", "raise ImportError('needs numpy')\n")
    manifest = parse_manifest({"namespace": "pf", "actors": {"a": {"handler": f"{mod}.f"}}}, base_dir=tmp_path)
    assert mesh_problems(manifest, instantiate=False) == [
        f"actors.a.handler: handler '{mod}.f': importing module '{mod}' failed: ImportError: needs numpy"
    ]


def test_a_method_that_forgot_the_payload_is_refused_without_an_instance(tmp_path: Path) -> None:
    mod = _module(tmp_path / "functions", "class C:\n    def run(self):\n        return 1\n    value = 3\n")
    manifest = parse_manifest(
        {"namespace": "pf", "actors": {"a": {"handler": f"{mod}.C.run"}, "b": {"handler": f"{mod}.C.value"}}},
        base_dir=tmp_path,
    )
    assert mesh_problems(manifest, instantiate=False) == [
        f"actors.a.handler: handler '{mod}.C.run' must take exactly one positional argument (the payload); its "
        "signature is (self) (with self)",
        f"actors.b.handler: handler '{mod}.C.value' is not callable: it is a value of type int",
    ]
