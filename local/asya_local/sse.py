"""A Server-Sent Events client over httpx: the line parser of the WHATWG EventSource spec and a reconnecting stream.

``SseParser.feed(line)`` consumes one line (without its end-of-line) and returns an :class:`SseEvent` when a blank line
completes an event with data. Fields: ``id`` (unless it contains NUL; it becomes ``last_event_id`` when its event is
dispatched, as EventSource's last event ID buffer does, so an event cut off by a dropped connection is asked for again
rather than skipped), ``event`` (default ``message``), ``data`` (lines joined with ``\\n``), ``retry`` (digits only,
milliseconds); lines starting with ``:`` are comments (the gateway's ``:keepalive``); unknown fields are ignored.

``SseStream(client, url).events()`` yields the events of ``GET url`` (GW-SSE-1..11). When the connection drops
or the server ends the response before a terminal status (GW-SSE-9: at 840 s), it reconnects after the server's
``retry`` delay with ``Last-Event-ID`` set to the last id seen, so nothing is lost or repeated (GW-SSE-5). It stops
after a live ``status`` event (one with an id) whose status is terminal (GW-SSE-7), at the end of the response whose
catch-up status (no id) was terminal, after the replay of the task's partial output (GW-SSE-6), or on a 204 answer
(GW-SSE-8). A ``multiplexed`` stream (``?ids=``, GW-SSE-20) follows many tasks: it does not stop at a terminal status,
only on the 204 that answers its reconnection once every task has ended. Other answers raise
:class:`GatewayHttpError`; no server at all raises :class:`GatewayUnreachableError`; ``max_retries`` consecutive
failed reconnects raise :class:`SseStreamError`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final

import httpx

from asya_local.exceptions import GatewayHttpError, GatewayUnreachableError, SseStreamError

__all__ = [
    "TERMINAL_STATUSES",
    "SseEvent",
    "SseParser",
    "SseStream",
    "error_message",
    "event_status",
    "parse_lines",
    "terminal_status",
    "unreachable",
]

TERMINAL_STATUSES: Final = frozenset({"succeeded", "failed", "canceled"})
_DEFAULT_RETRY_MS: Final = 1000


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event. ``id`` is the id line of this event, ``None`` when it had none."""

    event: str = "message"
    data: str = ""
    id: str | None = None
    retry: int | None = None

    def json(self) -> Any:
        return json.loads(self.data)


class SseParser:
    """Incremental line parser. ``last_event_id`` and ``retry`` persist across events, as in EventSource."""

    def __init__(self) -> None:
        self.last_event_id: str | None = None
        self.retry: int | None = None
        self._reset()

    def discard(self) -> None:
        """Forget a partly read event: a new connection starts a new stream (its catch-up must not take an id
        line of a connection cut mid-event)."""
        self._reset()

    def _reset(self) -> None:
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._retry: int | None = None

    def feed(self, line: str) -> SseEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._id = value
        elif name == "retry" and value.isdigit():
            self._retry = int(value)
            self.retry = self._retry
        return None

    def _dispatch(self) -> SseEvent | None:
        if self._id is not None:
            self.last_event_id = self._id
        if not self._data:
            self._reset()
            return None
        event = SseEvent(event=self._event or "message", data="\n".join(self._data), id=self._id, retry=self._retry)
        self._reset()
        return event


def parse_lines(lines: Iterable[str]) -> Iterator[SseEvent]:
    """Events from an iterable of lines (an incomplete trailing event is dropped, as the spec requires)."""
    parser = SseParser()
    for line in lines:
        event = parser.feed(line)
        if event is not None:
            yield event


def event_status(event: SseEvent) -> str | None:
    """The status a ``status`` event carries, else ``None``."""
    if event.event != "status":
        return None
    try:
        data = event.json()
    except ValueError:
        return None
    status = data.get("status") if isinstance(data, dict) else None
    return status if isinstance(status, str) else None


def terminal_status(event: SseEvent) -> str | None:
    """The status of a ``status`` event when it is terminal, else ``None``."""
    status = event_status(event)
    return status if status in TERMINAL_STATUSES else None


def error_message(response: httpx.Response) -> str:
    """The ``{"error": ...}`` message of an error response; API Gateway's own ``{"message": ...}`` (a request it
    refused before the gateway saw it, e.g. a missing IAM signature, GW-AUTH-3) with the status line; else the status
    line."""
    try:
        body = response.json()
    except ValueError:
        body = None
    status = f"{response.status_code} {response.reason_phrase}".strip()
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    if isinstance(body, dict) and isinstance(body.get("message"), str):
        return f"{status}: {body['message']}"
    return status


class SseStream:
    """Follows one SSE URL across reconnects until a terminal status or a 204."""

    def __init__(
        self,
        client: httpx.Client,
        url: str,
        *,
        last_event_id: str | None = None,
        max_retries: int = 5,
        sleep: Callable[[float], None] = time.sleep,
        multiplexed: bool = False,
    ) -> None:
        self._multiplexed = multiplexed
        self._client = client
        self._url = url
        self._parser = SseParser()
        self._parser.last_event_id = last_event_id
        self._max_retries = max_retries
        self._sleep = sleep
        self.reconnects = 0

    @property
    def last_event_id(self) -> str | None:
        return self._parser.last_event_id

    def events(self) -> Iterator[SseEvent]:
        failures = 0
        connected_once = False
        while True:
            headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
            if self._parser.last_event_id is not None:
                headers["Last-Event-ID"] = self._parser.last_event_id
            received = ended = False
            self._parser.discard()
            try:
                with self._client.stream("GET", self._url, headers=headers) as response:
                    connected_once = True
                    if response.status_code == 204:
                        return
                    if response.status_code != 200:
                        response.read()
                        raise GatewayHttpError(response.status_code, error_message(response), self._url)
                    for line in response.iter_lines():
                        event = self._parser.feed(line)
                        if event is None:
                            continue
                        received = True
                        yield event
                        if not self._multiplexed and terminal_status(event) is not None:
                            if event.id is not None:
                                return
                            # a terminal catch-up: the replay of the task's partial output follows (GW-SSE-6)
                            ended = True
                    if ended:
                        return
            except httpx.ConnectError as exc:
                if not connected_once:
                    raise unreachable(_origin(self._url), exc) from exc
            except httpx.TransportError:
                pass
            # A response that ended normally after some events is the server's periodic close (GW-SSE-9).
            failures = 0 if received else failures + 1
            if failures > self._max_retries:
                raise SseStreamError(f"lost the event stream {self._url} after {self._max_retries} reconnects")
            self.reconnects += 1
            self._sleep((self._parser.retry or _DEFAULT_RETRY_MS) / 1000)


def _origin(url: str) -> str:
    parsed = httpx.URL(url)
    return str(parsed.copy_with(path="/", query=None, fragment=None)).rstrip("/")


def unreachable(url: str, exc: httpx.TransportError) -> GatewayUnreachableError:
    """The error for a request to the gateway at ``url`` that got no HTTP answer."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return GatewayUnreachableError(url)
        cause = cause.__cause__ or cause.__context__
    return GatewayUnreachableError(url, str(exc) or type(exc).__name__)
