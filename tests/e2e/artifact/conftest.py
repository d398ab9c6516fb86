"""The suite's target: by default the artifact mesh, the example mesh's ``cdk.out`` (from ``tests/synthcache.py``:
shared with the infra tier, synthesized only when its inputs changed) run by
:class:`asya_local.artifact.mesh.ArtifactMesh` (one interpreter per function, moto behind the IAM proxy, the API
front with SigV4); with ``ASYA_E2E_TARGET=aws`` (``make e2e-aws``) a throwaway deployment of the same mesh in a real
account (:class:`tests.e2e.artifact.aws_target.AwsDeployment`), skipped with the reason when no credentials or region
are configured. The fixtures ``local_mesh`` and ``gateway`` are overridden here, so the e2e tests imported into this
directory run unchanged against either target; each test then asserts that no call was denied (``denied()``). Tests
that need the artifact mesh's internals (its pools, policies, schedules) ask for ``artifact_mesh``, which skips on
the real-AWS target.

The assembly and the mesh are shared by every test of the session: the build (16 interpreters, the gateway's import,
and a synth when the cache has none) is paid once. Restaged layers are cached under ``.asya/artifact-cache`` in the
repository.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from asya_local.artifact.mesh import ArtifactMesh
from tests.e2e.artifact.aws_target import AwsDeployment, aws_unavailable_reason, target_name
from tests.e2e.conftest import Gateway
from tests.synthcache import SYNTH_SECONDS, cached_cdk_out, synthesize

REPO = Path(__file__).resolve().parents[3]
CACHE = REPO / ".asya" / "artifact-cache"
#: What the session's build cost, reported at the end of the run (seconds).
_TIMINGS: dict[str, float] = {}


def _synthesized(outdir: Path, *, timing: str, manifest: Path | None = None) -> Path:
    """:func:`tests.synthcache.synthesize`, its cost kept under ``timing`` for the end-of-run report."""
    started = time.monotonic()
    out = synthesize(outdir, manifest=manifest)
    _TIMINGS[timing] = time.monotonic() - started
    return out


@contextmanager
def _started(cdk_out: Path, *, log_dir: Path, timing: str) -> Iterator[ArtifactMesh]:
    """The artifact mesh of ``cdk_out``, its start-up cost kept under ``timing``."""
    with ArtifactMesh(cdk_out, cache_dir=CACHE, log_dir=log_dir) as mesh:
        assert mesh.iam_enforced, "the IAM proxy must sit between the functions and moto"
        _TIMINGS[timing] = mesh.startup_seconds or 0.0
        yield mesh


@pytest.fixture(scope="session")
def cdk_out() -> Path:
    """The example's assembly, shared with the infra tier and earlier runs (``tests/synthcache.py``); synthesized
    here only when none of this content exists yet."""
    manifest = REPO / "asya.yaml"
    out, _ = cached_cdk_out(manifest, lambda outdir: synthesize(outdir, manifest=manifest))
    _TIMINGS["synth"] = SYNTH_SECONDS.get("asya", 0.0)
    return out


HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On the real-AWS target without credentials or a region, every test of this directory skips with the reason
    (checked from the environment and the config files only: no network)."""
    if target_name(os.environ) != "aws":
        return
    reason = aws_unavailable_reason(os.environ, home=Path.home())
    if reason is None:
        return
    for item in items:
        if HERE in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.skip(reason=f"e2e-aws: {reason}"))


#: Set when ``-k``/``-m`` deselected a test of this directory: the drift check then has no whole run to judge.
_DESELECTED: list[str] = []


def pytest_deselected(items: list[pytest.Item]) -> None:
    _DESELECTED.extend(item.nodeid for item in items if HERE in Path(str(item.path)).parents)


@pytest.fixture(scope="session")
def whole_suite() -> bool:
    """Whether every test of this directory was selected (the grant drift check needs the whole run)."""
    return not _DESELECTED


@pytest.fixture(scope="session")
def e2e_target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The artifact mesh, or the real deployment under ``ASYA_E2E_TARGET=aws`` (destroyed and cleaned up at the end
    of the session, also when tests fail; ``atexit`` covers an interrupted one)."""
    if target_name(os.environ) != "aws":
        yield request.getfixturevalue("artifact_mesh")
        return
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or ""
    deployment = AwsDeployment(REPO, tmp_path_factory.mktemp("e2e-aws"), region=region or _profile_region())
    started = time.monotonic()
    try:
        target = deployment.start()
        _TIMINGS["deploy"] = time.monotonic() - started
        yield target
    finally:
        deployment.stop()


def _profile_region() -> str:
    import boto3

    return str(boto3.Session().region_name or "")


@pytest.fixture(scope="session")
def artifact_mesh(cdk_out: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArtifactMesh]:
    if target_name(os.environ) == "aws":
        pytest.skip("needs the artifact mesh's internals (pools, policies, schedules): not on the real-AWS target")
    with _started(cdk_out, log_dir=tmp_path_factory.mktemp("artifact-logs"), timing="startup") as mesh:
        yield mesh


@pytest.fixture
def local_mesh(e2e_target: Any) -> Iterator[Any]:
    """The target in the place of the manifest-built mesh; the test ends with zero denied calls."""
    e2e_target.clear_denied()
    yield e2e_target
    assert e2e_target.denied() == [], "calls denied during the test"


@pytest.fixture
def gateway(local_mesh: Any) -> Gateway:
    return Gateway(local_mesh.url)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIMINGS:
        parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in _TIMINGS.items())
        terminalreporter.write_line(f"artifact mesh: {parts}")


@pytest.fixture(scope="session")
def own_mesh(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[Mapping[str, Any], str], AbstractContextManager[ArtifactMesh]]:
    """For a module that runs a mesh of its own manifest (the edge-auth modules): ``own_mesh(manifest, name)``
    writes ``manifest`` (a mapping) to a fresh directory, synthesizes it there and starts it, as the session's mesh
    is (``name synth``/``name startup`` in the end-of-run report). On the real-AWS target such a module skips: it
    would need a deployment of its own."""

    def start(manifest: Mapping[str, Any], name: str) -> AbstractContextManager[ArtifactMesh]:
        if target_name(os.environ) == "aws":
            pytest.skip(f"the {name} mesh is a deployment of its own: the artifact mesh only")
        workdir = tmp_path_factory.mktemp(name)
        path = workdir / "asya.yaml"
        path.write_text(yaml.safe_dump(dict(manifest)), encoding="utf-8")
        cdk_out = _synthesized(workdir / "cdk.out", timing=f"{name} synth", manifest=path)
        return _started(cdk_out, log_dir=workdir / "logs", timing=f"{name} startup")

    return start
