"""The SSE parser and the reconnecting SSE client of the CLI (GATEWAY section 7, GW-SSE-2 .. GW-SSE-8)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import httpx
import pytest

from asya_local.exceptions import GatewayHttpError, GatewayUnreachableError, SseStreamError
from asya_local.sse import SseEvent, SseParser, SseStream, parse_lines, terminal_status

pytestmark = pytest.mark.unit

TASK = "5b7e0c2a-8f0e-4d51-9a57-2f1d1c6b9e10"
URL = f"http://gw.test/api/v1/mesh/{TASK}/events"


def _status(status: str, percent: float = 50.0) -> str:
    return json.dumps({"id": TASK, "status": status, "progress_percent": percent}, separators=(",", ":"))


TRANSCRIPT = f"""retry: 1000
event: status
data: {_status("running", 36.7)}

id: 6
event: status
data: {_status("running", 50.0)}

:keepalive

id: 10
event: fly
data: {{"payload":"A friendly","actor":"summarize","envelope_id":"{TASK}"}}

id: 13
event: status
data: {_status("succeeded", 100)}

"""


def test_gw_sse_2_parses_the_gateway_transcript() -> None:
    events = list(parse_lines(TRANSCRIPT.split("\n")))
    assert [(e.event, e.id) for e in events] == [("status", None), ("status", "6"), ("fly", "10"), ("status", "13")]
    assert events[0].retry == 1000
    assert events[1].retry is None
    assert events[2].json()["payload"] == "A friendly"
    assert terminal_status(events[3]) == "succeeded"
    assert terminal_status(events[1]) is None
    assert terminal_status(events[2]) is None


def test_gw_sse_4_catch_up_without_id_does_not_move_last_event_id() -> None:
    parser = SseParser()
    parser.last_event_id = "5"
    for line in ["retry: 1000", "event: status", f"data: {_status('running')}"]:
        assert parser.feed(line) is None
    event = parser.feed("")
    assert event is not None
    assert event.id is None
    assert parser.last_event_id == "5"
    assert parser.retry == 1000


def test_parser_field_rules() -> None:
    parser = SseParser()
    lines = ["data:no-space", "data:  two spaces", "data", "id: 7\0bad", "retry: soon", "unknown: x", ""]
    events = [e for e in (parser.feed(line) for line in lines) if e is not None]
    assert events == [SseEvent(event="message", data="no-space\n two spaces\n", id=None, retry=None)]
    assert parser.last_event_id is None  # an id containing NUL is ignored
    assert parser.retry is None


def test_parser_does_not_dispatch_events_without_data() -> None:
    parser = SseParser()
    assert parser.feed("event: status") is None
    assert parser.feed("id: 3") is None
    assert parser.feed("") is None
    assert parser.last_event_id == "3"
    assert list(parse_lines(["data: x"])) == []  # incomplete trailing event is dropped


def test_an_id_counts_only_once_its_event_is_dispatched() -> None:
    """EventSource's last event ID buffer: an ``id`` line read but not yet ended by its blank line does not move
    ``last_event_id``."""
    parser = SseParser()
    for line in ["id: 15", "event: fly", "data: {}", ""]:
        parser.feed(line)
    assert parser.feed("id: 16") is None
    assert parser.last_event_id == "15"
    assert parser.feed("event: fly") is None
    assert parser.feed("data: {}") is None
    assert parser.last_event_id == "15"
    event = parser.feed("")
    assert event is not None and event.id == "16"
    assert parser.last_event_id == "16"


Handler = Callable[[httpx.Request], httpx.Response]


def _stream(handler: Handler, **kwargs: object) -> tuple[SseStream, list[float]]:
    sleeps: list[float] = []
    client = httpx.Client(transport=httpx.MockTransport(handler))
    return SseStream(client, URL, sleep=sleeps.append, **kwargs), sleeps  # type: ignore[arg-type]


def _sse(text: str) -> httpx.Response:
    return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, content=text.encode())


def test_gw_sse_9_reconnects_with_last_event_id_after_the_server_closes() -> None:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if len(requests) == 1:
            return _sse(
                f"retry: 250\nevent: status\ndata: {_status('running')}\n\nid: 6\nevent: status\ndata: {{}}\n\n"
            )
        return _sse(f"id: 7\nevent: status\ndata: {_status('failed')}\n\nid: 8\nevent: fly\ndata: {{}}\n\n")

    stream, sleeps = _stream(handler)
    events = list(stream.events())
    assert [e.id for e in events] == [None, "6", "7"]  # stops at the terminal status, ignores what follows
    assert "last-event-id" not in requests[0].headers
    assert requests[1].headers["last-event-id"] == "6"
    assert sleeps == [0.25]  # the server's retry value
    assert stream.reconnects == 1


class _CutStream(httpx.SyncByteStream):
    """A response body whose connection drops after ``text``."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __iter__(self) -> Iterator[bytes]:
        yield self._text.encode()
        raise httpx.ReadError("connection reset")


def test_gw_sse_5_a_connection_cut_mid_event_resumes_before_that_event() -> None:
    """Cut after ``id: 16`` but before its blank line: the reconnect asks for what follows 15, so fly 16 comes
    again and is not lost; the half event is forgotten, so the new catch-up carries no id (GW-SSE-4)."""
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        if len(requests) == 1:
            cut = f"event: status\ndata: {_status('running')}\n\nid: 15\nevent: fly\ndata: {{}}\n\nid: 16\nevent: fly\n"
            return httpx.Response(200, headers={"Content-Type": "text/event-stream"}, stream=_CutStream(cut))
        return _sse(
            f"retry: 1000\nevent: status\ndata: {_status('running')}\n\n"
            f"id: 16\nevent: fly\ndata: {{}}\n\nid: 17\nevent: status\ndata: {_status('succeeded')}\n\n"
        )

    stream, _ = _stream(handler)
    events = list(stream.events())
    assert requests[1].headers["last-event-id"] == "15"
    assert [(e.event, e.id) for e in events] == [
        ("status", None),
        ("fly", "15"),
        ("status", None),
        ("fly", "16"),
        ("status", "17"),
    ]


def test_gw_sse_6_a_terminal_catch_up_is_followed_by_the_replay_of_partial_output() -> None:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return _sse(
            f"retry: 1000\nevent: status\ndata: {_status('succeeded', 100)}\n\n"
            'id: 5\nevent: fly\ndata: {"payload":"A"}\n\nid: 6\nevent: fly\ndata: {"payload":" friendly"}\n\n'
        )

    stream, sleeps = _stream(handler)
    events = list(stream.events())
    assert [(e.event, e.id) for e in events] == [("status", None), ("fly", "5"), ("fly", "6")]
    assert len(requests) == 1 and sleeps == []  # the server's close after the replay ends it: no reconnect


def test_gw_sse_8_204_stops_the_stream() -> None:
    stream, _ = _stream(lambda request: httpx.Response(204))
    assert list(stream.events()) == []


def test_gw_sse_1_error_status_raises_with_the_error_message() -> None:
    stream, _ = _stream(lambda request: httpx.Response(404, json={"error": "not found"}))
    with pytest.raises(GatewayHttpError) as info:
        list(stream.events())
    assert info.value.status_code == 404
    assert info.value.message == "not found"


def test_no_server_raises_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        # as httpx raises it: the socket's ConnectionRefusedError is the cause
        raise httpx.ConnectError("connection refused", request=request) from ConnectionRefusedError(111, "refused")

    stream, _ = _stream(refuse)
    with pytest.raises(GatewayUnreachableError, match=r"no gateway at http://gw.test: start one with `asya dev`"):
        list(stream.events())


def test_a_server_that_cannot_be_reached_otherwise_says_why() -> None:
    def unresolvable(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno -2] Name or service not known", request=request)

    stream, _ = _stream(unresolvable)
    with pytest.raises(GatewayUnreachableError, match=r"cannot reach the gateway at http://gw.test: \[Errno -2\]"):
        list(stream.events())


def test_gives_up_after_max_retries_without_progress() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            return _sse(f"id: 2\nevent: status\ndata: {_status('running')}\n\n")
        raise httpx.ReadError("reset", request=request)

    stream, sleeps = _stream(handler, max_retries=2)
    seen: list[SseEvent] = []
    with pytest.raises(SseStreamError):
        seen.extend(stream.events())
    assert [e.id for e in seen] == ["2"]
    assert calls == 4  # the first connection, then three failed ones (the third exceeds max_retries=2)
    assert len(sleeps) == 3
