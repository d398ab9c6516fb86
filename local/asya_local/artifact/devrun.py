"""``asya dev --artifact cdk.out``: the artifact mesh until Ctrl-C (or SIGTERM).

Prints the signed URL (the test principal's signing client, stage included) on stdout, then on stderr the API front's
own URL, the startup time and, when the run ends, every denied call. Exit code 0, or 1 when a call was denied.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TextIO

from asya_local.artifact.mesh import ArtifactMesh

__all__ = ["run_artifact"]


def run_artifact(cdk_out: str, *, port: int, out: TextIO, err: TextIO, stop: threading.Event | None = None) -> int:
    mesh = ArtifactMesh(Path(cdk_out), port=port, log_dir=(Path(".asya") / "artifact-logs").resolve())
    with mesh:
        out.write(f"{mesh.url}\n")
        out.flush()
        err.write(
            f"asya dev: artifact mesh of {cdk_out} up in {mesh.startup_seconds:.1f} s; API front (signatures "
            f"required) at {mesh.api_url}; IAM {'enforced' if mesh.iam_enforced else 'NOT enforced'}; function logs "
            "in .asya/artifact-logs/\n"
        )
        try:
            (stop or threading.Event()).wait()
        except KeyboardInterrupt:
            err.write("asya dev: stopping\n")
        denied = mesh.denied()
    for line in denied:
        err.write(f"denied: {line}\n")
    return 1 if denied else 0
