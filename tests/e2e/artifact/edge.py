"""What the edge-auth modules of the artifact suite share (test_artifact_edge_auth.py for ``jwt``,
test_artifact_edge_apikey.py for ``api_key``; the example's suite reads the reporter secret the same way)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3

from asya_local.artifact.mesh import ArtifactMesh
from asya_local.moto_server import FAKE_CREDENTIALS


def deployer_client(mesh: ArtifactMesh, service: str) -> Any:
    """A client of ``service`` with the deployer's credentials, which the IAM proxy passes unchecked (an operator
    storing a secret, the suite reading one)."""
    return boto3.Session().client(
        service,
        region_name=mesh.clients.region,
        endpoint_url=mesh.endpoint_url,
        aws_access_key_id=FAKE_CREDENTIALS["aws_access_key_id"],
        aws_secret_access_key=FAKE_CREDENTIALS["aws_secret_access_key"],
    )


@contextmanager
def no_denials(mesh: ArtifactMesh) -> Iterator[ArtifactMesh]:
    """The mesh for one test, which ends with zero calls denied (the authorizer's and the gateway's, under their
    roles)."""
    mesh.clear_denied()
    yield mesh
    assert mesh.denied() == [], "calls denied during the test"


def authorizer_invocations(mesh: ArtifactMesh) -> int:
    """Invocations of the API's authorizer functions so far."""
    assert mesh.authorizers is not None
    return sum(mesh.authorizers.invocations.values())


def authorizer_calls(mesh: ArtifactMesh) -> tuple[set[str], set[tuple[str, str]]]:
    """The authorizer functions invoked so far, and every ``(function, action)`` they made through the IAM proxy."""
    spec = mesh.spec
    assert spec is not None and mesh.authorizers is not None
    names = {f.name for f in spec.functions.values() if f.arn in mesh.authorizers.invocations}
    return names, {(principal, action) for principal, action, _ in mesh.proxy.used() if principal in names}
