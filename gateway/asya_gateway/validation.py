"""Validation of ``POST /api/v1/mesh/?actor=|?flow=`` (GW-CREATE-1 .. GW-CREATE-6): pure functions, no I/O.

Every failure raises :class:`~asya_gateway.errors.HttpError` whose message starts with the exact text of the spec and
may go on with the fix: an unknown body field says that the input goes under ``payload``; an unknown flow or
actor lists the valid names; a flow's ``input_schema`` refusing an absent or null payload says so in words rather than
``None is not of type 'object'``.

Choices: an empty query value counts as absent; the reserved ``x-asya-`` prefix is matched case-insensitively, so
``X-Asya-Flow`` cannot pass as an ordinary header; ``x-asya-route-override`` must map declared user actors to declared
user actors, never crew (P-ROUTE-7, GW-CREATE-5); a ``timeout`` must be a JSON integer (``10.0`` is refused). The
payload, and each header value, are nested at most :data:`MAX_NESTING` containers deep (GW-CREATE-4: whatever the
gateway accepts, the layer and the crew carry). No client value may be a storage reference (:func:`refuse_reference`,
GW-REF-1, GW-REF-2): the create payload, a resume input, the producer route's data, MCP and A2A inputs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from jsonschema import exceptions as js_exceptions
from jsonschema import validators

from asya import naming
from asya.envelope import dumps
from asya.headers import ROUTE_OVERRIDE, TRACEPARENT, TRACESTATE
from asya.manifest import Manifest
from asya.payloads import REFERENCE_KEY, is_reference
from asya_gateway.errors import HttpError

__all__ = [
    "MAX_HEADERS_BYTES",
    "MAX_HEADER_KEY_LENGTH",
    "MAX_NESTING",
    "MAX_TIMEOUT_SECONDS",
    "NULL_PAYLOAD_REASON",
    "CreateBody",
    "CreateTarget",
    "nesting_exceeds",
    "parse_create_body",
    "parse_non_negative_int",
    "reference_problem",
    "refuse_reference",
    "resolve_target",
    "schema_violation",
    "validate_headers",
    "validate_timeout",
]

MAX_HEADERS_BYTES: Final = 16 * 1024
MAX_HEADER_KEY_LENGTH: Final = 128
MAX_TIMEOUT_SECONDS: Final = 604800
#: GW-CREATE-4: containers nested deeper than this are refused (``[[1]]`` is 2 levels, a scalar 0).
MAX_NESTING: Final = 256
_RESERVED_PREFIX: Final = "x-asya-"
#: Longer digit strings are out of every range a query takes (no task has 10^18 events), and Python refuses to
#: convert more than 4300 of them.
_MAX_DIGITS: Final = 18
_ROUTING_KEYS: Final = ("route", "route_next", "next")
_BODY_KEYS: Final = frozenset({"payload", "headers", "timeout"})
_TIMEOUT_MESSAGE: Final = f"timeout must be an integer number of seconds between 1 and {MAX_TIMEOUT_SECONDS}"
NULL_PAYLOAD_REASON: Final = 'the payload is null or missing; send the input as {"payload": <input>}'


@dataclass(frozen=True, slots=True)
class CreateTarget:
    """Where a new task starts: ``route`` is ``[actor]`` or the flow's route."""

    actor: str | None
    flow: str | None
    route: tuple[str, ...]
    default_timeout: float | None
    input_schema: Mapping[str, Any] | None = None
    progress: str | None = None


@dataclass(frozen=True, slots=True)
class CreateBody:
    payload: Any
    headers: dict[str, Any]
    timeout: int | None


def parse_non_negative_int(raw: str) -> int | None:
    """``raw`` (surrounding blanks ignored) as a non-negative decimal integer; ``None`` unless it is 1 to
    :data:`_MAX_DIGITS` ASCII digits."""
    text = raw.strip()
    if not (text.isascii() and text.isdigit()) or len(text) > _MAX_DIGITS:
        return None
    return int(text)


def resolve_target(query: Mapping[str, str], manifest: Manifest) -> CreateTarget:
    """GW-CREATE-1, GW-CREATE-2."""
    actor = query.get("actor") or None
    flow = query.get("flow") or None
    if actor is None and flow is None:
        raise HttpError(400, "actor or flow query parameter required")
    if actor is not None and flow is not None:
        raise HttpError(400, "use either actor or flow, not both")
    if actor is not None:
        if naming.is_crew(actor):
            raise HttpError(400, f"actor '{actor}' is reserved for crew")
        if actor not in manifest.actors:
            raise HttpError(404, f"actor not found: {actor} (actors: {_names(manifest.actors)})")
        return CreateTarget(actor=actor, flow=None, route=(actor,), default_timeout=None)
    assert flow is not None
    spec = manifest.flows.get(flow)
    if spec is None:
        raise HttpError(404, f"flow not found: {flow} (flows: {_names(manifest.flows)})")
    return CreateTarget(
        actor=None,
        flow=flow,
        route=tuple(spec.route),
        default_timeout=spec.timeout,
        input_schema=spec.input_schema,
        progress=spec.progress,
    )


def _names(names: Collection[str]) -> str:
    return ", ".join(sorted(names)) or "none declared"


def parse_create_body(body: Mapping[str, Any], *, user_actors: Collection[str]) -> CreateBody:
    """GW-CREATE-3 .. GW-CREATE-6 (the schema check needs the target: :func:`schema_violation`). ``user_actors``
    are the manifest's declared user actors, the only names a route override may use."""
    for key in body:
        if key in _ROUTING_KEYS:
            raise HttpError(
                400, f"routing fields are not allowed in the body: '{key}'; the entry point is ?actor= or ?flow="
            )
    for key in body:
        if key not in _BODY_KEYS:
            raise HttpError(
                400,
                f"unknown field '{key}': the task input goes under 'payload', as in "
                f'{{"payload": {{{dumps(key)}: ...}}}}; the body fields are payload, headers and timeout',
            )
    payload = body.get("payload")
    if is_reference(payload):
        raise HttpError(400, "payload must not be a storage reference")
    if nesting_exceeds(payload, MAX_NESTING):
        raise HttpError(400, f"payload nesting exceeds {MAX_NESTING} levels")
    return CreateBody(
        payload=payload,
        headers=validate_headers(body.get("headers"), user_actors=user_actors),
        timeout=validate_timeout(body.get("timeout")),
    )


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


def refuse_reference(value: object, field: str, *, merged: bool = False) -> None:
    """:func:`reference_problem` as a 400."""
    problem = reference_problem(value, field, merged=merged)
    if problem is not None:
        raise HttpError(400, problem)


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


def validate_headers(headers: object, *, user_actors: Collection[str]) -> dict[str, Any]:
    """GW-CREATE-5: at most 16 KiB encoded, keys 1..128 characters, no reserved keys but the route override, values
    nested at most :data:`MAX_NESTING` deep, ``traceparent``/``tracestate`` strings (their W3C validity is checked
    when the envelope's trace headers are built: an invalid one is dropped, :mod:`asya_gateway.tracing`)."""
    if headers is None:
        return {}
    if not isinstance(headers, dict):
        raise HttpError(400, f"headers must be an object, got {type(headers).__name__}")
    if any(nesting_exceeds(value, MAX_NESTING) for value in headers.values()):
        raise HttpError(400, f"headers nesting exceeds {MAX_NESTING} levels")
    size = len(dumps(headers).encode("utf-8"))
    if size > MAX_HEADERS_BYTES:
        raise HttpError(400, f"headers are {size} bytes encoded, over the limit of 16 KiB")
    for key, value in headers.items():
        if not key or len(key) > MAX_HEADER_KEY_LENGTH:
            raise HttpError(400, f"header key '{key[:MAX_HEADER_KEY_LENGTH]}' must be 1-128 characters long")
        if key == ROUTE_OVERRIDE:
            _check_route_override(value, user_actors)
        elif key.lower().startswith(_RESERVED_PREFIX):
            raise HttpError(400, f"header '{key}' is reserved")
        elif key in (TRACEPARENT, TRACESTATE) and not isinstance(value, str):
            raise HttpError(400, f"header '{key}' must be a string, got {dumps(value)}")
    return dict(headers)


def _check_route_override(value: object, user_actors: Collection[str]) -> None:
    """P-ROUTE-7, GW-CREATE-5: keys and values are declared user actors; a crew target would be acked by the crew
    without a final status, leaving the task ``running`` until its deadline."""
    if not isinstance(value, dict):
        raise HttpError(400, f"header '{ROUTE_OVERRIDE}' must be an object of actor names, got {dumps(value)}")
    for logical, physical in value.items():
        for name in (logical, physical):
            if not naming.is_valid_actor_name(name):
                raise HttpError(
                    400, f"header '{ROUTE_OVERRIDE}' must be an object of actor names, got invalid name {dumps(name)}"
                )
            if naming.is_crew(name):
                raise HttpError(400, f"header '{ROUTE_OVERRIDE}' must not name crew actor '{name}'")
            if name not in user_actors:
                raise HttpError(
                    400,
                    f"header '{ROUTE_OVERRIDE}' names undeclared actor '{name}' (actors: {_names(user_actors)})",
                )


def validate_timeout(value: object) -> int | None:
    """GW-CREATE-6: ``null`` is absent; else an integer in 1..604800."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_TIMEOUT_SECONDS:
        raise HttpError(400, _TIMEOUT_MESSAGE)
    return value


def schema_violation(instance: Any, schema: Mapping[str, Any]) -> str | None:
    """``"<path>: <reason>"`` of the most relevant JSON Schema error, or ``None`` when ``instance`` validates.

    The path is a JSONPath (``$`` is the payload itself, ``$.text`` a member). Shared by REST (GW-CREATE-4) and the
    MCP/A2A argument checks, which use the same wording.
    """
    validator_cls = validators.validator_for(schema)
    validator = validator_cls(schema, format_checker=validator_cls.FORMAT_CHECKER)
    error = js_exceptions.best_match(validator.iter_errors(instance))
    if error is None:
        return None
    if instance is None:
        return f"$: {NULL_PAYLOAD_REASON}"
    return f"{error.json_path}: {error.message}"
