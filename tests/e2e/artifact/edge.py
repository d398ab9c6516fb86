"""What the edge-auth modules of the artifact suite share (test_artifact_edge_auth.py for ``jwt``,
test_artifact_edge_apikey.py for ``api_key``; the example's suite reads the reporter secret the same way; the upgrade
crossing test signs its principals' tokens with :class:`JwksIssuer`)."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import boto3
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

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


class JwksIssuer:
    """An OIDC issuer's JWKS on loopback, with the key that signs a module's tokens. ``port``: the one to listen on
    when it is free (the URL is then the same each run, and so is the assembly that names it), else any."""

    def __init__(self, *, issuer: str, audience: str, port: int = 0) -> None:
        self.issuer, self.audience = issuer, audience
        self.key = RSAKey.generate_key(2048, parameters={"kid": "edge-1"})
        body = json.dumps(KeySet([self.key]).as_dict(private=False)).encode()

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server: ThreadingHTTPServer | None = None
        if port:
            with contextlib.suppress(OSError):
                server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self._server = server or ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="asya-edge-jwks", daemon=True)
        self.jwks_url = f"http://127.0.0.1:{self._server.server_address[1]}/.well-known/jwks.json"

    def __enter__(self) -> JwksIssuer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def token(self, key: Any = None, **claims: Any) -> str:
        now = int(time.time())
        body = {"iss": self.issuer, "aud": self.audience, "sub": "edge-user", "iat": now, "exp": now + 600, **claims}
        signer = key or self.key
        return jwt.encode({"alg": "RS256", "kid": "edge-1"}, body, signer)
