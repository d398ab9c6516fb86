"""Assets built without Docker: the dependency layers (pip for manylinux2014_aarch64, cached by content hash) and the
staged gateway asset."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from asya.manifest import Manifest
from asya_cdk import (
    ACTOR_REQUIREMENTS,
    GATEWAY_REQUIREMENTS,
    DependencyBuilder,
    DependencyBuildError,
    DeploymentError,
    pinned_requirements,
    render_manifest_json,
    stage_gateway_asset,
)
from asya_cdk.testing import SynthesizedMesh

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]

PYPROJECT = REPO / "pyproject.toml"


def test_requirements_are_pinned_from_pyproject() -> None:
    pins = pinned_requirements(GATEWAY_REQUIREMENTS, pyproject=PYPROJECT)
    assert len(pins) == len(GATEWAY_REQUIREMENTS)
    for name, pin in zip(GATEWAY_REQUIREMENTS, pins, strict=True):
        assert pin.lower().startswith(f"{name}==")
    assert "pydantic" not in " ".join(pinned_requirements(ACTOR_REQUIREMENTS, pyproject=PYPROJECT))


def test_unpinned_requirement_is_refused() -> None:
    with pytest.raises(DeploymentError, match=r"\['left-pad'\] are not pinned"):
        pinned_requirements(("left-pad",), pyproject=PYPROJECT)


def test_cache_key_depends_on_pins_and_python_version(tmp_path: Path) -> None:
    builder = DependencyBuilder(cache_dir=tmp_path, python_version="3.14")
    key = builder.key(["a==1", "b==2"])
    assert key == builder.key(["b==2", "a==1"])
    assert key != builder.key(["a==1", "b==3"])
    assert key != DependencyBuilder(cache_dir=tmp_path, python_version="3.13").key(["a==1", "b==2"])


def test_cached_layer_is_reused_without_running_pip(tmp_path: Path) -> None:
    # ``false`` as the pip command: any attempt to build would fail.
    builder = DependencyBuilder(cache_dir=tmp_path, python_version="3.14", pip=("false",))
    cached = builder.layer_dir(["a==1"])
    (cached / "python").mkdir(parents=True)
    assert builder.build(["a==1"]) == cached


def test_failed_build_names_the_command_and_leaves_no_cache_entry(tmp_path: Path) -> None:
    builder = DependencyBuilder(cache_dir=tmp_path, python_version="3.14", pip=("false",))
    with pytest.raises(DependencyBuildError, match=r"exit 1\): false install .*--platform manylinux2014_aarch64"):
        builder.build(["a==1"])
    assert list(tmp_path.iterdir()) == []


def _layer_asset(synth: SynthesizedMesh, description_prefix: str) -> Path:
    (layer,) = [
        res["Properties"]
        for res in synth.of_type("AWS::Lambda::LayerVersion").values()
        if res["Properties"]["Description"].startswith(description_prefix)
    ]
    return synth.outdir / f"asset.{layer['Content']['S3Key'].removesuffix('.zip')}"


def test_dependency_layers_hold_aarch64_wheels_for_the_runtime(example_synth: SynthesizedMesh) -> None:
    """The real build (the session's synthesis ran it or reused the cache): Lambda-platform binaries, nothing
    compiled for this machine's Python, no console scripts."""
    gateway = _layer_asset(example_synth, "asya gateway dependencies")
    for package in ("aws_lambda_powertools", "pydantic", "pydantic_core", "yaml", "jsonschema", "starlette", "uvicorn"):
        assert (gateway / "python" / package).is_dir(), package
    assert list((gateway / "python" / "pydantic_core").glob("_pydantic_core.cpython-314-aarch64-linux-gnu.so"))
    assert not (gateway / "python" / "bin").exists()
    assert not list(gateway.rglob("*.pyc"))
    actor = _layer_asset(example_synth, "asya actor dependencies")
    assert (actor / "python" / "aws_lambda_powertools").is_dir()
    assert not (actor / "python" / "pydantic").exists()


def test_sidecar_layer_ships_the_asya_package(example_synth: SynthesizedMesh) -> None:
    sidecar = _layer_asset(example_synth, "asya sidecar library")
    assert (sidecar / "python" / "asya" / "manifest" / "__init__.py").is_file()
    assert (sidecar / "python" / "asya" / "sidecar.py").is_file()
    assert not list(sidecar.rglob("__pycache__"))


def test_gateway_staging_is_content_addressed(tmp_path: Path, example_manifest: Manifest) -> None:
    gateway = tmp_path / "gateway"
    (gateway / "asya_gateway" / "__pycache__").mkdir(parents=True)
    (gateway / "asya_gateway" / "__init__.py").write_text("")
    (gateway / "asya_gateway" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    manifest_json = render_manifest_json(example_manifest)
    staging = tmp_path / "staging"
    first = stage_gateway_asset(gateway_dir=gateway, manifest_json=manifest_json, staging_dir=staging)
    assert stage_gateway_asset(gateway_dir=gateway, manifest_json=manifest_json, staging_dir=staging) == first
    assert (first / "asya_gateway" / "__init__.py").is_file()
    assert not (first / "asya_gateway" / "__pycache__").exists()
    assert (first / "manifest.json").read_text() == manifest_json
    assert (first / "run.sh").stat().st_mode & stat.S_IXOTH
    changed = stage_gateway_asset(gateway_dir=gateway, manifest_json=manifest_json + " ", staging_dir=staging)
    assert changed != first
    assert sorted(p.name for p in staging.iterdir()) == sorted([first.name, changed.name])
