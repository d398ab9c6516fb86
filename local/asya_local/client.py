"""A small HTTP client of the gateway's REST routes (docs/http.md) and of ``asya dev``'s run history, used
by the CLI.

Every call raises :class:`GatewayUnreachableError` when nothing listens at the URL and :class:`GatewayHttpError`
carrying the ``{"error": ...}`` message for any error status. ``auth`` (``asya_local.auth.gateway_auth``) signs or
tags every request, SSE reconnects included.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from asya_local.exceptions import GatewayHttpError, GatewayUnreachableError
from asya_local.sse import SseStream, error_message, unreachable

__all__ = ["GatewayClient"]

#: Reads may block between SSE keepalives (every 15 s, GW-SSE-9); a longer silence means the connection is dead.
_TIMEOUT = httpx.Timeout(10.0, read=30.0)
#: A create is sent at most this often, with the same Idempotency-Key (GW-CREATE-R3-6), 0.5 s more apart each time.
_CREATE_ATTEMPTS = 4
_CREATE_BACKOFF = 0.5
#: a first attempt still being created (409), or a gateway cut mid-create (5xx): the same key is safe to send again
_CREATE_RETRY_STATUSES = frozenset({409, 500, 502, 503, 504})


class GatewayClient:
    """REST calls against one gateway base URL (``http://127.0.0.1:8080``)."""

    def __init__(self, url: str, *, http: httpx.Client | None = None, auth: httpx.Auth | None = None) -> None:
        self.url = url.rstrip("/")
        self._http = http or httpx.Client(timeout=_TIMEOUT, auth=auth)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GatewayClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def create(
        self,
        *,
        flow: str | None = None,
        actor: str | None = None,
        payload: Any = None,
        timeout: int | None = None,
        headers: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """``POST /api/v1/mesh/?flow=`` or ``?actor=``; returns ``{"id", "status", "deadline_at"?}`` (GW-CREATE-9).

        Every create carries an ``Idempotency-Key`` (GW-CREATE-R3-6; a fresh UUID4 unless given), so a connection cut
        before the answer, a 409 while the first attempt is still being created, or a 5xx (a gateway cut mid-create)
        is retried without a second task (GW-CREATE-R3-6, GW-CREATE-R3-7)."""
        params = {"flow": flow} if flow is not None else {"actor": actor or ""}
        body: dict[str, Any] = {"payload": payload}
        if timeout is not None:
            body["timeout"] = timeout
        if headers:
            body["headers"] = headers
        key = {"Idempotency-Key": idempotency_key or str(uuid.uuid4())}
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            try:
                response = self._request("POST", "/api/v1/mesh/", params=params, json=body, headers=key)
            except GatewayUnreachableError:
                if attempt == _CREATE_ATTEMPTS:
                    raise
            except GatewayHttpError as exc:
                if exc.status_code not in _CREATE_RETRY_STATUSES or attempt == _CREATE_ATTEMPTS:
                    raise
            else:
                return self._json(response)
            time.sleep(_CREATE_BACKOFF * attempt)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def get(self, task_id: str) -> dict[str, Any]:
        """``GET /api/v1/mesh/{id}``: the task view (GW-TASK-1)."""
        return self._json(self._request("GET", f"/api/v1/mesh/{quote(task_id, safe='')}"))

    def resume(self, task_id: str, value: dict[str, Any], *, timeout: int | None = None) -> dict[str, Any]:
        """``POST /api/v1/mesh/{id}/resume`` (GW-RESUME-1..4); returns ``{"id", "status", "deadline_at"}``."""
        body: dict[str, Any] = {"input": value}
        if timeout is not None:
            body["timeout"] = timeout
        return self._json(self._request("POST", f"/api/v1/mesh/{quote(task_id, safe='')}/resume", json=body))

    def signal(self, task_id: str, event: str, data: Any = None) -> dict[str, Any]:
        """``POST /api/v1/mesh/{id}/signal`` (GW-SIGNAL-1..4): ``{"id", "event", "delivered", "status", ...}``."""
        body = {"event": event, "data": data}
        return self._json(self._request("POST", f"/api/v1/mesh/{quote(task_id, safe='')}/signal", json=body))

    def list(
        self, *, status: str | None = None, flow: str | None = None, limit: int | None = None, cursor: str | None = None
    ) -> dict[str, Any]:
        """``GET /api/v1/mesh/``: ``{"messages", "total", "next_cursor"}``, newest first (GW-LIST-1, GW-LIST-2)."""
        params = {
            name: str(value)
            for name, value in (("status", status), ("flow", flow), ("limit", limit), ("cursor", cursor))
            if value is not None
        }
        return self._json(self._request("GET", "/api/v1/mesh/", params=params))

    def cancel(self, task_id: str) -> None:
        """``DELETE /api/v1/mesh/{id}``: 204 whether or not the task was still running (GW-CANCEL-1)."""
        self._request("DELETE", f"/api/v1/mesh/{quote(task_id, safe='')}")

    def history(self, task_id: str) -> dict[str, Any]:
        """``GET /api/v1/mesh/{id}/history``: the run history recorded in S3 (GW-HIST-1), in AWS for a flow with
        ``history: steps``, locally for every task (P-HIST-10)."""
        return self._json(self._request("GET", f"/api/v1/mesh/{quote(task_id, safe='')}/history"))

    def retry(self, task_id: str, *, step: str | None = None, timeout: int | None = None) -> dict[str, Any]:
        """``POST /api/v1/mesh/{id}/retry`` (GW-HIST-2): a new task from a finished one, from ``step`` when given."""
        body: dict[str, Any] = {}
        if step is not None:
            body["from"] = step
        if timeout is not None:
            body["timeout"] = timeout
        return self._json(self._request("POST", f"/api/v1/mesh/{quote(task_id, safe='')}/retry", json=body))

    def download(self, url: str) -> bytes:
        """The body of ``url`` (a presigned ``payload_url`` of a task view), with no gateway credentials attached."""
        try:
            response = httpx.get(url, timeout=_TIMEOUT)
        except httpx.TransportError as exc:
            raise unreachable(url, exc) from exc
        if response.status_code >= 400:
            raise GatewayHttpError(response.status_code, error_message(response), url)
        return response.content

    def agent_card(self) -> dict[str, Any]:
        """``GET /.well-known/agent-card.json``: the A2A agent card (GW-A2A-1)."""
        return self._json(self._request("GET", "/.well-known/agent-card.json"))

    def health(self) -> dict[str, Any]:
        return self._json(self._request("GET", "/health"))

    def events(self, task_id: str, *, last_event_id: str | None = None) -> SseStream:
        """The task's SSE stream (GW-SSE-1..11), reconnecting with ``Last-Event-ID``."""
        return SseStream(
            self._http, f"{self.url}/api/v1/mesh/{quote(task_id, safe='')}/events", last_event_id=last_event_id
        )

    def watch(self, task_ids: Sequence[str], *, last_event_id: str | None = None) -> SseStream:
        """Many tasks' events over one SSE stream (``GET /api/v1/mesh/events?ids=``, GW-SSE-20..27); every event's data
        carries ``task_id``; it ends once every task has ended."""
        ids = ",".join(quote(task_id, safe="") for task_id in task_ids)
        return SseStream(
            self._http, f"{self.url}/api/v1/mesh/events?ids={ids}", last_event_id=last_event_id, multiplexed=True
        )

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        url = f"{self.url}{path}"
        try:
            response = self._http.request(method, url, **kwargs)
        except httpx.TransportError as exc:
            raise unreachable(self.url, exc) from exc
        if response.status_code >= 400:
            raise GatewayHttpError(response.status_code, error_message(response), url)
        return response

    @staticmethod
    def _json(response: httpx.Response) -> dict[str, Any]:
        try:
            body = response.json()
        except ValueError:
            raise GatewayHttpError(response.status_code, "the gateway answered with a body that is not JSON") from None
        if not isinstance(body, dict):
            raise GatewayHttpError(response.status_code, "the gateway answered with a JSON body that is not an object")
        return body
