"""Assets built without Docker: the dependency layers (pip for manylinux2014_aarch64, cached by content hash) and the
staged gateway asset."""

from __future__ import annotations

import re
import stat
import sys
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_lambda as lambda_

from asya.manifest import Manifest
from asya_cdk import (
    ACTOR_REQUIREMENTS,
    GATEWAY_REQUIREMENTS,
    LAYER_REQUIREMENTS,
    AsyaMesh,
    DependencyBuilder,
    DependencyBuildError,
    DeploymentError,
    Lock,
    LockedLayerBundling,
    check_lock,
    pinned_requirements,
    render_manifest_json,
    stage_gateway_asset,
)
from asya_cdk.locks import LOCK_DIR
from asya_cdk.settings import PYTHON_RUNTIMES
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


def _lock(tmp_path: Path, text: str) -> Lock:
    path = tmp_path / "actor-py3.14.txt"
    path.write_text(HEADER + text, encoding="utf-8")
    return check_lock(tmp_path, "actor", "3.14", ["a==1"])


HEADER = "# asya layer lock: layer=actor python=3.14 platform=manylinux2014_aarch64 requires=a==1\n"


def test_cache_key_is_the_whole_lock_transitive_pins_included(tmp_path: Path) -> None:
    builder = DependencyBuilder(cache_dir=tmp_path, python_version="3.14")
    key = builder.key(_lock(tmp_path, "a==1 --hash=sha256:aa\nb==2 --hash=sha256:bb\n"))
    assert key == builder.key(_lock(tmp_path, "a==1 --hash=sha256:aa\nb==2 --hash=sha256:bb\n"))
    # a transitive pin (b) or a hash alone changes the key
    assert key != builder.key(_lock(tmp_path, "a==1 --hash=sha256:aa\nb==3 --hash=sha256:bb\n"))
    assert key != builder.key(_lock(tmp_path, "a==1 --hash=sha256:aa\nb==2 --hash=sha256:cc\n"))


def test_committed_locks_match_pyproject_for_every_runtime() -> None:
    """Every layer has a lock per supported runtime, resolved from pyproject.toml's pins, every line hashed."""
    for layer, names in LAYER_REQUIREMENTS.items():
        requires = pinned_requirements(names, pyproject=PYPROJECT)
        for version in PYTHON_RUNTIMES:
            lock = check_lock(LOCK_DIR, layer, version, requires)
            lines = [line for line in lock.text.splitlines() if not line.startswith("#")]
            assert lines and all(re.fullmatch(r"[A-Za-z0-9_.-]+==\S+ --hash=sha256:[0-9a-f]{64}", ln) for ln in lines)
            assert {pin.split("==")[0].lower() for pin in requires} <= {
                dist.split("==")[0].lower().replace("_", "-") for dist in lock.distributions
            }


def test_stale_or_missing_lock_is_refused_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(DeploymentError, match=r"no lock file for Python 3.14 .* make lock"):
        check_lock(tmp_path, "gateway", "3.14", ["a==1"])
    (tmp_path / "actor-py3.14.txt").write_text(HEADER, encoding="utf-8")
    with pytest.raises(DeploymentError, match=r"resolved from \['a==1'\], pyproject.toml pins \['a==2'\]"):
        check_lock(tmp_path, "actor", "3.14", ["a==2"])


def test_cached_layer_is_reused_without_running_pip(tmp_path: Path) -> None:
    # ``false`` as the pip command: any attempt to build would fail.
    builder = DependencyBuilder(cache_dir=tmp_path / "cache", python_version="3.14", pip=("false",))
    lock = _lock(tmp_path, "a==1 --hash=sha256:aa\n")
    cached = builder.layer_dir(lock)
    (cached / "python").mkdir(parents=True)
    assert builder.build(lock) == cached
    # CDK's local bundling links the cached build into its output directory, without pip
    out = tmp_path / "asset"
    out.mkdir()
    (cached / "python" / "mod.py").write_text("x = 1\n", encoding="utf-8")
    options = cdk.BundlingOptions(image=cdk.DockerImage.from_registry("never-pulled"))
    assert LockedLayerBundling(builder, lock).try_bundle(str(out), options) is True
    assert (out / "python" / "mod.py").read_text(encoding="utf-8") == "x = 1\n"


def test_failed_build_names_the_command_and_leaves_no_cache_entry(tmp_path: Path) -> None:
    builder = DependencyBuilder(cache_dir=tmp_path / "cache", python_version="3.14", pip=("false",))
    lock = _lock(tmp_path, "a==1 --hash=sha256:aa\n")
    with pytest.raises(DependencyBuildError, match=r"exit 1\): false install .*--require-hashes"):
        builder.build(lock)
    assert list((tmp_path / "cache").iterdir()) == []


def test_layers_are_built_by_cdk_bundling_only_for_the_stacks_it_bundles(tmp_path: Path) -> None:
    """Issue 19 item 2: the mesh runs no pip itself; CDK's asset staging calls the local bundling, and skips it for
    a stack excluded by ``aws:cdk:bundling-stacks`` (``cdk ls``, ``cdk diff -e`` of another stack)."""
    failing = DependencyBuilder(cache_dir=tmp_path / "cache", python_version="3.14", pip=("false",))
    skipped = cdk.App(outdir=str(tmp_path / "skip"), context={"aws:cdk:bundling-stacks": ["Other"]})
    AsyaMesh(
        cdk.Stack(skipped, "S", env=cdk.Environment(region="us-east-1")),
        "Default",
        manifest=REPO / "asya.yaml",
        dependencies=failing,
    )
    assert not (tmp_path / "cache").exists(), "no build for a stack CDK does not bundle"
    bundled = cdk.App(outdir=str(tmp_path / "out"))
    with pytest.raises(RuntimeError, match=r"FailedToBundleAsset|Failed to bundle asset .*--require-hashes"):
        AsyaMesh(
            cdk.Stack(bundled, "S", env=cdk.Environment(region="us-east-1")),
            "Default",
            manifest=REPO / "asya.yaml",
            dependencies=failing,
        )


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
    packages = ("aws_lambda_powertools", "pydantic", "pydantic_core", "yaml", "jsonschema", "starlette", "uvicorn")
    for package in (*packages, "joserfc", "cryptography"):
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


def test_cold_start_layers_ship_unchecked_hash_bytecode_when_the_interpreter_matches(
    tmp_path: Path, write_manifest: Any
) -> None:
    """Issue 19 item 9: the manifest chooses the runtime; this interpreter's minor version matches it, so the
    sidecar and dependency layers carry PEP 552 unchecked-hash ``.pyc`` (flags 0b01) for that version."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    path = write_manifest(
        {
            "namespace": "warm",
            "actors": {"echo": {"handler": "text.normalize", "code": str(REPO / "functions")}},
            "deployment": {"python_version": version},
        }
    )
    app = cdk.App(outdir=str(tmp_path / "out"))
    stack = cdk.Stack(app, "S", env=cdk.Environment(region="us-east-1"))
    mesh = AsyaMesh(stack, "Default", manifest=path)
    template = app.synth().get_stack_artifact(stack.artifact_id).template
    layers = {
        res["Properties"]["Description"]: tmp_path / "out" / f"asset.{res['Properties']['Content']['S3Key'][:-4]}"
        for res in template["Resources"].values()
        if res["Type"] == "AWS::Lambda::LayerVersion"
    }
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert {f["Properties"]["Runtime"] for f in functions} == {f"python{version}"}
    tag = f"cpython-{sys.version_info.major}{sys.version_info.minor}"
    (sidecar,) = [d for desc, d in layers.items() if desc.startswith("asya sidecar library")]
    (actor_deps,) = [d for desc, d in layers.items() if desc.startswith("asya actor dependencies")]
    for root, module in ((sidecar, "asya/sidecar"), (actor_deps, "aws_lambda_powertools/__init__")):
        source = root / "python" / f"{module}.py"
        pyc = source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"
        assert pyc.is_file(), pyc
        flags = int.from_bytes(pyc.read_bytes()[4:8], "little")
        assert flags == 0b01, "hash-based, unchecked (PEP 552)"
    assert mesh.manifest.deployment.python_version == version


def test_a_runtime_clashing_with_the_manifest_is_refused(tmp_path: Path, write_manifest: Any) -> None:
    path = write_manifest(
        {
            "namespace": "warm",
            "actors": {"echo": {"handler": "text.normalize", "code": str(REPO / "functions")}},
            "deployment": {"python_version": "3.12"},
        }
    )
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    with pytest.raises(DeploymentError, match=r"runtime: 'python3.13' clashes with the manifest's deployment"):
        AsyaMesh(stack, "Default", manifest=path, runtime=lambda_.Runtime.PYTHON_3_13)
