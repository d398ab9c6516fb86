"""The ABI state of one handler call (docs/protocol.md 3.3) and the frames it stamps (3.2).

The GET context is ``{id, parent_id, route: {prev, curr, next}, headers, status}`` built from the entry-updated
envelope (P-ABI-12, P-PROC-4): ``parent_id`` is ``""`` when absent, ``headers`` ``{}`` when absent, ``status`` the
status object as a dict. The state is mutated in place by SET and DEL, so after the call it holds the final
``route.next`` and headers (needed for zero frames, P-ROUTE-5).

Rules enforced here:

- writable paths start with ``.route.next``, ``.headers`` or ``.status``; any other write is an
  :class:`AbiProtocolError` (P-ABI-13); DEL of a slice too (P-ABI-14);
- GET returns a deep copy; SET stores a deep copy of the converted value (``to_jsonable``); a value that cannot be
  converted is refused with ``SerializationError``, a ``TypeError`` (P-ABI-15, P-ABI-19);
- a write leaving ``route.next`` not an array of valid actor names (P-NAME-1) is refused with ``ValueError`` and the
  state is unchanged (P-ABI-15); so is one leaving ``headers`` or ``status`` not an object, or ``status.deadline_at``
  set but not an RFC 3339 timestamp (chosen: only ``deadline_at`` reaches frames, P-ABI-16);
- a SET that puts crew other than x-pause (``naming.handler_may_route_to``) into ``route.next`` is refused with
  ``ValueError``, state unchanged (P-ABI-15); crew the layer spliced in before the call is not the SET's doing;
- a SET or DEL that would add, change or remove a header the layer owns (``headers.is_layer_owned``: ``x-asya-*``
  outside the allowlist, the trace headers) is refused with ``ValueError``, state unchanged (P-HDR-5); whole-object
  writes of ``.headers`` included, so a handler may rewrite ``.headers`` as long as it keeps the layer's as they are;
- DEL ``.route.next`` leaves ``[]``, DEL ``.headers`` and DEL ``.status`` leave ``{}`` (chosen).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from asya import naming
from asya.abi_paths import Segment, delete_value, get_value, parse_path, set_value
from asya.envelope import Envelope, Status
from asya.exceptions import AbiProtocolError, SerializationError
from asya.headers import is_layer_owned
from asya.serialize import copy_json, to_jsonable
from asya.timeutil import parse_ts

__all__ = ["COMMAND_ARITY", "AbiState", "Frame", "command_verb"]

#: Number of tuple elements of each generator command, verb included (P-ABI-14).
COMMAND_ARITY: Final = {"GET": 2, "SET": 3, "DEL": 2, "FLY": 2}

_READ_ONLY_HINT: Final = "writable paths start with .route.next, .headers or .status"


@dataclass(frozen=True, slots=True)
class Frame:
    """One handler output (P-ABI-9, P-ABI-10): the ABI state at the moment it was produced.

    ``payload`` is JSON-ready (``to_jsonable``, or ``as_jsonable`` for ``Handler.run(copy_result=False)``); ``next``
    and ``headers`` are copies owned by the frame; ``deadline_at`` is ``status.deadline_at`` as the handler left it
    (P-ABI-16); ``index`` counts from 0.
    """

    payload: Any
    next: list[str]
    headers: dict[str, Any]
    deadline_at: str | None
    index: int


def command_verb(command: tuple[Any, ...]) -> str:
    """The verb of a generator command after checking verb and arity; :class:`AbiProtocolError` otherwise."""
    if not command:
        raise AbiProtocolError("empty command tuple: expected (verb, ...) with verb GET, SET, DEL or FLY")
    verb = command[0]
    if not isinstance(verb, str) or verb not in COMMAND_ARITY:
        raise AbiProtocolError(f"unknown ABI verb {verb!r}: expected GET, SET, DEL or FLY")
    arity = COMMAND_ARITY[verb]
    if len(command) != arity:
        raise AbiProtocolError(f"{verb} takes {arity} tuple elements (verb included), got {len(command)}")
    return verb


class AbiState:
    """The GET/SET/DEL context of one handler call (P-ABI-12). Inputs are copied; outputs of GET are copies."""

    __slots__ = ("_ctx",)

    def __init__(
        self,
        *,
        id: str,
        parent_id: str = "",
        prev: Sequence[str] = (),
        curr: str = "",
        next: Sequence[str] = (),
        headers: Mapping[str, Any] | None = None,
        status: Mapping[str, Any] | None = None,
    ) -> None:
        self._ctx: dict[str, Any] = {
            "id": id,
            "parent_id": parent_id,
            "route": {"prev": list(prev), "curr": curr, "next": list(next)},
            "headers": _owned(headers),
            "status": _owned(status),
        }

    @classmethod
    def from_envelope(cls, env: Envelope) -> AbiState:
        """The context of ``env``, which must already carry the entry update (P-PROC-4)."""
        return cls(
            id=env.id,
            parent_id=env.parent_id or "",
            prev=env.route.prev,
            curr=env.route.curr,
            next=env.route.next,
            headers=env.headers,
            status=(env.status or Status()).to_dict(),
        )

    # Live views: owned by the state; callers copy before mutating.
    @property
    def id(self) -> str:
        return str(self._ctx["id"])

    @property
    def parent_id(self) -> str:
        return str(self._ctx["parent_id"])

    @property
    def next(self) -> list[str]:
        """``route.next`` as the handler has left it so far."""
        nxt: list[str] = self._ctx["route"]["next"]
        return nxt

    @property
    def headers(self) -> dict[str, Any]:
        """The headers as the handler has left them so far."""
        headers: dict[str, Any] = self._ctx["headers"]
        return headers

    @property
    def status(self) -> dict[str, Any]:
        status: dict[str, Any] = self._ctx["status"]
        return status

    @property
    def deadline_at(self) -> str | None:
        value = self._ctx["status"].get("deadline_at")
        return value if isinstance(value, str) else None

    def to_dict(self) -> dict[str, Any]:
        """A deep copy of the whole context (what ``GET .`` returns)."""
        ctx: dict[str, Any] = copy_json(self._ctx)
        return ctx

    def frame(self, payload: Any, index: int) -> Frame:
        """A frame carrying ``payload`` (already JSON-ready) and a snapshot of the state (P-ABI-10)."""
        return Frame(
            payload=payload,
            next=list(self._ctx["route"]["next"]),
            headers=copy_json(self._ctx["headers"]),
            deadline_at=self.deadline_at,
            index=index,
        )

    def apply(self, command: tuple[Any, ...]) -> Any:
        """Run a GET, SET or DEL command (already checked by :func:`command_verb`); return the value sent back."""
        verb = command[0]
        if verb == "GET":
            return self.get(command[1])
        if verb == "SET":
            self.set(command[1], command[2])
            return None
        if verb == "DEL":
            self.delete(command[1])
            return None
        raise AbiProtocolError(f"{verb!r} is not a context command")

    def get(self, path: object) -> Any:
        """``("GET", path)``: a deep copy of the value at ``path``."""
        path, segments = _parsed(path)
        return copy_json(get_value(self._ctx, segments, path))

    def set(self, path: object, value: Any) -> None:
        """``("SET", path, value)``."""
        path, segments = _parsed(path)
        member = _writable_member(segments, path, "SET")
        try:
            value = to_jsonable(value)
        except SerializationError as exc:  # a TypeError too (P-ABI-15), named as P-ABI-19 asks
            raise SerializationError(f"SET {path}: {exc}") from exc
        if member == "next":
            route = self._ctx["route"]
            if len(segments) == 2:
                candidate = value
            else:
                holder = {"next": list(route["next"])}
                set_value(holder, segments[1:], value, path)
                candidate = holder["next"]
            _check_next(candidate, path)
            _check_crew(candidate, route["next"], path)
            route["next"] = candidate
        elif len(segments) == 1:
            if not isinstance(value, dict):
                raise ValueError(f"SET {path}: {member} must be an object, got {type(value).__name__}")
            if member == "headers":
                _check_layer_headers(self._ctx["headers"], value, path, "SET")
            if member == "status":
                _check_deadline(value.get("deadline_at"), path)
            self._ctx[member] = value
        else:
            if member == "headers":
                _check_layer_header(segments[1], path, "SET")
            if member == "status" and segments[1] == "deadline_at":
                if len(segments) > 2:
                    raise ValueError(f"SET {path}: status.deadline_at is a timestamp string, it has no members")
                _check_deadline(value, path)
            set_value(self._ctx, segments, value, path)

    def delete(self, path: object) -> None:
        """``("DEL", path)``."""
        path, segments = _parsed(path)
        member = _writable_member(segments, path, "DEL")
        if isinstance(segments[-1], slice):
            raise AbiProtocolError(f"DEL {path}: a slice cannot be deleted (SET it to [] instead)")
        if member == "headers":
            if len(segments) == 1:
                _check_layer_headers(self._ctx["headers"], {}, path, "DEL")
            else:
                _check_layer_header(segments[1], path, "DEL")
        if member == "next" and len(segments) == 2:
            self._ctx["route"]["next"] = []
        elif len(segments) == 1:
            self._ctx[member] = {}
        else:
            # Removing an element keeps route.next an array of valid names; nested deletes into a name fail.
            delete_value(self._ctx, segments, path)


def _parsed(path: object) -> tuple[str, tuple[Segment, ...]]:
    segments = parse_path(path)  # raises unless path is a well-formed string
    return str(path), segments


def _writable_member(segments: tuple[Segment, ...], path: str, verb: str) -> str:
    """``next``, ``headers`` or ``status``: the member a write touches (P-ABI-13)."""
    first = segments[0] if segments else None
    if first in ("headers", "status"):  # a tuple: slices are unhashable before Python 3.12
        return str(first)
    if first == "route" and len(segments) >= 2 and segments[1] == "next":
        return "next"
    raise AbiProtocolError(f"{verb} {path}: path is read-only; {_READ_ONLY_HINT}")


def _check_next(value: Any, path: str) -> None:
    if not isinstance(value, list):
        raise ValueError(f"SET {path}: route.next must be an array of actor names, got {type(value).__name__}")
    for name in value:
        if not naming.is_valid_actor_name(name):
            raise ValueError(
                f"SET {path}: route.next would contain the invalid actor name {name!r} "
                "(1-40 lowercase letters, digits and '-', starting with a letter)"
            )


def _check_crew(candidate: list[str], current: list[str], path: str) -> None:
    """P-ABI-15: a SET may not put crew other than x-pause into ``route.next``; crew already there (spliced by
    the layer or named by the manifest's route) stays."""
    for name in candidate:
        if not naming.handler_may_route_to(name) and candidate.count(name) > current.count(name):
            raise ValueError(
                f"SET {path}: route.next would contain the crew actor {name!r}: a handler may route to "
                f"{', '.join(sorted(naming.HANDLER_ROUTABLE_CREW))} only among crew (P-ABI-15)"
            )


def _check_layer_header(name: Segment, path: str, verb: str) -> None:
    """P-HDR-5: the layer's headers are the layer's; a handler may read them, never write them."""
    if isinstance(name, str) and is_layer_owned(name):
        raise ValueError(
            f"{verb} {path}: header {name!r} belongs to the layer; a handler may write its own headers and, of "
            "x-asya-*, only x-asya-route-override and x-asya-pause (P-HDR-5)"
        )


def _check_layer_headers(current: Mapping[str, Any], candidate: Mapping[str, Any], path: str, verb: str) -> None:
    """P-HDR-5 for a write of the whole ``.headers`` object: every layer header stays as it is."""
    for name in sorted(set(current) | set(candidate)):
        if (name in current) != (name in candidate) or current.get(name) != candidate.get(name):
            _check_layer_header(name, path, verb)


def _check_deadline(value: Any, path: str) -> None:
    if value is not None and parse_ts(value) is None:
        raise ValueError(f"SET {path}: status.deadline_at must be an RFC 3339 timestamp string or null, got {value!r}")


def _owned(value: Mapping[str, Any] | None) -> dict[str, Any]:
    """A deep copy of ``value`` as a plain dict (``copy_json`` rebuilds a dict itself: no shallow copy first)."""
    copied: dict[str, Any] = copy_json(value if type(value) is dict else dict(value or {}))
    return copied
