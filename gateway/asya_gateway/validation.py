"""Validation of ``POST /api/v1/mesh/?actor=|?flow=`` (GW-CREATE-1 .. GW-CREATE-6): pure functions, no I/O.

The body's shape is :class:`~asya_gateway.requestmodels.CreateRequest`; this module resolves the target from the
query and checks a payload against a flow's ``input_schema``. Every failure raises
:class:`~asya_gateway.errors.HttpError` whose message starts with the exact text of the contract and may go on with
the fix: an unknown flow or actor lists the valid names; a flow's ``input_schema`` refusing an absent or null payload
says so in words rather than ``None is not of type 'object'``. An empty query value counts as absent. No client value
may be a storage reference (:func:`refuse_reference`, GW-REF-1, GW-REF-2): the create payload, a resume input, the
producer route's data, MCP and A2A inputs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from jsonschema import exceptions as js_exceptions
from jsonschema import validators

from asya import naming
from asya.manifest import Manifest
from asya_gateway.errors import HttpError
from asya_gateway.requestmodels import (
    CreateRequest,
    nesting_exceeds,
    parse_body,
    reference_problem,
)

__all__ = [
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

#: Longer digit strings are out of every range a query takes (no task has 10^18 events), and Python refuses to
#: convert more than 4300 of them.
_MAX_DIGITS: Final = 18
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
    """What a new task starts with, from a REST body, an MCP or A2A call, or a retry."""

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
    create = parse_body(CreateRequest, body, user_actors=user_actors)
    return CreateBody(payload=create.payload, headers=dict(create.headers or {}), timeout=create.timeout)


def validate_headers(headers: object, *, user_actors: Collection[str]) -> dict[str, Any]:
    """GW-CREATE-5: a create body's ``headers`` (:class:`~asya_gateway.requestmodels.CreateRequest`)."""
    return parse_create_body({"headers": headers}, user_actors=user_actors).headers


def validate_timeout(value: object) -> int | None:
    """GW-CREATE-6: a create body's ``timeout``: ``null`` is absent; else an integer in 1..604800."""
    return parse_create_body({"timeout": value}, user_actors=()).timeout


def refuse_reference(value: object, field: str, *, merged: bool = False) -> None:
    """:func:`reference_problem` as a 400."""
    problem = reference_problem(value, field, merged=merged)
    if problem is not None:
        raise HttpError(400, problem)


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
