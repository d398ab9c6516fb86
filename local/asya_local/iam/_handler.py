"""The proxy's per-connection HTTP handler: read, check, forward or deny, relay (see :mod:`asya_local.iam.proxy`)."""

from __future__ import annotations

import dataclasses
import http
import http.client
from http.server import BaseHTTPRequestHandler
from typing import Final, Protocol
from urllib.parse import parse_qs, urlsplit

from asya_local.iam.denials import denial_response
from asya_local.iam.faults import FaultRules, fault_answer
from asya_local.iam.model import MISSING_KEY, UNMODELLED, AccessRecord, RequestContext
from asya_local.iam.policy import Decision, PolicySet
from asya_local.iam.requests import authorize_request
from asya_local.iam.sigv4 import Credential, credential_of

__all__ = ["HandlerOwner", "make_handler"]

_HOP_BY_HOP: Final = frozenset(
    {"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding"}
    | {"upgrade", "expect", "content-length"}
)
#: Long enough for an SQS long poll (20 s at most) with a margin.
_UPSTREAM_TIMEOUT: Final = 120.0
_Response = tuple[int, str, list[tuple[str, str]], bytes]
#: SigV4 signing names that differ from the service's IAM action prefix.
_IAM_PREFIX: Final = {"monitoring": "cloudwatch", "email": "ses"}


class HandlerOwner(Protocol):
    """What a handler asks of the proxy that owns it (``asya_local.iam.proxy.PolicyProxy``): its principals, its
    decisions and records, where moto is, and the words of a denial."""

    region: str
    account_id: str

    def principal_of(self, credential: Credential | None) -> tuple[str, PolicySet] | None: ...

    def judge(self, principal: str, policies: PolicySet, checks: list[RequestContext]) -> list[AccessRecord]: ...

    def record(self, records: list[AccessRecord]) -> None: ...

    def upstream(self) -> tuple[str, int]: ...

    def secret_arn(self, secret_id: str) -> str | None: ...

    def deny_message(self, record: AccessRecord) -> str: ...

    @property
    def faults(self) -> FaultRules: ...


def make_handler(proxy: HandlerOwner) -> type[BaseHTTPRequestHandler]:
    """A handler class bound to ``proxy`` (one instance per client connection)."""

    class _Handler(_ProxyHandler):
        owner = proxy

    return _Handler


class _ProxyHandler(BaseHTTPRequestHandler):
    owner: HandlerOwner
    protocol_version = "HTTP/1.1"  # keep-alive, as botocore's pooled connections expect
    # Headers and body go out in separate writes: with Nagle's algorithm on, the client's delayed ACK held every
    # answer some 40 ms (measured: a moto GetItem took 62 ms through the proxy instead of 20 ms).
    disable_nagle_algorithm = True
    _upstream: http.client.HTTPConnection | None = None

    def log_message(self, format: str, *args: object) -> None:
        return  # the records are the log

    def do_GET(self) -> None:
        self._handle()

    def finish(self) -> None:
        # The client closed its connection: close this handler's connection to moto with it.
        if self._upstream is not None:
            self._upstream.close()
            self._upstream = None
        super().finish()

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET  # noqa: N815 - http.server's names

    def _handle(self) -> None:
        body = self._read_body()
        headers = {name.lower(): value for name, value in self.headers.items()}
        url = f"http://{headers.get('host', '127.0.0.1')}{self.path}"
        credential = credential_of(headers, url)
        known = self.owner.principal_of(credential)
        if credential is None or known is None:
            self._relay_forwarded(body)
            return
        principal, policies = known
        proxy = self.owner
        checks = authorize_request(
            self.command,
            url,
            headers,
            body,
            region=proxy.region,
            account_id=proxy.account_id,
            resolve_secret=proxy.secret_arn,
        )
        if checks is None:
            service = _IAM_PREFIX.get(credential.service, credential.service)
            action = f"{service}:{_operation_hint(self.command, url, headers, body)}"
            record = AccessRecord(principal, service, action, "*", Decision.IMPLICIT_DENY, UNMODELLED)
            proxy.record([record])
            self._deny(credential, headers, record)
            return
        judged = proxy.judge(principal, policies, checks)
        proxy.record(judged)
        refused = next((record for record in judged if not record.decision.allowed), None)
        if refused is not None:
            self._deny(credential, headers, refused)
            return
        fault = proxy.faults.take(principal, [check.action for check in checks])
        if fault is not None:
            answer = fault_answer(credential.service, "x-amz-target" in headers, fault)
            self._relay(
                (answer.status, http.HTTPStatus(answer.status).phrase, list(answer.headers.items()), answer.body)
            )
            return
        response = self._forward_or_502(body)
        if response is None:
            return
        missing = _missing_key_check(checks, response, self.command)
        if missing is not None:
            listed = dataclasses.replace(proxy.judge(principal, policies, [missing])[0], note=MISSING_KEY)
            proxy.record([listed])
            if not listed.decision.allowed:
                self._deny(credential, headers, listed)
                return
        self._relay(response)

    def _relay_forwarded(self, body: bytes) -> None:
        response = self._forward_or_502(body)
        if response is not None:
            self._relay(response)

    def _forward_or_502(self, body: bytes) -> _Response | None:
        """moto's answer; when moto cannot be reached, a 502 naming it is sent instead and ``None`` returned."""
        try:
            return self._forward(body)
        except OSError as exc:
            host, port = self.owner.upstream()
            message = f"the IAM proxy cannot reach moto at {host}:{port}: {exc}".encode()
            self._relay((502, "Bad Gateway", [("Content-Type", "text/plain")], message))
            return None

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _forward(self, body: bytes) -> _Response:
        has_body = bool(body) or "Content-Length" in self.headers or "Transfer-Encoding" in self.headers
        for attempt in range(2):
            reused = self._upstream is not None
            if self._upstream is None:
                host, port = self.owner.upstream()
                self._upstream = http.client.HTTPConnection(host, port, timeout=_UPSTREAM_TIMEOUT)
            connection = self._upstream
            try:
                connection.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in _HOP_BY_HOP:
                        connection.putheader(name, value)
                if has_body:
                    connection.putheader("Content-Length", str(len(body)))
                connection.endheaders(body if body else None)
                answer = connection.getresponse()
                data = answer.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                # A kept-alive connection moto closed meanwhile: the request never reached it, so one retry is safe.
                connection.close()
                self._upstream = None
                if attempt or not reused:
                    raise
                continue
            if answer.will_close:
                connection.close()
                self._upstream = None
            return answer.status, answer.reason, answer.getheaders(), data
        raise AssertionError("unreachable")  # pragma: no cover

    def _relay(self, response: _Response) -> None:
        status, reason, headers, body = response
        self.send_response_only(status, reason)
        length: str | None = None
        for name, value in headers:
            lowered = name.lower()
            if lowered == "content-length":
                length = value
            elif lowered not in _HOP_BY_HOP:
                self.send_header(name, value)
        if self.command == "HEAD":
            self.send_header("Content-Length", length if length is not None else "0")
            self.end_headers()
            return
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _deny(self, credential: Credential, headers: dict[str, str], record: AccessRecord) -> None:
        message = self.owner.deny_message(record)
        denial = denial_response(credential.service, self.command, "x-amz-target" in headers, message)
        reason = http.HTTPStatus(denial.status).phrase
        self._relay((denial.status, reason, list(denial.headers.items()), denial.body))


def _missing_key_check(checks: list[RequestContext], response: _Response, method: str) -> RequestContext | None:
    """S3's missing-key rule: the ``s3:ListBucket`` check a 404 to GetObject/HeadObject must pass to stay a 404."""
    status, _, _, body = response
    if status != 404 or len(checks) != 1:
        return None
    check = checks[0]
    if check.service != "s3" or check.operation not in ("GetObject", "HeadObject"):
        return None
    if method != "HEAD" and b"<Code>NoSuchKey</Code>" not in body:
        return None  # NoSuchBucket and the like say nothing about the key
    bucket = check.resources[0].removeprefix("arn:aws:s3:::").split("/", 1)[0]
    return RequestContext("s3", "s3:ListBucket", (f"arn:aws:s3:::{bucket}",), check.context, check.operation)


def _operation_hint(method: str, url: str, headers: dict[str, str], body: bytes) -> str:
    """A name for a request nothing models, for its record: the JSON target, the query ``Action``, or method + path."""
    target = headers.get("x-amz-target", "")
    if "." in target:
        return target.rsplit(".", 1)[1]
    parts = urlsplit(url)
    action = parse_qs(parts.query).get("Action")
    if not action and body and "json" not in headers.get("content-type", ""):
        action = parse_qs(body.decode("utf-8", "replace")).get("Action")
    return action[0] if action else f"{method} {parts.path}"
