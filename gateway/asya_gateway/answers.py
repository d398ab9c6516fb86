"""The shapes of the REST routes' JSON answers, and of the JSON-RPC request envelope (``asya_gateway.jsonrpc`` parses
it), as typed dicts: their schemas are OpenAPI document components (GW-OPS-2, :mod:`asya_gateway.openapi` takes
:data:`ANSWER_SHAPES`, each under its class name).

Members are optional unless marked ``Required``: an answer may leave out what does not apply (a task's ``result``
before it ends). A docstring is the component's description in the document: written for the API's user.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Required

from pydantic import Field, WithJsonSchema
from typing_extensions import TypedDict

from asya.store import STATUSES

__all__ = [
    "ANSWER_SHAPES",
    "Created",
    "Error",
    "Health",
    "JsonRpcError",
    "JsonRpcRequest",
    "Mesh",
    "Page",
    "Signaled",
    "Task",
]

_Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]
_RpcId = str | int | None


class Error(TypedDict, total=False):
    """A refusal (GW-GEN-2): the message names the field and the value at fault."""

    error: Required[str]


class Health(TypedDict, total=False):
    status: Literal["ok"]
    version: str


class Created(TypedDict, total=False):
    """A new task; Location names it."""

    id: str
    status: Literal["pending"]
    deadline_at: _Timestamp


class Resumed(TypedDict, total=False):
    """The resumed task, under the same id."""

    id: str
    status: Literal["running"]
    deadline_at: _Timestamp | None


class Signaled(TypedDict, total=False):
    """The signal was delivered to the waiting task, or kept until it waits (``delivered``: which)."""

    id: str
    event: str
    delivered: bool
    status: str
    deadline_at: _Timestamp | None


class Task(TypedDict, total=False):
    """The task view (GW-TASK-1)."""

    id: str
    status: Annotated[str, WithJsonSchema({"enum": list(STATUSES)})]
    progress_percent: float
    current_actor: str | None
    message: str | None
    result: Any
    error: str
    checkpoint_key: str
    checkpoint_line: Annotated[int, Field(ge=1)]
    checkpoint_uri: str
    last_event_id: int


class Page(TypedDict, total=False):
    """One page of tasks, newest first (GW-LIST-1)."""

    messages: list[dict[str, Any]]
    total: int | None
    next_cursor: str | None


class Mesh(TypedDict, total=False):
    """The manifest's namespace, auth mode, flows and actors."""

    namespace: str
    auth: Literal["iam", "api_key", "jwt", "none"]
    flows: list[dict[str, Any]]
    actors: list[str]
    queues: list[str]


class JsonRpcErrorObject(TypedDict, total=False):
    code: Required[int]
    message: Required[str]
    data: Any


class JsonRpcError(TypedDict, total=False):
    jsonrpc: Required[Literal["2.0"]]
    id: _RpcId
    error: Required[JsonRpcErrorObject]


class JsonRpcRequest(TypedDict, total=False):
    jsonrpc: Required[Literal["2.0"]]
    id: _RpcId
    method: str
    params: dict[str, Any]


#: The shapes whose schemas the OpenAPI document's components hold, under their class names.
ANSWER_SHAPES: Final[tuple[type[Any], ...]] = (
    Error,
    Health,
    Created,
    Resumed,
    Signaled,
    Task,
    Page,
    Mesh,
    JsonRpcError,
    JsonRpcRequest,
)
