"""The JSON bodies of the REST routes as pydantic models: one description of each body checks the request and is its
schema in the OpenAPI document (GW-OPS-2, :mod:`asya_gateway.openapi` takes :data:`REQUEST_MODELS`).

:func:`parse_body` validates strictly (``10.0`` is not an integer, ``true`` not a number) and refuses any member a
model does not declare. A refusal is a 400 ``{"error": "<message>"}`` naming the field and the value at fault
(GW-GEN-2), never pydantic's 422 list: the mapper takes the first error, an unknown member before any other, and
each model's :meth:`RequestModel.message` words it. The checks JSON Schema cannot state (nesting depth, storage
references, the header rules of GW-CREATE-5) raise :func:`refused` errors, which carry their final message.

Adding a body: subclass :class:`RequestModel`, override :meth:`~RequestModel.message` for the wording its tests pin,
append the class to :data:`REQUEST_MODELS` and ``$ref`` it as ``#/components/schemas/<ClassName>`` in the paths.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Annotated, Any, Final, Literal, TypeVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from asya import naming
from asya.envelope import dumps
from asya.headers import ROUTE_OVERRIDE, TRACEPARENT, TRACESTATE
from asya.payloads import REFERENCE_KEY, is_reference
from asya_gateway.diagnostic import MAX_DIAGNOSTIC_NAMES
from asya_gateway.errors import HttpError

__all__ = [
    "CREW_STATUSES",
    "EVENT_STATUSES",
    "MAX_HEADERS_BYTES",
    "MAX_HEADER_KEY_LENGTH",
    "MAX_NESTING",
    "MAX_REDRIVE_LIMIT",
    "MAX_TIMEOUT_SECONDS",
    "REQUEST_MODELS",
    "CreateRequest",
    "DiagnosticRequest",
    "ProducerEvent",
    "RedriveRequest",
    "RequestModel",
    "ResumeRequest",
    "RetryRequest",
    "SignalRequest",
    "nesting_exceeds",
    "parse_body",
    "reference_problem",
    "refused",
]

MAX_HEADERS_BYTES: Final = 16 * 1024
MAX_HEADER_KEY_LENGTH: Final = 128
MAX_TIMEOUT_SECONDS: Final = 604800
#: GW-CREATE-4: containers nested deeper than this are refused (``[[1]]`` is 2 levels, a scalar 0).
MAX_NESTING: Final = 256
MAX_REDRIVE_LIMIT: Final = 1000
_TIMEOUT_MESSAGE: Final = f"timeout must be an integer number of seconds between 1 and {MAX_TIMEOUT_SECONDS}"
#: What a reporter may post (GW-EVT-1).
_EventStatus = Literal["received", "processing", "completed", "retrying", "running"]
EVENT_STATUSES: Final[tuple[str, ...]] = get_args(_EventStatus)
#: Written by the crew only, inside AWS (GW-EVT-3): refused with their own message.
CREW_STATUSES: Final = ("paused", "succeeded", "failed", "canceled")
_REFUSED: Final = "refused"
_RESERVED_PREFIX: Final = "x-asya-"
_ROUTING_KEYS: Final = ("route", "route_next", "next")

_Model = TypeVar("_Model", bound="RequestModel")


def refused(message: str) -> PydanticCustomError:
    """A validator's refusal whose ``message`` is the 400's, word for word."""
    return PydanticCustomError(_REFUSED, "{message}", {"message": message})


class RequestModel(BaseModel):
    """A request body: strict JSON types, no undeclared member, immutable once parsed. A subclass's docstring is
    its description in the OpenAPI document: written for the API's user."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    @classmethod
    def rank(cls, error: ErrorDetails) -> int:
        """The lowest ranked error is the one reported: by default an unknown member, which says most about a
        malformed body (a misplaced input, a misspelt field), then the fields in their order."""
        return 0 if error["type"] == "extra_forbidden" else 1

    @classmethod
    def message(cls, error: ErrorDetails) -> str:
        """The 400 message of pydantic's ``error``; a subclass words its own fields and defers the rest here."""
        field = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            return f"unknown field '{field}'"
        if error["type"] == "missing":
            return f"{field} is required"
        return f"{field}: {error['msg'].lower()}, got {_shown(error['input'])}"


def parse_body(model: type[_Model], body: Mapping[str, Any], **context: Any) -> _Model:
    """``body`` as ``model``, else :class:`HttpError` 400 with the mapped message of the first error. ``context``
    reaches the validators (the create body's route override needs the declared actors)."""
    try:
        return model.model_validate(body, context=context)
    except ValidationError as exc:
        error = min(exc.errors(include_url=False), key=model.rank)
        raise HttpError(400, error["msg"] if error["type"] == _REFUSED else model.message(error)) from None


def _shown(value: object) -> str:
    try:
        return dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _field(error: ErrorDetails) -> str:
    return str(error["loc"][0]) if error["loc"] else ""


def nesting_exceeds(value: Any, limit: int) -> bool:
    """True when ``value`` holds containers nested more than ``limit`` deep (``[[1]]`` is 2). Iterative: the value
    may be nested deeper than Python's recursion limit."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children if isinstance(child, dict | list))
    return False


def reference_problem(value: object, field: str, *, merged: bool = False) -> str | None:
    """GW-REF-1, GW-REF-2: why a client-supplied ``value`` is refused as a storage reference (``{"__ref__":
    "s3://..."}``, P-LARGE-4, which only the layer and the crew write), else ``None``. ``merged``: the value's members
    are merged into the root of a stored payload (a resume input), so a ``__ref__`` member of any kind is refused."""
    if merged and isinstance(value, dict) and REFERENCE_KEY in value:
        return (
            f"{field}: must not be or hold a storage reference: a member {REFERENCE_KEY!r} would land at the root "
            "of the paused payload; only the mesh writes references"
        )
    if is_reference(value):
        return f"{field}: must not be a storage reference ({REFERENCE_KEY!r}): only the mesh writes them"
    return None


def _payload(value: Any) -> Any:
    if is_reference(value):
        raise refused("payload must not be a storage reference")
    if nesting_exceeds(value, MAX_NESTING):
        raise refused(f"payload nesting exceeds {MAX_NESTING} levels")
    return value


def _names(names: Collection[str]) -> str:
    return ", ".join(sorted(names)) or "none declared"


def _route_override(value: object, user_actors: Collection[str]) -> None:
    """P-ROUTE-7, GW-CREATE-5: keys and values are declared user actors; a crew target would be acked by the crew
    without a final status, leaving the task ``running`` until its deadline."""
    if not isinstance(value, dict):
        raise refused(f"header '{ROUTE_OVERRIDE}' must be an object of actor names, got {dumps(value)}")
    for logical, physical in value.items():
        for name in (logical, physical):
            if not naming.is_valid_actor_name(name):
                raise refused(
                    f"header '{ROUTE_OVERRIDE}' must be an object of actor names, got invalid name {dumps(name)}"
                )
            if naming.is_crew(name):
                raise refused(f"header '{ROUTE_OVERRIDE}' must not name crew actor '{name}'")
            if name not in user_actors:
                known = _names(user_actors)
                raise refused(f"header '{ROUTE_OVERRIDE}' names undeclared actor '{name}' (actors: {known})")


_Timeout = Annotated[int, Field(ge=1, le=MAX_TIMEOUT_SECONDS, description="seconds (GW-CREATE-6)")]


class CreateRequest(RequestModel):
    """A new task (GW-CREATE-3 .. GW-CREATE-6): its input goes under payload, which a flow's input_schema checks."""

    # validated with context ``user_actors``: the only names a route override may use

    payload: Annotated[Any, AfterValidator(_payload)] = None
    headers: dict[str, Any] | None = Field(
        default=None,
        description="at most 16 KiB as JSON; keys 1-128 characters; x-asya-* reserved but x-asya-route-override",
    )
    timeout: _Timeout | None = None

    @field_validator("headers")
    @classmethod
    def _headers(cls, headers: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        """GW-CREATE-5: at most 16 KiB encoded, keys 1..128 characters, no reserved keys but the route override,
        values nested at most :data:`MAX_NESTING` deep, ``traceparent``/``tracestate`` strings (their W3C validity is
        checked when the envelope's trace headers are built: an invalid one is dropped, :mod:`asya_gateway.tracing`).
        The ``x-asya-`` prefix is matched case-insensitively, so ``X-Asya-Flow`` cannot pass as an ordinary header."""
        if headers is None:
            return None
        if any(nesting_exceeds(value, MAX_NESTING) for value in headers.values()):
            raise refused(f"headers nesting exceeds {MAX_NESTING} levels")
        size = len(dumps(headers).encode("utf-8"))
        if size > MAX_HEADERS_BYTES:
            raise refused(f"headers are {size} bytes encoded, over the limit of 16 KiB")
        for key, value in headers.items():
            if not key or len(key) > MAX_HEADER_KEY_LENGTH:
                raise refused(f"header key '{key[:MAX_HEADER_KEY_LENGTH]}' must be 1-128 characters long")
            if key == ROUTE_OVERRIDE:
                _route_override(value, (info.context or {})["user_actors"])
            elif key.lower().startswith(_RESERVED_PREFIX):
                raise refused(f"header '{key}' is reserved")
            elif key in (TRACEPARENT, TRACESTATE) and not isinstance(value, str):
                raise refused(f"header '{key}' must be a string, got {dumps(value)}")
        return headers

    @classmethod
    def rank(cls, error: ErrorDetails) -> int:
        """A routing member first: its message points at the query (GW-CREATE-3)."""
        return -1 if error["type"] == "extra_forbidden" and _field(error) in _ROUTING_KEYS else super().rank(error)

    @classmethod
    def message(cls, error: ErrorDetails) -> str:
        field = _field(error)
        if error["type"] == "extra_forbidden":
            if field in _ROUTING_KEYS:
                return f"routing fields are not allowed in the body: '{field}'; the entry point is ?actor= or ?flow="
            return (
                f"unknown field '{field}': the task input goes under 'payload', as in "
                f'{{"payload": {{{dumps(field)}: ...}}}}; the body fields are payload, headers and timeout'
            )
        if field == "headers":
            return f"headers must be an object, got {type(error['input']).__name__}"
        if field == "timeout":
            return _TIMEOUT_MESSAGE
        return super().message(error)


class ResumeRequest(RequestModel):
    """Resume a paused task (GW-RESUME-1): input is checked against the pause's pause_metadata.fields."""

    input: dict[str, Any] = Field(description="the pause's fields (pause_metadata.fields)")
    timeout: _Timeout | None = None

    @classmethod
    def message(cls, error: ErrorDetails) -> str:
        field = _field(error)
        if field == "input" and error["type"] != "missing":
            return "input must be an object"
        if field == "timeout":
            return _TIMEOUT_MESSAGE
        return super().message(error)


class SignalRequest(RequestModel):
    """Deliver a named event to the task's ``wait_for``, or keep it until one waits (GW-SIGNAL-1): ``data`` (any JSON,
    at most 64 KiB) goes to the wait's path."""

    event: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    data: Any = Field(default=None, description="any JSON, at most 64 KiB; set at the wait_for's path")

    @classmethod
    def message(cls, error: ErrorDetails) -> str:
        if _field(error) == "event" or error["type"] == "missing":
            given = error["input"] if error["type"] != "missing" else None
            return f"event: must be 1 to 64 letters, digits, '.', '_' or '-', got {given!r}"
        return super().message(error)


class RetryRequest(RequestModel):
    """Retry a finished task (GW-HIST-2): from a recorded step, else from the task's start."""

    step: str | int | None = Field(default=None, alias="from", description="a hop index, or ACTOR[#n] (P-HIST-6)")
    timeout: Annotated[int, Field(ge=1, description="seconds")] | None = None

    @classmethod
    def message(cls, error: ErrorDetails) -> str:
        field, value = _field(error), error["input"]
        if error["type"] == "extra_forbidden":
            return f"unknown field '{field}' (fields: from, timeout)"
        if field == "from":
            return f"from: a hop index or ACTOR[#n], got {value!r}"
        if field == "timeout":
            return f"timeout: a whole number of seconds >= 1, got {value!r}"
        return super().message(error)


class RedriveRequest(RequestModel):
    """Move up to limit messages of an actor's DLQ back to its queue (GW-DLQ-1)."""

    limit: Annotated[int, Field(ge=1, le=MAX_REDRIVE_LIMIT)] = 100

    @classmethod
    def message(cls, error: ErrorDetails) -> str:
        if error["type"] == "extra_forbidden":
            return f"unknown field '{_field(error)}' (fields: limit)"
        return f"limit: a whole number 1..{MAX_REDRIVE_LIMIT}, got {error['input']!r}"


class DiagnosticRequest(RequestModel):
    """Queue and DLQ health (GW-OPS-3): of the actors named, or of every actor when actors is null or absent."""

    # whether a name is one the manifest declares, or could be an actor's, is the route's check

    actors: list[str] | None = Field(default=None, max_length=MAX_DIAGNOSTIC_NAMES)

    @classmethod
    def message(cls, error: ErrorDetails) -> str:
        if _field(error) != "actors":
            return super().message(error)
        if error["type"] == "too_long":
            return f"actors: at most {MAX_DIAGNOSTIC_NAMES} names, got {len(error['input'])}"
        return "actors must be an array of actor names"


def _data(value: Any) -> Any:
    problem = reference_problem(value, "data")
    if problem is not None:
        raise refused(problem)
    return value


class ProducerEvent(RequestModel):
    """A reporter's event (GW-EVT-1): a status step, whose data is an object or null, or one FLY value, any data."""

    type: Literal["status", "fly"]
    status: _EventStatus | None = Field(default=None, description="a status event's step (GW-EVT-1)")
    data: Annotated[Any, AfterValidator(_data)] = None

    @model_validator(mode="after")
    def _status_event(self) -> ProducerEvent:
        if self.type == "status" and self.status is None:
            raise refused(f"status: invalid value null: use one of {', '.join(EVENT_STATUSES)}")
        if self.type == "status" and not isinstance(self.data, dict | None):
            raise refused(f"data must be an object for a status event, got {dumps(self.data)}")
        return self

    @classmethod
    def message(cls, error: ErrorDetails) -> str:
        field, value = _field(error), error.get("input")
        if field == "type" and error["type"] != "extra_forbidden":
            if value is None or error["type"] == "missing":
                return "type: required: use 'status' or 'fly'"
            return f"unknown event type '{value if isinstance(value, str) else dumps(value)}'"
        if field == "status" and error["type"] != "extra_forbidden":
            if value in CREW_STATUSES:
                return f"status '{value}' is written by the crew only"
            return f"status: invalid value {_shown(value)}: use one of {', '.join(EVENT_STATUSES)}"
        return super().message(error)


#: The bodies whose schemas the OpenAPI document's components hold, under their class names.
REQUEST_MODELS: Final[tuple[type[RequestModel], ...]] = (
    CreateRequest,
    ResumeRequest,
    RetryRequest,
    SignalRequest,
    RedriveRequest,
    ProducerEvent,
)
