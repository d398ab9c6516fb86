"""FROZEN copy of release 1's ``asya.envelope`` (tests/compat/r1): never edit it.

The envelope: the only module that knows the wire schema (PROTOCOL section 1).

``parse_envelope`` validates a message body (P-ENV-9 .. P-ENV-13), converts the legacy ``route{actors,current}`` form
(P-ENV-14, P-ENV-15) and drops unknown members (P-ENV-4); ``salvage_envelope`` keeps what is valid of a body it
refused, for the x-sump envelope (P-ERR-4). A refusal names the member and shows the bad value cut short (nested three
levels, strings 80 characters), so a huge malformed member never makes a huge reason. ``Envelope.to_dict`` /
``to_json`` always write the newest format (P-ENV-5): ``route.prev/curr/next`` always present, ``parent_id`` and empty
``headers`` omitted, ``status`` always present.

Envelopes are plain mutable dataclasses; code deriving one envelope from another uses :meth:`Envelope.copy` so that no
two envelopes share mutable members.
"""

from __future__ import annotations

import copy as _copy
import json
import logging
import reprlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from functools import cache, lru_cache
from typing import Any, Final


class EnvelopeParseError(ValueError):
    """A message body is not a valid envelope (P-ENV-9 .. P-ENV-12): reason ``ParseError``."""


def parse_ts(value: object) -> datetime | None:
    """Parse any RFC 3339 timestamp into an aware UTC datetime; ``None`` when ``value`` is not one (P-GEN-3)."""
    if not isinstance(value, str) or not value:
        return None
    return _parse_text(value)


@lru_cache(maxsize=1024)
def _parse_text(value: str) -> datetime | None:
    text = value.strip()
    if text[-1:] in ("Z", "z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return None
    try:
        return parsed.astimezone(UTC)
    except OverflowError:
        return None


__all__ = [
    "MAX_ID_LENGTH",
    "Envelope",
    "Phase",
    "Reason",
    "Route",
    "Status",
    "dumps",
    "parse_envelope",
    "salvage_envelope",
]

_log = logging.getLogger(__name__)

MAX_ID_LENGTH: Final = 256


class Phase(StrEnum):
    """Envelope phases (P-ENV-7)."""

    PENDING = "pending"
    PROCESSING = "processing"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PAUSED = "paused"
    CANCELED = "canceled"


_PHASES: Final = frozenset(phase.value for phase in Phase)


class Reason(StrEnum):
    """Envelope status reasons (P-ENV-8)."""

    COMPLETED = "Completed"
    RUNTIME_ERROR = "RuntimeError"
    POLICY_EXHAUSTED = "PolicyExhausted"
    POLICY_ROUTED = "PolicyRouted"
    TIMEOUT = "Timeout"
    PREFLIGHT_CANCELED = "PreFlightCanceled"
    PREFLIGHT_PAUSED = "PreFlightPaused"
    CANCELED_AT_YIELD = "CanceledAtYield"
    PARSE_ERROR = "ParseError"
    ROUTE_MISMATCH = "RouteMismatch"
    HANDLER_LOAD_ERROR = "HandlerLoadError"
    HANDLER_TIMEOUT = "HandlerTimeout"
    SERIALIZATION_ERROR = "SerializationError"
    UNKNOWN_ACTOR = "UnknownActor"
    PAYLOAD_UNAVAILABLE = "PayloadUnavailable"
    PARTIAL_FAILURE = "PartialFailure"
    #: the task reached its hop ceiling (P-HOP-1 (R3))
    HOP_CEILING = "HopCeiling"


#: Built once: ``json.dumps`` and ``json.loads`` given options build a new encoder or decoder on every call, and a hop
#: encodes and decodes several documents. Both keep no state between calls, so one of each is shared.
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def dumps(value: Any) -> str:
    """Compact UTF-8 JSON as every sender writes it; ``NaN`` and ``Infinity`` are refused (P-ABI-20)."""
    return _ENCODER.encode(value)


@dataclass(slots=True)
class Route:
    """``{prev, curr, next}`` (P-ENV-3); ``curr == ""`` when the route is exhausted."""

    prev: list[str]
    curr: str
    next: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"prev": list(self.prev), "curr": self.curr, "next": list(self.next)}

    def shifted(self, next_actors: list[str]) -> Route:
        """The route after this hop for a frame whose ``route.next`` is ``next_actors`` (P-ROUTE-2)."""
        return Route(
            prev=[*self.prev, self.curr],
            curr=next_actors[0] if next_actors else "",
            next=list(next_actors[1:]),
        )


@dataclass(slots=True)
class Status:
    """The status object (section 1.2). Members of the wrong type are dropped on parse and rebuilt (P-ENV-12)."""

    phase: str = Phase.PENDING.value
    reason: str | None = None
    actor: str | None = None
    attempt: int = 1
    max_attempts: int = 1
    created_at: str | None = None
    updated_at: str | None = None
    deadline_at: str | None = None
    error: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phase": self.phase}
        if self.reason is not None:
            out["reason"] = self.reason
        if self.actor is not None:
            out["actor"] = self.actor
        out["attempt"] = self.attempt
        out["max_attempts"] = self.max_attempts
        if self.created_at is not None:
            out["created_at"] = self.created_at
        if self.updated_at is not None:
            out["updated_at"] = self.updated_at
        if self.deadline_at is not None:
            out["deadline_at"] = self.deadline_at
        if self.error is not None:
            out["error"] = _copy.deepcopy(self.error)
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Status:
        get = raw.get
        phase, reason, actor = get("phase"), get("reason"), get("actor")
        created_at, updated_at, deadline = get("created_at"), get("updated_at"), get("deadline_at")
        if deadline is not None and parse_ts(deadline) is None:
            _log.warning("ignoring unparseable status.deadline_at %r (P-ENV-13)", deadline)
            deadline = None
        error = get("error")
        return cls(
            phase=phase if isinstance(phase, str) and phase in _PHASES else Phase.PENDING.value,
            reason=reason if isinstance(reason, str) and reason else None,
            actor=actor if isinstance(actor, str) and actor else None,
            attempt=_count(get("attempt")),
            max_attempts=_count(get("max_attempts")),
            created_at=created_at if parse_ts(created_at) is not None else None,
            updated_at=updated_at if parse_ts(updated_at) is not None else None,
            deadline_at=deadline,
            error=_copy.deepcopy(error) if isinstance(error, dict) and isinstance(error.get("message"), str) else None,
        )


def _count(value: object) -> int:
    """``attempt``/``max_attempts``: a positive integer (not a bool), else the default 1."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else 1


@dataclass(slots=True)
class Envelope:
    """One envelope (P-ENV-2). ``status`` is ``None`` only for an input that carried none."""

    id: str
    route: Route
    payload: Any
    parent_id: str | None = None
    headers: dict[str, Any] = field(default_factory=dict)
    status: Status | None = None

    def copy(self) -> Envelope:
        """A deep copy: derived envelopes never share mutable members with their source."""
        return Envelope(
            id=self.id,
            route=Route(list(self.route.prev), self.route.curr, list(self.route.next)),
            payload=_copy.deepcopy(self.payload),
            parent_id=self.parent_id,
            headers=_copy.deepcopy(self.headers),
            status=None if self.status is None else Status.from_dict(self.status.to_dict()),
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.parent_id:
            out["parent_id"] = self.parent_id
        out["route"] = self.route.to_dict()
        if self.headers:
            out["headers"] = self.headers
        out["status"] = (self.status or Status()).to_dict()
        out["payload"] = self.payload
        return out

    def to_json(self) -> str:
        return dumps(self.to_dict())


def parse_envelope(body: str | bytes | dict[str, Any]) -> Envelope:
    """Validate and convert one message body. Raises :class:`EnvelopeParseError` with a message naming the member."""
    raw: object
    if isinstance(body, dict):
        raw = body
    else:
        try:
            text = body.decode("utf-8") if isinstance(body, bytes) else body
            raw = _loads(text)
        except UnicodeDecodeError as exc:
            raise EnvelopeParseError(f"body is not UTF-8: {exc}") from None
        except json.JSONDecodeError as exc:
            raise EnvelopeParseError(f"body is not JSON: {exc.msg} at position {exc.pos}") from None
        except RecursionError:
            raise EnvelopeParseError("body is nested too deeply to parse") from None
    if not isinstance(raw, dict):
        raise EnvelopeParseError(f"envelope must be a JSON object, got {type(raw).__name__}")

    env_id = raw.get("id")
    if not isinstance(env_id, str) or not env_id:
        raise EnvelopeParseError(f"envelope id must be a non-empty string, got {_shown(env_id)}")
    if len(env_id) > MAX_ID_LENGTH:
        raise EnvelopeParseError(f"envelope id is {len(env_id)} characters, over the limit of {MAX_ID_LENGTH}")

    route = _parse_route(raw.get("route"))

    if "payload" not in raw:
        raise EnvelopeParseError("envelope has no 'payload' member (it is required, null is allowed)")
    headers = raw.get("headers")
    if headers is None:
        headers = {}
    elif not isinstance(headers, dict):
        raise EnvelopeParseError(f"envelope headers must be an object, got {type(headers).__name__}")
    status_raw = raw.get("status")
    if status_raw is not None and not isinstance(status_raw, dict):
        raise EnvelopeParseError(f"envelope status must be an object, got {type(status_raw).__name__}")

    parent_id = raw.get("parent_id")
    if parent_id is not None and not isinstance(parent_id, str):
        raise EnvelopeParseError(f"envelope parent_id must be a string, got {_shown(parent_id)}")

    return Envelope(
        id=env_id,
        route=route,
        payload=raw["payload"],
        parent_id=parent_id or None,
        headers=headers,
        status=None if status_raw is None else Status.from_dict(status_raw),
    )


def salvage_envelope(body: str, *, new_id: Callable[[], str], unknown_route: Callable[[], Route]) -> Envelope:
    """What an x-sump envelope keeps of a body :func:`parse_envelope` refused (P-ERR-4): each of ``id``, ``route``,
    ``headers``, ``parent_id`` and ``status`` that is valid on its own, else ``new_id()``, ``unknown_route()``, no
    headers, no parent and no status. The payload is never kept (``None``): the body did not parse."""
    try:
        raw = _loads(body)
    except (ValueError, EnvelopeParseError, RecursionError):
        raw = None
    if not isinstance(raw, dict):
        return Envelope(id=new_id(), route=unknown_route(), payload=None)
    env_id = raw.get("id")
    if not isinstance(env_id, str) or not 0 < len(env_id) <= MAX_ID_LENGTH:
        env_id = new_id()
    try:
        route = _parse_route(raw.get("route"))
    except EnvelopeParseError:
        route = unknown_route()
    headers, parent_id, status = raw.get("headers"), raw.get("parent_id"), raw.get("status")
    return Envelope(
        id=env_id,
        route=route,
        payload=None,
        parent_id=parent_id if isinstance(parent_id, str) and parent_id else None,
        headers=headers if isinstance(headers, dict) else {},
        status=Status.from_dict(status) if isinstance(status, dict) else None,
    )


@cache
def _repr() -> reprlib.Repr:
    shown = reprlib.Repr()
    shown.maxlevel, shown.maxstring, shown.maxother, shown.maxlist, shown.maxdict = 3, 80, 80, 8, 8
    return shown


def _shown(value: object) -> str:
    """``repr(value)`` cut short: a refusal names the bad value without copying a 200 KB member into the x-sump
    envelope and the log (issue 18)."""
    return _repr().repr(value)


def _reject_constant(name: str) -> Any:
    """``NaN``/``Infinity`` are not JSON (RFC 8259); Python's parser accepts them unless told otherwise."""
    raise EnvelopeParseError(f"body is not JSON: {name} is not a JSON value")


_DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)


def _loads(text: str) -> Any:
    """``json.loads(text, parse_constant=_reject_constant)`` with the decoder built once (see ``_ENCODER``)."""
    if text.startswith("\ufeff"):  # json.loads' own check, which the decoder lacks
        raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _DECODER.decode(text)


def _is_str_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _parse_route(route: object) -> Route:
    if not isinstance(route, dict):
        raise EnvelopeParseError(f"envelope route must be an object, got {_shown(route)}")
    if "curr" not in route and "actors" in route and "current" in route:
        return _parse_legacy_route(route)
    if "curr" in route or "prev" in route or "next" in route:
        prev = route.get("prev", [])
        curr = route.get("curr")
        nxt = route.get("next", [])
        if not _is_str_list(prev):
            raise EnvelopeParseError(f"route.prev must be an array of strings, got {_shown(prev)}")
        if not isinstance(curr, str):
            raise EnvelopeParseError(f"route.curr must be a string, got {_shown(curr)}")
        if not _is_str_list(nxt):
            raise EnvelopeParseError(f"route.next must be an array of strings, got {_shown(nxt)}")
        return Route(prev=list(prev), curr=curr, next=list(nxt))
    raise EnvelopeParseError(f"envelope route must have prev/curr/next (or legacy actors/current), got {_shown(route)}")


def _parse_legacy_route(route: dict[str, Any]) -> Route:
    """P-ENV-14, P-ENV-15; new-format ``prev``/``next`` members present next to the legacy ones win."""
    actors = route["actors"]
    current = route["current"]
    if not _is_str_list(actors):
        raise EnvelopeParseError(f"legacy route.actors must be an array of strings, got {_shown(actors)}")
    if not isinstance(current, int) or isinstance(current, bool) or current < 0:
        raise EnvelopeParseError(f"legacy route.current must be a non-negative integer, got {_shown(current)}")
    converted = Route(
        prev=list(actors[:current]),
        curr=actors[current] if current < len(actors) else "",
        next=list(actors[current + 1 :]),
    )
    for member in ("prev", "next"):
        if member in route:
            value = route[member]
            if not _is_str_list(value):
                raise EnvelopeParseError(f"route.{member} must be an array of strings, got {_shown(value)}")
            setattr(converted, member, list(value))
    return converted
