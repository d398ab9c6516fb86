"""The OpenAPI 3.1 document of the gateway's REST routes (GW-OPS-2), served at ``GET /openapi.json``.

Built from the manifest, so ``flow`` and ``actor`` list the names this gateway accepts and the security scheme is the
one ``gateway.auth.mode`` configures: ``iam`` (SigV4 in ``Authorization``), ``api_key`` (``X-API-Key``), ``jwt``
(bearer token) or ``none``. Public paths (``/health``, ``/openapi.json``, the console's ``/console``, the agent
card) carry no security requirement. Only routes this release serves are described; the
JSON-RPC endpoints ``/mcp`` and ``/a2a/`` are listed with their transport, their methods being MCP's and A2A's
(``docs/agents.md``). Every operation carries ``x-asya-owner``, how it keeps one subject's tasks from another
(GW-EDGE-8, :mod:`asya_gateway.ownership`).

The component schemas are generated: the request bodies' from the pydantic models that validate them
(:data:`asya_gateway.requestmodels.REQUEST_MODELS`), the answers' from their typed dicts
(:data:`asya_gateway.answers.ANSWER_SHAPES`), each under its class name. The paths are written here.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode
from pydantic_core import CoreSchema

from asya import naming
from asya.manifest import Manifest
from asya.store import STATUSES
from asya_gateway.answers import ANSWER_SHAPES
from asya_gateway.diagnostic import MAX_DIAGNOSTIC_NAMES, diagnostic_actors
from asya_gateway.ownership import OPERATION_OWNERS, OWNER_EXTENSION
from asya_gateway.requestmodels import REQUEST_MODELS, DiagnosticRequest

__all__ = ["openapi_document"]

_JSON: Final = "application/json"
_COMPONENT: Final = "#/components/schemas/{model}"
_ERROR: Final = {"$ref": "#/components/schemas/Error"}
_ACTOR_PATTERN: Final = naming.ACTOR_NAME_RE.pattern


class _Schemas(GenerateJsonSchema):
    """Properties without titles: pydantic's would only repeat the field names."""

    def field_title_should_be_set(self, schema: CoreSchema) -> bool:
        return False


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": _COMPONENT.format(model=name)}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    """A ``content`` map: JSON of ``schema``."""
    return {_JSON: {"schema": schema}}


def _response(description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": description}
    if schema is not None:
        out["content"] = _json(schema)
    return out


def _json_body(schema: dict[str, Any], *, required: bool) -> dict[str, Any]:
    return {"required": required, "content": _json(schema)}


def _errors(*codes: int) -> dict[str, Any]:
    texts = {
        400: "Invalid input; the message names the field and the value",
        401: "Missing or invalid credentials",
        404: "Unknown task, flow or actor",
        409: "The task is not in a state that allows this; the message says which",
        413: "Body over the size limit",
        500: "The request could not be dispatched; nothing changed",
        502: "An AWS call failed; the message names it, and what was not moved stays where it was",
    }
    return {str(code): _response(texts[code], _ERROR) for code in codes}


def _or_empty(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter whose empty value counts as absent (GW-CREATE-1, GW-LIST-1, chosen)."""
    return {"anyOf": [schema, {"const": ""}]}


def _task_id() -> dict[str, Any]:
    return {"name": "task_id", "in": "path", "required": True, "schema": {"type": "string"}}


def _query(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


def _security(mode: str) -> dict[str, Any]:
    if mode == "iam":
        return {"sigv4": {"type": "apiKey", "in": "header", "name": "Authorization", "description": "AWS SigV4"}}
    if mode == "api_key":
        return {"apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"}}
    if mode == "jwt":
        return {"bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"}}
    return {}


def _mesh_paths(flows: list[str], actors: list[str]) -> dict[str, Any]:
    task = {"$ref": "#/components/schemas/Task"}
    create = {
        "summary": "Create a task (GW-CREATE-1)",
        "parameters": [
            _query("flow", _or_empty({"type": "string", "enum": flows}), "Run a flow; exactly one of flow and actor"),
            _query("actor", _or_empty({"type": "string", "enum": actors}), "Send to one actor"),
            {
                "name": "Idempotency-Key",
                "in": "header",
                "required": False,
                "schema": {"type": "string", "minLength": 1, "maxLength": 257},
                "description": (
                    "GW-CREATE-R3-1..7, after the IETF httpapi idempotency-key draft: 1 to 255 visible ASCII "
                    "characters, optionally in double quotes. The same key and body within 24 h answer the first "
                    "201 again (same body and Location), with no second task; scoped per credential."
                ),
            },
        ],
        "requestBody": _json_body(_ref("CreateRequest"), required=False),
        "responses": {
            "201": _response(
                "Created, or the first answer replayed for its Idempotency-Key; Location names the task",
                {"$ref": "#/components/schemas/Created"},
            ),
            **_errors(400, 401, 404, 413),
            "409": _response("A request with this Idempotency-Key is still being processed; retry later", _ERROR),
            "422": _response("This Idempotency-Key was already used with another request body", _ERROR),
        },
    }
    listing = {
        "summary": "List tasks, newest first (GW-LIST-1)",
        "parameters": [
            _query("status", _or_empty({"type": "string", "enum": list(STATUSES)}), "Only tasks in this status"),
            _query("flow", _or_empty({"type": "string", "enum": flows}), "Only tasks of this flow (a declared one)"),
            _query("limit", _or_empty({"type": "integer", "minimum": 1, "maximum": 100}), "Page size (default 20)"),
            _query("cursor", {"type": "string"}, "next_cursor of the previous page"),
            _query("offset", _or_empty({"type": "integer", "minimum": 0, "maximum": 10000}), "Skip this many tasks"),
            _query("count", _or_empty({"type": "boolean"}), "Also count the matching tasks (total)"),
        ],
        "responses": {"200": _response("One page", {"$ref": "#/components/schemas/Page"}), **_errors(400, 401)},
    }
    return {
        "/api/v1/mesh/": {"post": create, "get": listing},
        "/api/v1/mesh/{task_id}": {
            "parameters": [_task_id()],
            "get": {
                "summary": "The task view (GW-TASK-1)",
                "responses": {"200": _response("The task", task), **_errors(401, 404)},
            },
            "delete": {
                "summary": "Cancel the task; a terminal task stays as it is (GW-CANCEL-1)",
                "responses": {"204": _response("Canceled, or already terminal"), **_errors(401, 404)},
            },
        },
        "/api/v1/mesh/{task_id}/history": {
            "parameters": [_task_id()],
            "get": {
                "summary": "The task's recorded steps, for a flow with history: steps (GW-HIST-1)",
                "responses": {"200": _response("The run history", {"type": "object"}), **_errors(401, 404)},
            },
        },
        "/api/v1/mesh/{task_id}/retry": {
            "parameters": [_task_id()],
            "post": {
                "summary": "A new task from a finished one, from its start or a recorded step (GW-HIST-2)",
                "requestBody": _json_body(_ref("RetryRequest"), required=False),
                "responses": {
                    "201": _response("Created; Location names the new task", {"type": "object"}),
                    **_errors(400, 401, 404, 409),
                },
            },
        },
        "/api/v1/mesh/{task_id}/resume": {
            "parameters": [_task_id()],
            "post": {
                "summary": "Resume a paused task with the input its pause fields ask for (GW-RESUME-1)",
                "requestBody": _json_body(_ref("ResumeRequest"), required=True),
                "responses": {
                    "202": _response("Resumed under the same id", {"$ref": "#/components/schemas/Resumed"}),
                    **_errors(400, 401, 404, 409, 413, 500),
                },
            },
        },
        "/api/v1/mesh/{task_id}/signal": {
            "parameters": [_task_id()],
            "post": {
                "summary": "Deliver a named event to a task's wait_for, or buffer it until one waits (GW-SIGNAL-1)",
                "requestBody": _json_body(_ref("SignalRequest"), required=True),
                "responses": {
                    "202": _response("Delivered or buffered", {"$ref": "#/components/schemas/Signaled"}),
                    **_errors(400, 401, 404, 409, 413, 500),
                },
            },
        },
        "/api/v1/mesh/events": {
            "get": {
                "summary": "Server-sent events of many tasks in one stream (GW-SSE-20..27); no ids: the task 'events'",
                "parameters": [
                    _query("ids", {"type": "string"}, "1 to 100 comma-separated task ids"),
                    {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "string"}},
                    _query("last_event_id", {"type": "string"}, "Cursor map: id:seq pairs joined by ','"),
                ],
                "responses": {
                    "200": {
                        "description": "event: status / fly / gone; data: JSON with task_id; id: the cursor map",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "204": _response("Every task ended and the client has every event"),
                    **_errors(400, 401, 404),
                },
            },
        },
        "/api/v1/mesh/{task_id}/events": {
            "parameters": [_task_id()],
            "get": {
                "summary": "Server-sent events of the task's log (GW-SSE-1)",
                "parameters": [
                    {"name": "Last-Event-ID", "in": "header", "required": False, "schema": {"type": "integer"}},
                    _query("last_event_id", {"type": "integer", "minimum": 0}, "Resume after this event"),
                ],
                "responses": {
                    "200": {
                        "description": "event: status / fly; data: JSON; id: the event's sequence number",
                        "content": {"text/event-stream": {"schema": {"type": "string"}}},
                    },
                    "204": _response("The task ended and the client has every event"),
                    **_errors(400, 401, 404),
                },
            },
            "post": {
                "summary": "A status or FLY event from a reporter outside AWS (GW-EVT-1)",
                "description": "Reporters only (GW-EVT-1): send X-Asya-Reporter-Key; a client's key or token is "
                "refused. Status received, processing, completed, retrying or running; the crew's statuses answer "
                "400 (GW-EVT-3).",
                "requestBody": _json_body(_ref("ProducerEvent"), required=True),
                "responses": {"204": _response("Accepted, or stale"), **_errors(400, 401, 404, 413)},
            },
        },
    }


def _ops_paths(actors: list[str]) -> dict[str, Any]:
    return {
        "/health": {
            "get": {
                "summary": "Liveness, no AWS call (GW-OPS-1)",
                "security": [],
                "responses": {"200": _response("Up", {"$ref": "#/components/schemas/Health"})},
            }
        },
        "/openapi.json": {
            "get": {
                "summary": "This document (GW-OPS-2)",
                "security": [],
                "responses": {"200": _response("OpenAPI 3.1", {"type": "object"})},
            }
        },
        "/api/v1/system/mq-diagnostic": {
            "post": {
                "summary": "Queue and DLQ health (GW-OPS-3)",
                "requestBody": _json_body(_diagnostic_body(actors), required=False),
                "responses": {"200": _response("Per queue: depth, in flight, delayed, its DLQ"), **_errors(400, 401)},
            }
        },
        "/api/v1/system/dlq/{actor}/redrive": {
            "parameters": [
                {"name": "actor", "in": "path", "required": True, "schema": {"enum": actors}},
            ],
            "post": {
                "summary": "Move up to `limit` messages of the actor's DLQ back to its queue (GW-DLQ-1)",
                "requestBody": _json_body(_ref("RedriveRequest"), required=False),
                "responses": {
                    "200": _response("Counts: moved, failed, not_deleted", {"type": "object"}),
                    **_errors(400, 401, 404, 502),
                },
            },
        },
        "/api/v1/system/mesh": {
            "get": {
                "summary": "The manifest's namespace, auth mode, flows (route, input_schema) and actors (chosen)",
                "responses": {"200": _response("The mesh", {"$ref": "#/components/schemas/Mesh"}), **_errors(401)},
            }
        },
        "/console": {
            "get": {
                "summary": "The web console (static HTML, CSS and JS under /console/; they hold no data)",
                "security": [],
                "responses": {"307": {"description": "Redirect to /console/"}},
            }
        },
    }


def _rpc_errors(*codes: int) -> dict[str, Any]:
    """Errors of a JSON-RPC route: a JSON-RPC error object, or the gateway's own ``{"error"}`` (auth, unknown path)."""
    either = {"anyOf": [_ERROR, {"$ref": "#/components/schemas/JsonRpcError"}]}
    return {key: {**value, "content": _json(either)} for key, value in _errors(*codes).items()}


def _agent_paths() -> dict[str, Any]:
    rpc = _json_body({"$ref": "#/components/schemas/JsonRpcRequest"}, required=True)
    card = {
        "get": {
            "summary": "The A2A agent card (GW-A2A-1)",
            "security": [],
            "responses": {"200": _response("Agent card", {"type": "object"})},
        }
    }
    return {
        "/mcp": {
            "post": {
                "summary": "MCP over Streamable HTTP: one JSON-RPC message (GW-MCP-1..9)",
                "description": (
                    "Protocol 2026-07-28 (per request: params._meta envelope, MCP-Protocol-Version, Mcp-Method and "
                    "Mcp-Name headers, no session) and 2025-11-25 .. 2024-11-05 (initialize, then Mcp-Session-Id)"
                ),
                "requestBody": rpc,
                "responses": {
                    "200": {"description": "JSON-RPC response, or an SSE stream of messages for tools/call"},
                    "202": {"description": "Notification or response accepted"},
                    **_rpc_errors(400, 401, 404),
                },
            },
            "delete": {
                "summary": "End the MCP session named by Mcp-Session-Id (GW-MCP-2)",
                "responses": {"204": {"description": "Session ended"}, **_rpc_errors(400, 401, 404)},
            },
        },
        "/a2a/": {
            "post": {
                "summary": "A2A JSON-RPC, 1.0 and 0.3 method names (GW-A2A-3)",
                "requestBody": rpc,
                "responses": {
                    "200": {"description": "JSON-RPC response, or an SSE stream for the streaming methods"},
                    "401": {"description": "JSON-RPC error -32005 (GW-AUTH-7)"},
                },
            }
        },
        "/.well-known/agent-card.json": card,
        "/.well-known/agent.json": card,
    }


def _diagnostic_body(actors: list[str]) -> dict[str, Any]:
    """The model's schema with what the route accepts as a name: an actor of the manifest, or any other actor name,
    which is reported with ``declared: false`` (GW-OPS-5)."""
    schema = DiagnosticRequest.model_json_schema(schema_generator=_Schemas)
    names = {"anyOf": [{"enum": actors}, {"type": "string", "pattern": _ACTOR_PATTERN}]}
    # null or absent: every actor (GW-OPS-3)
    schema["properties"]["actors"] = {"type": ["array", "null"], "maxItems": MAX_DIAGNOSTIC_NAMES, "items": names}
    return schema


def _schemas() -> dict[str, Any]:
    shapes: list[tuple[str, JsonSchemaMode, TypeAdapter[Any]]] = [
        (model.__name__, "validation", TypeAdapter(model)) for model in (*REQUEST_MODELS, *ANSWER_SHAPES)
    ]
    _, document = TypeAdapter.json_schemas(shapes, ref_template=_COMPONENT, schema_generator=_Schemas)
    return dict(document["$defs"])


def _declare_owners(paths: dict[str, Any]) -> None:
    """GW-EDGE-8: every operation says how it keeps one subject's tasks from another (``x-asya-owner``); an operation
    without a declaration is a programming error, caught here rather than shipped unchecked."""
    for path, item in paths.items():
        for method, operation in item.items():
            if method == "parameters":
                continue
            kind = OPERATION_OWNERS.get((path, method))
            if kind is None:
                raise AssertionError(f"{method.upper()} {path} has no owner declaration (asya_gateway.ownership)")
            operation[OWNER_EXTENSION] = kind


def openapi_document(manifest: Manifest, *, version: str) -> dict[str, Any]:
    """The document for ``manifest``'s gateway (GW-OPS-2). Pure."""
    flows = sorted(manifest.flows)
    diagnosable = sorted(set(diagnostic_actors(manifest)) | naming.FIXED_CREW)
    schemes = _security(manifest.gateway.auth.mode)
    # a task goes to a user actor only (crew is refused, GW-CREATE-2); the diagnostic takes every actor of the
    # manifest and every crew name (GW-OPS-3)
    paths = {**_mesh_paths(flows, sorted(manifest.actors)), **_ops_paths(diagnosable), **_agent_paths()}
    _declare_owners(paths)
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {"title": f"asya gateway ({manifest.namespace})", "version": version},
        "paths": paths,
        "components": {"schemas": _schemas(), "securitySchemes": schemes},
    }
    if schemes:
        document["security"] = [{name: []} for name in schemes]
    return document
