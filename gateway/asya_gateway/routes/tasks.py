"""Task routes: create (GW-CREATE-1..9), view (GW-TASK-1..3), list (GW-LIST-1..4), cancel (GW-CANCEL-1..3).

Create validates the query and body (``asya_gateway.validation``) and starts the task with
:func:`asya_gateway.creation.start_task` (GW-CREATE-7, GW-CREATE-8), which MCP and A2A share.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya.store import ListQueryError, is_storable_id
from asya_gateway.auth import extract_credential
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.context import GatewayContext, context_of
from asya_gateway.creation import aws_error_code, created_answer, deadline_of, start_task
from asya_gateway.errors import HttpError, OverloadError
from asya_gateway.idempotency import HEADER, IdempotencyKeys, fingerprint, parse_key
from asya_gateway.listing import parse_list_query
from asya_gateway.principal import check_owner, listing_owner, owner_checks
from asya_gateway.tracing import CallerTraces, caller_traces
from asya_gateway.validation import CreateBody, CreateTarget, parse_create_body, resolve_target, schema_violation

__all__ = ["NOT_FOUND", "aws_error_code", "create_or_list", "load_view", "task_id_of", "task_item"]

NOT_FOUND: Final = "not found"


async def create_or_list(request: Request) -> Response:
    """``/api/v1/mesh`` and ``/api/v1/mesh/`` (GW-GEN-7)."""
    if request.method == "POST":
        return await create_task(request)
    return await list_tasks(request)


async def create_task(request: Request) -> Response:
    ctx = context_of(request)
    body = await read_json_object(request, limit=CREATE_BODY_LIMIT)
    target = resolve_target(request.query_params, ctx.manifest)
    create = parse_create_body(body, user_actors=ctx.manifest.actors)
    if target.input_schema is not None:
        violation = schema_violation(create.payload, target.input_schema)
        if violation is not None:
            raise HttpError(400, f"payload does not match input_schema: {violation}")
    key = parse_key(request.headers.get(HEADER))
    traces = caller_traces(request.headers)
    if key is None:
        answer = await start_task(ctx, target, create, **traces)
    else:
        answer = await _create_once(ctx, request, key, body=body, target=target, create=create, traces=traces)
    return JSONResponse(answer, status_code=201, headers={"Location": f"/api/v1/mesh/{answer['id']}"})


async def _create_once(
    ctx: GatewayContext,
    request: Request,
    key: str,
    *,
    body: dict[str, Any],
    target: CreateTarget,
    create: CreateBody,
    traces: CallerTraces,
) -> dict[str, Any]:
    """GW-CREATE-R3-1..7: one conditional write reserves the key; a replay answers the first 201 (``asya_gateway.
    idempotency``). The key is scoped to the caller's credential, when the request carries one."""
    store = ctx.store
    keys = IdempotencyKeys(table=store.table, dynamodb=store.dynamodb, task_exists=lambda i: bool(store.statuses([i])))
    caller = extract_credential(request.headers) or ""
    task_id, now = str(uuid.uuid4()), ctx.clock()
    planned = created_answer(task_id, deadline_of(target, create, now))
    target_text = f"flow={target.flow}" if target.flow else f"actor={target.route[0]}"
    claim = await ctx.call(
        keys.claim,
        caller=caller,
        key=key,
        print_=fingerprint(target_text, body),
        task_id=task_id,
        answer=planned,
        now=now,
    )
    if claim.answer is not None:
        if await ctx.call(store.unstarted, claim.task_id):
            # the first creation may have stopped between its record and its send (a restart, a Lambda timeout):
            # send again; a copy already sent is absorbed by the first hop's claim (GW-CREATE-R3-7, P-ACK-7)
            await start_task(
                ctx,
                target,
                create,
                task_id=claim.task_id,
                resume=True,
                resume_deadline=claim.answer.get("deadline_at"),
                **traces,
            )
        return claim.answer
    try:
        return await start_task(
            ctx,
            target,
            create,
            task_id=task_id,
            now=now,
            **traces,
        )
    except OverloadError as exc:
        if not exc.kept:  # a kept task is resumed by the retry with this key (GW-OVL-4)
            await ctx.call(keys.release, caller=caller, key=key, task_id=task_id)
        raise
    except Exception:
        await ctx.call(keys.release, caller=caller, key=key, task_id=task_id)
        raise


async def list_tasks(request: Request) -> Response:
    ctx = context_of(request)
    query = parse_list_query(request.query_params, flows=ctx.manifest.flows)
    try:
        page = await ctx.call(ctx.store.list_tasks, **query, owner=listing_owner(ctx.manifest.gateway.auth))
    except ListQueryError as exc:
        raise HttpError(400, str(exc)) from None
    return JSONResponse(page)


def task_id_of(request: Request) -> str:
    """The ``{id}`` path parameter (GW-GEN-7: any string). An id too long to be a store key names no task: 404 at
    once, since DynamoDB would answer the read with a ``ValidationException`` (a 500) instead of "not found"."""
    task_id: str = request.path_params["task_id"]
    if not is_storable_id(task_id):
        raise HttpError(404, NOT_FOUND)
    return task_id


async def load_view(ctx: GatewayContext, task_id: str) -> dict[str, Any]:
    """The task view after the read-path backstop (GW-TASK-3, GW-BACK-3); 404 when there is no record."""
    view = await ctx.call(ctx.store.get_task, task_id)
    if view is None:
        raise HttpError(404, NOT_FOUND)
    check_owner(ctx.manifest.gateway.auth, view)
    return view


async def task_item(request: Request) -> Response:
    """``/api/v1/mesh/{id}``: GET the view, DELETE to cancel."""
    if request.method == "DELETE":
        return await cancel_task(request)
    return await get_task(request)


async def get_task(request: Request) -> Response:
    ctx = context_of(request)
    return JSONResponse(await load_view(ctx, task_id_of(request)))


async def cancel_task(request: Request) -> Response:
    """GW-CANCEL-1: 404 unknown, else 204 whether it was canceled now, was terminal, or lost a race."""
    ctx = context_of(request)
    task_id = task_id_of(request)
    if owner_checks(ctx.manifest.gateway.auth):  # one read more, only where tasks have owners (GW-EDGE-5)
        await load_view(ctx, task_id)
    outcome = await ctx.call(ctx.store.cancel, task_id)
    if outcome == "not_found":
        raise HttpError(404, NOT_FOUND)
    return Response(status_code=204)
