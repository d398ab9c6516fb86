"""``GET /api/v1/mesh/{id}/history`` (GW-HIST-1) and ``POST /api/v1/mesh/{id}/retry`` (GW-HIST-2).

- The history route answers :func:`asya.historyread.read_history`'s ``{"id", "steps", "truncated",
  "missing_objects"}`` for a task of a flow with ``history: steps``, walked from the chain heads on the task's items
  (no bucket listing). 404 ``not found`` for an unknown task, 404 ``no recorded history`` when the task's flow
  records none (the local dev server then serves its in-memory history under the same format).
- The retry route creates a new task from a finished one, linked by the ordinary header ``retry_of: <id>`` (client
  headers ``x-asya-*`` are the mesh's, GW-CREATE-5). Body ``{"from"?: STEP, "timeout"?: seconds}``. Without
  ``from`` the new task starts as the old one did, with its input payload; with ``from`` (P-HIST-6) it starts at
  that recorded step: its route, its headers (a compiled flow's state, rebound to the new task, P-HIST-8), and the
  input the step received (by reference when it was offloaded: a copy in the new task's own folder, P-LARGE-7).
  A step of a fan-out slice replays the whole fan-out with that slice run again and its siblings' recorded results
  reused (P-HIST-9, ``asya_gateway.slicereplay``).
  409 when the task has not ended, the step's input was cut without a stored whole body, or the step's flow state
  does not parse; 400 for a STEP that does not parse or names no step (the message lists the choices). Answers 201
  ``{"id", "status", "deadline_at"?, "retry_of", "from"?: {"hop", "actor", "attempt", "envelope_id"?, "slice"?,
  "reused"?}}``: ``envelope_id`` for a child's step; ``slice``, its index, and ``reused``, how many siblings' results
  were reused rather than run again, for a slice.
"""

from __future__ import annotations

import uuid
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from asya import headers as hdr
from asya import naming
from asya.envelope import Envelope, Route, Status
from asya.flows import STATE_HEADER, Program, start
from asya.historyread import StepError, parse_step, read_history, select_step
from asya.historyslices import SliceReplay, SliceReplayError, plan_slice_replay, slice_header
from asya.payloads import REFERENCE_KEY, PayloadUnavailableError
from asya.store import TERMINAL
from asya.timeutil import format_ts
from asya_gateway.body import CREATE_BODY_LIMIT, read_json_object
from asya_gateway.context import GatewayContext, context_of
from asya_gateway.creation import start_task
from asya_gateway.errors import HttpError
from asya_gateway.requestmodels import RetryRequest, parse_body
from asya_gateway.routes.tasks import load_view, task_id_of
from asya_gateway.slicereplay import own_headers, replay_sends
from asya_gateway.validation import CreateBody, resolve_target

__all__ = ["RETRY_HEADER", "retry_task", "task_history"]

#: The header linking a retried task to the one it retries (not ``x-asya-*``: reserved, GW-CREATE-5).
RETRY_HEADER: Final = "retry_of"
_NO_HISTORY: Final = "no recorded history: the task's flow records none (set history: steps on the flow)"
#: Headers of a recorded step that a new task must not inherit (P-HIST-8): the mesh sets its own, and the rest name
#: the old task or its clock (its A2A task, a pending resume, its checkpoint, its origin, a retry's delay and budget).
_FRESH: Final = frozenset(
    {
        hdr.HISTORY_PREV,
        hdr.TRACEPARENT,
        hdr.TRACESTATE,
        RETRY_HEADER,
        hdr.A2A_TASK_ID,
        hdr.A2A_CONTEXT_ID,
        hdr.RESUME_TASK,
        hdr.RESUME_TIMEOUT,
        hdr.CHECKPOINTED,
        hdr.ORIGIN_ID,
        hdr.DELAY_UNTIL,
        hdr.FIRST_ATTEMPT,
    }
)


async def task_history(request: Request) -> Response:
    ctx = context_of(request)
    task_id = task_id_of(request)
    return JSONResponse(await _history(ctx, task_id, await load_view(ctx, task_id)))


async def retry_task(request: Request) -> Response:
    ctx = context_of(request)
    task_id = task_id_of(request)
    body = parse_body(RetryRequest, await read_json_object(request, limit=CREATE_BODY_LIMIT))
    timeout, raw_step = body.timeout, body.step
    view = await load_view(ctx, task_id)
    status = view.get("status")
    if status not in TERMINAL:
        raise HttpError(409, f"task {task_id} is {status}: retry a task once it has ended (or cancel it first)")
    flow, actor = view.get("flow"), view.get("actor")
    target = resolve_target({"flow": flow} if flow else {"actor": str(actor)}, ctx.manifest)
    start_at: Route | None = None
    start_headers: dict[str, Any] = {}
    chosen: dict[str, Any] | None = None
    plan: SliceReplay | None = None
    new_id = str(uuid.uuid4())
    if raw_step is None:
        if "payload" not in view:
            raise HttpError(409, f"task {task_id}'s input is stored apart (payload_url): retry it with asya retry")
        payload = view.get("payload")
    else:
        try:
            ref = parse_step(str(raw_step))
            history = await _history(ctx, task_id, view)
            chosen = select_step(history, ref)
        except StepError as exc:
            raise HttpError(400, str(exc)) from None
        start_headers = {k: v for k, v in (chosen.get("headers") or {}).items() if k not in _FRESH}
        if chosen.get("envelope_id") != task_id and slice_header(chosen) is not None:
            plan = await ctx.call(_slice_plan, ctx, history, chosen, view, str(raw_step))
            payload, start_at = plan.state, plan.route
            start_headers = own_headers(plan, start_headers, new_id)
        else:
            payload = _step_input(chosen, str(raw_step))
            route = chosen.get("route") or {}
            start_at = Route(
                list(route.get("prev") or []), str(route.get("curr") or chosen["actor"]), list(route.get("next") or [])
            )
    if start_at is not None:
        payload = await _own_copy(ctx, payload, new_id, start_at, str(raw_step))
    fan_out = None
    if plan is not None:
        bodies = [await _own_copy(ctx, m.payload, new_id, m.route, str(raw_step)) for m in plan.members]
        fan_out = replay_sends(plan, bodies, fresh=_FRESH)
    create = CreateBody(payload=payload, headers={}, timeout=timeout)
    answer = await start_task(
        ctx,
        target,
        create,
        start_at=start_at,
        start_headers=start_headers,
        extra_headers={RETRY_HEADER: task_id},
        task_id=new_id,
        fan_out=fan_out,
    )
    answer["retry_of"] = task_id
    if chosen is not None:
        answer["from"] = {"hop": chosen.get("hop"), "actor": chosen.get("actor"), "attempt": chosen.get("attempt")}
        if chosen.get("envelope_id") != task_id:
            answer["from"]["envelope_id"] = chosen.get("envelope_id")
        if plan is not None:
            answer["from"]["slice"] = plan.index
            answer["from"]["reused"] = sum(not m.rerun for m in plan.members)
    return JSONResponse(answer, status_code=201, headers={"Location": f"/api/v1/mesh/{answer['id']}"})


def _slice_plan(
    ctx: GatewayContext, history: dict[str, Any], chosen: dict[str, Any], view: dict[str, Any], raw: str
) -> SliceReplay:
    """P-HIST-9: the fan-out that replays the chosen slice; 409 when something it needs was not recorded whole. Runs
    in a worker thread: a fan-out sent at create is computed again with the flow's continuation (P-FLOW-21)."""
    flow_state = (chosen.get("headers") or {}).get(STATE_HEADER)
    program = _recorded_program(ctx, flow_state)

    def state_is_input() -> bool:
        # no hop recorded slice 0: a fan-out of calls sent the state itself to every slice, a map sent items
        pc = flow_state.get("pc") if isinstance(flow_state, dict) else None
        if program is None or not isinstance(pc, int) or not 1 <= pc <= len(program.code):
            return False
        return bool(program.code[pc - 1].get("op") == "fanout")

    def state_at_create() -> tuple[bool, Any]:
        return _state_at_create(program, history, chosen, view, now=format_ts(ctx.clock()))

    try:
        return plan_slice_replay(history, chosen, state_is_input=state_is_input, state_at_create=state_at_create)
    except SliceReplayError as exc:
        raise HttpError(409, f"from {raw}: {exc}") from None


def _recorded_program(ctx: GatewayContext, flow_state: object) -> Program | None:
    """The deployed program a recorded flow state names by digest, ``None`` when it is not the deployed one."""
    if not isinstance(flow_state, dict):
        return None
    spec = ctx.manifest.flows.get(str(flow_state.get("flow")))
    program = spec.program if spec is not None else None
    return program if program is not None and program.digest == flow_state.get("digest") else None


def _state_at_create(
    program: Program | None, history: dict[str, Any], chosen: dict[str, Any], view: dict[str, Any], *, now: str
) -> tuple[bool, Any]:
    """The state of a fan-out the gateway sent at create (P-FLOW-30, its set ``{id}/0``): the flow's first
    instructions run again on the task's input with the same program, a pure function of them (P-FLOW-2). Used only
    when the slice it recomputes for the chosen step equals the input that step recorded."""
    fan_in = slice_header(chosen) or {}
    if program is None or not str(fan_in.get("set", "")).endswith("/0") or "payload" not in view:
        return False, None
    if chosen.get("input_cut") is True or isinstance(chosen.get("input_ref"), str):
        return False, None
    task_id = str(history.get("id"))
    begun = Envelope(
        id=task_id, route=Route([], "", []), payload=view["payload"], headers={}, status=Status(phase="pending")
    )
    sends = start(program, begun, now=now)
    index = fan_in.get("slice_index")
    slices = {o.envelope.headers.get(hdr.FAN_IN, {}).get("slice_index"): o.envelope for o in sends}
    own, again = slices.get(0), slices.get(index)
    if own is None or again is None or own.id != task_id or again.payload != chosen.get("input"):
        return False, None
    return True, own.payload


async def _history(ctx: GatewayContext, task_id: str, view: dict[str, Any]) -> dict[str, Any]:
    spec = ctx.manifest.flows.get(str(view.get("flow"))) if view.get("flow") else None
    heads = await ctx.call(ctx.store.history_heads, task_id)
    if heads is None:
        raise HttpError(404, "not found")
    if not heads and (spec is None or spec.history != "steps"):
        raise HttpError(404, _NO_HISTORY)
    return await ctx.call(read_history, task_id, heads=heads, load=ctx.store.history_object)


async def _own_copy(ctx: GatewayContext, payload: Any, new_id: str, start_at: Route, raw: str) -> Any:
    """An offloaded step input as a reference into the new task's own folder (P-LARGE-7: a runtime reads only its
    task's references), by one ``CopyObject``; any other payload as it is."""
    try:
        return await ctx.call(
            ctx.payloads.copy_for, payload, new_id, hop=len(start_at.prev), actor=start_at.curr or naming.SINK
        )
    except PayloadUnavailableError:
        raise HttpError(
            409, f"from {raw}: the step's offloaded input is gone (offloaded payloads expire after 15 days)"
        ) from None


def _step_input(step: dict[str, Any], raw: str) -> Any:
    """The input the step received: by reference when it was offloaded, else as recorded unless it was cut."""
    if isinstance(step.get("input_ref"), str):
        return {REFERENCE_KEY: step["input_ref"]}
    recorded = step.get("input")
    if step.get("input_cut") is True:  # the flag, never the marker's shape: a payload may look like it (P-HIST-7)
        raise HttpError(
            409,
            f"from {raw}: the step's input ({step.get('input_bytes')} bytes) was cut at the flow's history_body_bytes "
            "and no whole copy was stored (only offloaded payloads are): raise history_body_bytes to replay it",
        )
    return recorded
