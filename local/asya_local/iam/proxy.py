"""A policy-checking HTTP proxy in front of moto's server: every call a known principal makes is held to its policies.

``PolicyProxy(upstream_url, principals, region=..., account_id=...)`` listens on ``127.0.0.1`` (port 0) and forwards
each request unchanged (method, path and query, headers but the hop-by-hop ones, body; a chunked body is buffered and
sent with its length) to ``upstream_url``, relaying the answer. ``principals`` maps an access key id to
``(principal name, PolicySet)``:

- A request signed with a key not in ``principals`` (the test harness, the mesh's own provisioning) or not signed at
  all passes through unchecked and unrecorded.
- For a known key, :func:`asya_local.iam.requests.authorize_request` names the checks; each (action, resource) is
  evaluated and recorded as an :class:`AccessRecord`. If any is denied, moto never sees the request: the caller gets
  AWS's denial for that service (:mod:`asya_local.iam.denials`). A request that is not modelled is denied and recorded
  with ``statement="unmodelled"``, so nothing passes unchecked. ``sts:GetCallerIdentity`` is always allowed.
- S3's rule for a missing object (Amazon S3 API Reference, GetObject and HeadObject, "Permissions"): when the object
  does not exist, S3 answers 404 only if the caller also has ``s3:ListBucket`` on the bucket, else 403. So when moto
  answers 404 to a checked principal's GetObject or HeadObject, ``s3:ListBucket`` on the bucket ARN is evaluated with
  the GetObject request's own context, which has no ``s3:prefix`` (a ListBucket grant conditioned on ``s3:prefix``
  does not apply), and recorded; denied, the answer becomes S3's 403 ``AccessDenied``.
- Secrets Manager authorizes a secret by its full ARN, random suffix included: for a ``SecretId`` given by name the
  proxy asks moto for that ARN (``DescribeSecret``, outside any principal's policy, as AWS resolves it internally),
  so a grant on ``secret:<name>-??????`` is judged as AWS judges it.

Records are kept in arrival order under a lock; the server is threaded (one thread per client connection, each with
its own keep-alive connection to moto).
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from asya.awsclients import LOCAL_BUDGET, aws_client
from asya_local.iam._handler import make_handler
from asya_local.iam.denials import denial_message
from asya_local.iam.faults import FaultRules
from asya_local.iam.model import ALWAYS_ALLOWED, UNMODELLED, AccessRecord, RequestContext
from asya_local.iam.policy import Decision, Evaluation, PolicySet
from asya_local.iam.sigv4 import Credential

__all__ = ["PolicyProxy", "ProxyError"]


class ProxyError(RuntimeError):
    """The proxy was used in a state it cannot serve (not started, or bad upstream URL)."""


class _Server(ThreadingHTTPServer):
    """A thread per client connection; ``close_connections`` ends the kept-alive ones, so nothing is served after
    ``stop()`` (a kept-alive connection would otherwise go on being served by its thread)."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            open_now = list(self._open)
        for connection in open_now:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class PolicyProxy:
    """Holds each known principal's calls to moto to its own policies. A context manager, or ``start``/``stop``."""

    def __init__(
        self,
        upstream_url: str,
        principals: Mapping[str, tuple[str, PolicySet]],
        *,
        region: str,
        account_id: str,
    ) -> None:
        upstream = urlsplit(upstream_url)
        if upstream.scheme != "http" or not upstream.hostname or upstream.port is None:
            raise ProxyError(f"upstream_url must be http://HOST:PORT (moto's server), got {upstream_url!r}")
        self._upstream = (upstream.hostname, upstream.port)
        self._principals = dict(principals)
        self.region = region
        self.account_id = account_id
        self._records: list[AccessRecord] = []
        self._used: set[tuple[str, str, str]] = set()
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._secrets: Any = None
        self._faults = FaultRules()

    @property
    def url(self) -> str:
        if self._server is None:
            raise ProxyError("the IAM proxy is not running: call start() first")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> str:
        """Listen on ``127.0.0.1`` (a free port) and answer the proxy's URL."""
        if self._server is None:
            server = _Server(("127.0.0.1", 0), make_handler(self))
            self._server = server
            self._thread = threading.Thread(target=server.serve_forever, name="asya-iam-proxy", daemon=True)
            self._thread.start()
        return self.url

    def stop(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
            server.close_connections()
        if thread is not None:
            thread.join()

    def __enter__(self) -> PolicyProxy:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def records(self) -> list[AccessRecord]:
        with self._lock:
            return list(self._records)

    def denied(self) -> list[AccessRecord]:
        return [record for record in self.records() if not record.decision.allowed]

    def clear(self) -> None:
        with self._lock:
            self._records.clear()

    def set_principal(self, access_key_id: str, name: str, policies: PolicySet) -> None:
        """Hold ``access_key_id``'s calls to ``policies`` under ``name`` from the next request on (a new key, or a
        known one whose policies change: a test that drops one grant, then restores it)."""
        with self._lock:
            # a new mapping swapped in whole: a request in flight reads the old one or the new one, never a mix
            self._principals = {**self._principals, access_key_id: (name, policies)}

    # --- used by the request handler ---

    def principal_of(self, credential: Credential | None) -> tuple[str, PolicySet] | None:
        return None if credential is None else self._principals.get(credential.access_key_id)

    def record(self, records: list[AccessRecord]) -> None:
        with self._lock:
            self._records.extend(records)
            self._used.update((r.principal, r.action, r.resource) for r in records if r.decision.allowed)

    def used(self) -> set[tuple[str, str, str]]:
        """Every allowed ``(principal, action, resource)`` since the start: ``clear()`` keeps it (the drift check of
        the whole suite reads it at the end)."""
        with self._lock:
            return set(self._used)

    @property
    def faults(self) -> FaultRules:
        """The fault rules (``asya_local.iam.faults``): ``proxy.faults.add(FaultRule(...))`` makes the next
        matching allowed calls fail as AWS throttling does."""
        return self._faults

    def judge(self, principal: str, policies: PolicySet, checks: list[RequestContext]) -> list[AccessRecord]:
        """Every (action, resource) of ``checks``, evaluated (not yet recorded)."""
        judged: list[AccessRecord] = []
        for check in checks:
            for resource in check.resources:
                if check.action in ALWAYS_ALLOWED:
                    evaluation = Evaluation(Decision.ALLOW, "always-allowed")
                else:
                    evaluation = policies.explain(check.action, resource, check.context)
                judged.append(
                    AccessRecord(
                        principal,
                        check.service,
                        check.action,
                        resource,
                        evaluation.decision,
                        evaluation.statement,
                        check.operation,
                    )
                )
        return judged

    def upstream(self) -> tuple[str, int]:
        return self._upstream

    def secret_arn(self, secret_id: str) -> str | None:
        """The full ARN of the secret named ``secret_id``, from moto; ``None`` when there is no such secret."""
        from botocore.exceptions import ClientError

        with self._lock:
            if self._secrets is None:
                import boto3

                host, port = self._upstream
                # a key no principal has: moto's own view, unchecked, as AWS resolves a name before it authorizes
                self._secrets = aws_client(
                    "secretsmanager",
                    LOCAL_BUDGET,
                    session=boto3.Session(),
                    region_name=self.region,
                    endpoint_url=f"http://{host}:{port}",
                    aws_access_key_id="proxy-resolver",
                    aws_secret_access_key="proxy-resolver",
                )
            client = self._secrets
        try:
            return str(client.describe_secret(SecretId=secret_id)["ARN"])
        except ClientError as exc:
            if exc.response["Error"]["Code"] == "ResourceNotFoundException":
                return None
            raise

    def deny_message(self, record: AccessRecord) -> str:
        if record.statement == UNMODELLED:
            why = "the local IAM proxy does not model this request, so it cannot be allowed"
        elif record.decision is Decision.EXPLICIT_DENY:
            why = f"of an explicit deny in an identity-based policy (statement {record.statement})"
        else:
            why = f"no identity-based policy allows the {record.action} action"
        return denial_message(record.principal, self.account_id, record.action, record.resource, why)
