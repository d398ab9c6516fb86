"""The REST API of the templates on ``127.0.0.1``: :class:`ApiFront` answers only the synthesized methods.

Requests are served under ``/{stage}`` (another first path segment: 403 ``Forbidden``). A path matches a resource
exactly (a trailing slash ignored), else the deepest ``{proxy+}`` resource above it; the resource's method for the
request's HTTP method, else its ``ANY``. No resource or no method: 403 ``{"message": "Missing Authentication
Token"}``, as API Gateway answers. ``AWS_IAM`` methods need a valid SigV4 signature (service ``execute-api``) of a
known principal whose policy allows ``execute-api:Invoke`` on the method's ARN, else 403 with API Gateway's message;
``NONE`` passes. ``CUSTOM`` methods run their Lambda authorizer first (:mod:`~asya_local.artifact.authorizers`,
given as ``authorizers``; a refusal answers as API Gateway does without calling the method); Cognito authorizers are
refused at start. The request then goes to the function's web server (the stage stripped, as a proxy integration
passes the path), and the response is relayed as it comes (SSE included: the integration streams).
:class:`SigningClient` is a test principal's client: it signs each plain request it receives and passes it to the
front, so a test suite written against a URL runs unchanged against an ``AWS_IAM`` API.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol
from urllib.parse import urlsplit

import httpx

from asya_local.artifact.authorizers import EdgeAuthorizers, check_supported
from asya_local.artifact.edgelimits import EdgeLimits, GatewayAnswer, TokenBucket
from asya_local.artifact.model import ApiMethod
from asya_local.artifact.sigv4 import MISSING_TOKEN, sign, verify
from asya_local.exceptions import LocalModeError

__all__ = ["ApiFront", "Principal", "RequestSigner", "SigningClient"]

_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "content-length",
    }
)
Send = Callable[[dict[str, Any]], Any]
Receive = Callable[[], Any]


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller of the API: its name, secret, and whether its policy allows ``execute-api:Invoke`` on an ARN."""

    name: str
    secret: str
    allows: Callable[[str], bool]


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


async def _respond(send: Send, status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> None:
    data = json.dumps(body).encode()
    extra = [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"x-amzn-errortype", b"ForbiddenException"), *extra],
        }
    )
    await send({"type": "http.response.body", "body": data})


async def _gateway_answer(send: Send, answer: GatewayAnswer) -> None:
    """A gateway response as API Gateway sends it: its status, static headers and JSON body."""
    headers = [(b"content-type", b"application/json")]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in answer.headers.items()]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": answer.body.encode()})


class _Relaying:
    """What both ASGI apps share: the ASGI entry point (the lifespan, then each HTTP request to ``_http``), and the
    relay of one request, a transport error answered 502. The relay client is closed at the lifespan's shutdown:
    its pooled keep-alive sockets would otherwise be collected unclosed (a ``ResourceWarning`` each)."""

    def __init__(self) -> None:
        self._client: httpx.AsyncClient | None = None

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        raise NotImplementedError

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        await send({"type": "lifespan.shutdown.complete"})

    async def _forward(
        self,
        send: Send,
        method: str,
        url: str,
        *,
        headers: Any,
        body: bytes,
        query: str,
        failed: Callable[[httpx.TransportError], str],
        answer_failure: Callable[[Send, httpx.TransportError], Awaitable[None]] | None = None,
    ) -> None:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(None, connect=10.0))
        request = self._client.build_request(method, url, headers=headers, content=body)
        if query:
            request.url = request.url.copy_with(query=query.encode("latin-1"))
        try:
            await _relay(self._client, request, send)
        except httpx.TransportError as exc:
            if answer_failure is not None:
                await answer_failure(send, exc)
            else:
                await _respond(send, 502, {"message": failed(exc)})


async def _relay(client: httpx.AsyncClient, request: httpx.Request, send: Send) -> None:
    response = await client.send(request, stream=True)
    try:
        headers = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in response.headers.multi_items()
            if k.lower() not in _HOP_BY_HOP
        ]
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        async for chunk in response.aiter_raw():
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
    finally:
        await response.aclose()


def _templated(wanted: str, paths: set[str]) -> str | None:
    """The resource whose ``{param}`` segments match ``wanted``'s, literal segments preferred level by level, as
    API Gateway routes (``/api/v1/mesh/{task_id}/events``)."""
    parts = wanted.split("/")
    best: tuple[tuple[bool, ...], str] | None = None
    for path in paths:
        segments = path.split("/")
        if len(segments) != len(parts) or path.endswith("{proxy+}") or "{" not in path:
            continue
        literal = tuple(not (s.startswith("{") and s.endswith("}")) for s in segments)
        matches = all(
            (lit and s == part) or (not lit and part) for lit, s, part in zip(literal, segments, parts, strict=True)
        )
        if matches and (best is None or literal > best[0]):
            best = (literal, path)
    return None if best is None else best[1]


class ApiFront(_Relaying):
    """ASGI app: API Gateway's routing and authorization in front of the functions' web servers."""

    def __init__(
        self,
        methods: list[ApiMethod],
        *,
        upstreams: Mapping[str, str],
        principals: Mapping[str, Principal],
        stage: str,
        api_arn: str,
        authorizers: EdgeAuthorizers | None = None,
        limits: EdgeLimits | None = None,
    ) -> None:
        """``limits``: the stage throttle and gateway responses to play (GW-OVL-6); none: unthrottled, AWS's
        default answers."""
        self._check(methods, upstreams, authorizers)
        super().__init__()
        self._methods = list(methods)
        self._upstreams = dict(upstreams)
        self._principals = dict(principals)
        self._stage = stage
        self._api_arn = api_arn
        self._authorizers = authorizers
        self._limits = limits or EdgeLimits()
        self._bucket = TokenBucket(self._limits.throttle) if self._limits.throttle is not None else None
        #: requests refused by the stage throttle
        self.throttled = 0
        self.denied: list[str] = []
        #: (function ARN, ``METHOD /path``) of every request passed to a function, in order
        self.relayed: list[tuple[str, str]] = []

    @staticmethod
    def _check(methods: list[ApiMethod], upstreams: Mapping[str, str], authorizers: EdgeAuthorizers | None) -> None:
        for method in methods:
            if method.authorization not in ("NONE", "AWS_IAM") and authorizers is not None:
                check_supported(method)
            elif method.authorization not in ("NONE", "AWS_IAM"):
                raise LocalModeError(
                    f"API method {method.http_method} {method.path}: authorization {method.authorization} is not "
                    "emulated by the artifact mesh"
                )
            if method.function not in upstreams:
                raise LocalModeError(f"API method {method.http_method} {method.path}: no function {method.function}")

    def reroute(self, methods: list[ApiMethod], *, upstreams: Mapping[str, str]) -> None:
        """Serve ``methods``, relayed to ``upstreams``, from the next request on (a stack update: a replaced web
        function listens elsewhere). The stage, its throttle and the principals stay."""
        self._check(methods, upstreams, self._authorizers)
        # each swapped whole: a request reads the old pair or the new one
        self._methods, self._upstreams = list(methods), dict(upstreams)

    def match(self, path: str, http_method: str) -> ApiMethod | None:
        wanted = path.rstrip("/") or "/"
        paths = {m.path for m in self._methods}
        resource = wanted if wanted in paths else _templated(wanted, paths)
        if resource is None:
            greedy = [p for p in paths if p.endswith("/{proxy+}")]
            above = [
                p for p in greedy if wanted.startswith(p.removesuffix("{proxy+}")) and wanted != p[: -len("/{proxy+}")]
            ]
            resource = max(above, key=len) if above else None
        if resource is None:
            return None
        on_resource = [m for m in self._methods if m.path == resource]
        exact = [m for m in on_resource if m.http_method == http_method.upper()]
        any_ = [m for m in on_resource if m.http_method == "ANY"]
        found = exact or any_
        return found[0] if found else None

    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        raw_path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        prefix = f"/{self._stage}"
        if not (raw_path == prefix or raw_path.startswith(prefix + "/")):
            await _respond(send, 403, {"message": "Forbidden"})
            return
        path = raw_path[len(prefix) :] or "/"
        method_name = scope["method"]
        method = self.match(path, method_name)
        body = await _read_body(receive)
        if method is None:
            await _respond(send, 403, {"message": MISSING_TOKEN})
            return
        if self._bucket is not None and not self._bucket.take():
            self.throttled += 1
            await _gateway_answer(send, self._limits.answer("THROTTLED"))
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        query = scope.get("query_string", b"").decode("latin-1")
        if method.authorization == "AWS_IAM":
            problem = self._authorize(
                method=method_name, raw_path=raw_path, path=path, query=query, headers=headers, body=body
            )
            if problem is not None:
                self.denied.append(f"{method_name} {path}: {problem}")
                await _respond(send, 403, {"message": problem})
                return
        authorized: Mapping[str, Any] | None = None
        if method.authorization == "CUSTOM" and self._authorizers is not None:
            verdict = await asyncio.to_thread(
                self._authorizers.check, method, http_method=method_name, path=path, query=query, headers=headers
            )
            if verdict.status is not None:
                await _respond(send, verdict.status, dict(verdict.body))
                return
            authorized = verdict.context
        upstream = self._upstreams[str(method.function)]
        self.relayed.append((str(method.function), f"{method_name} {path}"))
        forwarded = [(k, v) for k, v in scope["headers"] if k.decode("latin-1").lower() not in _HOP_BY_HOP]
        context: dict[str, Any] = {
            "requestId": f"local-{time.monotonic_ns()}",
            "stage": self._stage,
            "resourcePath": method.path,
        }
        if authorized is not None:
            context["authorizer"] = dict(authorized)
        forwarded.append((b"x-amzn-request-context", json.dumps(context).encode()))
        await self._forward(
            send,
            method_name,
            f"{upstream}{path}",
            headers=forwarded,
            body=body,
            query=query,
            failed=lambda exc: f"Internal server error ({type(exc).__name__})",
            answer_failure=lambda reply, _exc: _gateway_answer(reply, self._limits.answer("INTEGRATION_FAILURE")),
        )

    def _authorize(
        self, *, method: str, raw_path: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> str | None:
        def secret_of(key: str) -> str | None:
            principal = self._principals.get(key)
            return principal.secret if principal else None

        key, problem = verify(
            method=method, path=raw_path, query=query, headers=headers, body=body, secret_of=secret_of
        )
        if problem is not None:
            return problem
        assert key is not None
        arn = f"{self._api_arn}/{self._stage}/{method.upper()}/{path.lstrip('/')}"
        if not self._principals[key].allows(arn):
            name = self._principals[key].name
            return f"User: {name} is not authorized to perform: execute-api:Invoke on resource: {arn}"
        return None


class RequestSigner(Protocol):
    """Signs one request: the headers to add (``authorization``, ``x-amz-date``, ...)."""

    def __call__(
        self, *, method: str, host: str, path: str, query: str, headers: Mapping[str, str], body: bytes
    ) -> Mapping[str, str]: ...


class SigningClient(_Relaying):
    """ASGI app: signs every request it gets with one principal's credentials and relays it to ``upstream``.

    ``signer`` replaces the built-in signature with the static ``access_key_id``/``secret`` (the test suite's real-AWS
    target signs with a botocore session's credentials, session token included)."""

    def __init__(
        self,
        upstream: str,
        *,
        access_key_id: str = "",
        secret: str = "",
        region: str,
        signer: RequestSigner | None = None,
    ) -> None:
        super().__init__()
        self._upstream = upstream.rstrip("/")
        self._host = urlsplit(upstream).netloc
        self._key = access_key_id
        self._secret = secret
        self._region = region
        self._signer = signer

    def _sign(self, method: str, path: str, query: str, headers: Mapping[str, str], body: bytes) -> Mapping[str, str]:
        if self._signer is not None:
            return self._signer(method=method, host=self._host, path=path, query=query, headers=headers, body=body)
        return sign(
            method=method,
            host=self._host,
            path=path,
            query=query,
            headers=headers,
            body=body,
            access_key_id=self._key,
            secret=self._secret,
            region=self._region,
        )

    async def _http(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        body = await _read_body(receive)
        raw_path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        query = scope.get("query_string", b"").decode("latin-1")
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in scope["headers"]
            if k.decode("latin-1").lower() not in _HOP_BY_HOP | {"host", "authorization", "x-amz-date"}
        ]
        plain = {k.lower(): v for k, v in headers}
        signed = self._sign(scope["method"], raw_path, query, plain, body)
        await self._forward(
            send,
            scope["method"],
            f"{self._upstream}{raw_path}",
            headers=[*headers, *signed.items()],
            body=body,
            query=query,
            failed=lambda exc: f"signing client: {exc}",
        )
