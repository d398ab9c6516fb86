"""The artifact mesh target: the example mesh synthesized once per session into a temporary ``cdk.out`` and run by
:class:`asya_local.artifact.mesh.ArtifactMesh` (one interpreter per function, moto behind the IAM proxy, the API front
with SigV4). The fixtures ``local_mesh`` and ``gateway`` are overridden here, so the e2e tests imported into this
directory run unchanged against it; each test then asserts that no call was denied (``artifact_mesh.denied()``).

The synthesized assembly and the mesh are shared by every test of the session: the build (a synth, 16 interpreters,
the gateway's import) is paid once. Restaged layers are cached under ``.asya/artifact-cache`` in the repository.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from asya_local.artifact.mesh import ArtifactMesh
from tests.e2e.conftest import Gateway

REPO = Path(__file__).resolve().parents[3]
CACHE = REPO / ".asya" / "artifact-cache"
#: What the session's build cost, reported at the end of the run (seconds).
_TIMINGS: dict[str, float] = {}


def synthesize(outdir: Path, *, manifest: Path | None = None) -> Path:
    """``cdk/app.py`` into ``outdir`` (a child process: jsii's Node process stays out of the test session)."""
    command = [sys.executable, str(REPO / "cdk" / "app.py")]
    if manifest is not None:
        command += ["-c", f"manifest={manifest}"]
    result = subprocess.run(
        command, cwd=REPO, env={**os.environ, "CDK_OUTDIR": str(outdir)}, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, f"synth failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return outdir


@pytest.fixture(scope="session")
def cdk_out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    started = time.monotonic()
    out = synthesize(tmp_path_factory.mktemp("cdk") / "cdk.out")
    _TIMINGS["synth"] = time.monotonic() - started
    return out


@pytest.fixture(scope="session")
def artifact_mesh(cdk_out: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ArtifactMesh]:
    with ArtifactMesh(cdk_out, cache_dir=CACHE, log_dir=tmp_path_factory.mktemp("artifact-logs")) as mesh:
        assert mesh.iam_enforced, "the IAM proxy must sit between the functions and moto"
        _TIMINGS["startup"] = mesh.startup_seconds or 0.0
        yield mesh


@pytest.fixture
def local_mesh(artifact_mesh: ArtifactMesh) -> Iterator[ArtifactMesh]:
    """The artifact mesh in the place of the manifest-built one; the test ends with zero denied calls."""
    artifact_mesh.clear_denied()
    yield artifact_mesh
    assert artifact_mesh.denied() == [], "calls denied during the test"


@pytest.fixture
def gateway(local_mesh: ArtifactMesh) -> Gateway:
    return Gateway(local_mesh.url)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _TIMINGS:
        parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in _TIMINGS.items())
        terminalreporter.write_line(f"artifact mesh: {parts}")
