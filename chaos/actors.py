"""The chaos mesh's handlers: small deterministic actors wrapped by the fault player.

``split`` fans out (``{"x", "parts"}`` -> one frame ``{"x", "part": i}`` per part; frame 0 carries the task on),
``square`` computes (``{"x", "part"}`` -> ``{"x", "part", "square": x * x}``), ``slow`` sleeps ``payload["sleep"]``
seconds (past its task's deadline). So a task's expected result is known from its input alone.

Before its work each wrapper writes a :class:`HandlerCall` and asks the active :class:`~chaos.faults.Injector` (set
by :func:`activate`, one per mesh run) whether to raise a :class:`~chaos.faults.ChaosError`, to die before any send
(:class:`~chaos.faults.InvocationCrashError`) or to let its record's visibility timeout expire mid-call. ``split``
also asks whether to ``SET`` a crew actor into ``route.next`` (``crew_set``): P-ABI-15 refuses it with a
``ValueError`` thrown at the yield, which the wrapper catches and writes down (:func:`crew_sets`), then goes on with
its route unchanged; a SET that was not refused is a violation. Without an active injector the actors just compute.

``inc`` and ``double`` are the actors of the compiled flow ``calc`` (``chaos/mesh/flows/calc.py``; their plain
computations :func:`inc_value` and :func:`double_value` serve the plain run, ``chaos.flowplain``). ``inc`` asks
whether to ``SET`` (or ``DEL``) a header the layer owns (``layer_set``: P-HDR-5 refuses it with a ``ValueError`` at
the yield; written down by :func:`layer_sets`, the handler goes on), and both ask whether to return a second payload
(``second_payload``: P-FLOW-11 fails that hop, and nothing may run after it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from chaos.faults import ChaosError, Injector, Invocation, InvocationCrashError

__all__ = [
    "CREW_TARGETS",
    "LAYER_TARGETS",
    "HandlerCall",
    "activate",
    "calls",
    "crew_sets",
    "deactivate",
    "double",
    "double_value",
    "inc",
    "inc_value",
    "layer_sets",
    "slow",
    "split",
    "square",
]


@dataclass(frozen=True, slots=True)
class HandlerCall:
    """One run of a handler: the hop ``(hop, attempt)`` of P-ACK-8 it ran for, and the invocation it ran in."""

    actor: str
    envelope_id: str
    task_id: str
    hop: int
    attempt: int
    invocation: Invocation
    #: ``time.monotonic()`` when the handler was called: a run one lease after another's may repeat it (P-ACK-7).
    started: float = 0.0


#: The crew actors a ``crew_set`` fault puts into ``route.next`` (P-ABI-15 refuses each).
CREW_TARGETS: Final = ("x-sink", "x-sump", "x-deadline")
#: The layer's headers a ``layer_set`` fault writes, with the value it tries (P-HDR-5 refuses each): a flow state that
#: would restart the flow with its loop counters reset, a hop count reset, and the removal of the flow's state.
LAYER_TARGETS: Final[tuple[tuple[str, Any], ...]] = (
    ("x-asya-flow-state", {"flow": "calc", "pc": 0, "loops": {}}),
    ("x-asya-hops", 0),
    ("x-asya-flow-state", None),
)


class _Active:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.injector: Injector | None = None
        self.calls: list[HandlerCall] = []
        #: ``crew_set`` faults: ``(envelope id, crew name, refused)``; one not refused is a violation.
        self.crew_sets: list[tuple[str, str, bool]] = []
        #: ``layer_set`` faults: ``(envelope id, header, refused)``; one not refused is a violation.
        self.layer_sets: list[tuple[str, str, bool]] = []


_ACTIVE = _Active()


def activate(injector: Injector) -> None:
    """Play ``injector``'s faults from now on, with a fresh call log."""
    with _ACTIVE.lock:
        _ACTIVE.injector = injector
        _ACTIVE.calls = []
        _ACTIVE.crew_sets = []
        _ACTIVE.layer_sets = []


def deactivate() -> None:
    with _ACTIVE.lock:
        _ACTIVE.injector = None


def calls() -> list[HandlerCall]:
    """Every handler call since :func:`activate`."""
    with _ACTIVE.lock:
        return list(_ACTIVE.calls)


def crew_sets() -> list[tuple[str, str, bool]]:
    """Every ``crew_set`` played since :func:`activate`: ``(envelope id, crew name, refused at the yield)``."""
    with _ACTIVE.lock:
        return list(_ACTIVE.crew_sets)


def layer_sets() -> list[tuple[str, str, bool]]:
    """Every ``layer_set`` played since :func:`activate`: ``(envelope id, header, refused at the yield)``."""
    with _ACTIVE.lock:
        return list(_ACTIVE.layer_sets)


def _rolled(fault: str) -> Invocation | None:
    """The current invocation when this call plays ``fault``."""
    injector = _ACTIVE.injector
    invocation = injector.current() if injector is not None else None
    if injector is None or invocation is None or not injector.roll(fault, invocation):
        return None
    return invocation


def _crew_target() -> tuple[str, str] | None:
    """``(envelope id, crew name)`` when this call plays ``crew_set``."""
    injector = _ACTIVE.injector
    invocation = injector.current() if injector is not None else None
    if injector is None or invocation is None or not injector.roll("crew_set", invocation):
        return None
    envelope_id = invocation.envelope_id or ""
    return envelope_id, CREW_TARGETS[sum(map(ord, envelope_id)) % len(CREW_TARGETS)]


def _hop_of(envelope: dict[str, Any], actor: str) -> tuple[int, int]:
    """``(h, a)`` of P-ACK-8: ``h = len(route.prev) + 1``; ``a`` is the input attempt when the envelope is a retry of
    this actor (P-PROC-4), else 1."""
    route = envelope.get("route") or {}
    status = envelope.get("status") or {}
    retry = status.get("phase") == "retrying" and status.get("actor") == actor
    attempt = status.get("attempt", 1) if retry else 1
    return len(route.get("prev") or []) + 1, attempt if isinstance(attempt, int) else 1


def _play(actor: str) -> None:
    injector = _ACTIVE.injector
    invocation = injector.current() if injector is not None else None
    if injector is None or invocation is None or invocation.envelope is None:
        return
    envelope = invocation.envelope
    hop, attempt = _hop_of(envelope, actor)
    parent = envelope.get("parent_id")
    call = HandlerCall(
        actor=actor,
        envelope_id=str(envelope.get("id")),
        task_id=str(parent if isinstance(parent, str) else envelope.get("id")),
        hop=hop,
        attempt=attempt,
        invocation=invocation,
        started=time.monotonic(),
    )
    with _ACTIVE.lock:
        _ACTIVE.calls.append(call)
    if injector.roll("crash_before_send", invocation):
        raise InvocationCrashError(f"chaos: {actor} died before sending anything")
    if injector.roll("lease_expiry", invocation):
        injector.expire_lease(invocation)
    if injector.roll("handler_error", invocation):
        raise ChaosError(f"chaos: injected handler error in {actor}")


def split(payload: dict[str, Any]) -> Iterator[Any]:
    _play("split")
    target = _crew_target()
    if target is not None:
        refused = False
        try:
            yield "SET", ".route.next[0:0]", [target[1]]
        except ValueError:  # P-ABI-15: thrown at the yield; the handler goes on with its route unchanged
            refused = True
        with _ACTIVE.lock:
            _ACTIVE.crew_sets.append((target[0], target[1], refused))
    for part in range(int(payload["parts"])):
        yield {"x": payload["x"], "part": part}


def square(payload: dict[str, Any]) -> dict[str, Any]:
    _play("square")
    x = int(payload["x"])
    return {"x": x, "part": payload["part"], "square": x * x}


def slow(payload: dict[str, Any]) -> dict[str, Any]:
    _play("slow")
    time.sleep(float(payload["sleep"]))
    return payload


def inc_value(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "n": int(payload["n"]) + 1}


def double_value(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "n": int(payload["n"]) * 2}


def _flow_call(result: dict[str, Any]) -> Iterator[Any]:
    """The one payload of a flow call, or two when ``second_payload`` is played (P-FLOW-11)."""
    yield result
    if _rolled("second_payload") is not None:
        yield {**result, "second": True}


def inc(payload: dict[str, Any]) -> Iterator[Any]:
    _play("inc")
    invocation = _rolled("layer_set")
    if invocation is not None:
        envelope_id = invocation.envelope_id or ""
        header, value = LAYER_TARGETS[sum(map(ord, envelope_id)) % len(LAYER_TARGETS)]
        refused = False
        try:
            yield ("DEL", f".headers.{header}") if value is None else ("SET", f".headers.{header}", value)
        except ValueError:  # P-HDR-5: thrown at the yield; the handler goes on, the layer's header unchanged
            refused = True
        with _ACTIVE.lock:
            _ACTIVE.layer_sets.append((envelope_id, header, refused))
    yield from _flow_call(inc_value(payload))


def double(payload: dict[str, Any]) -> Iterator[Any]:
    _play("double")
    yield from _flow_call(double_value(payload))
