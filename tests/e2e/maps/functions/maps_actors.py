"""Actors of tests/e2e/maps/asya.yaml. The local mesh runs handlers in-process, so slices meet at a
``threading.Barrier`` of this module, one per ``run`` named in the item.

- ``gate``: proceeds only when ``parties`` slices of its run have started, so its run succeeds only when they all run
  at the same time; slices run one after another leave the first waiting until ``wait_seconds`` (an upper guard, never
  what a passing run waits for) and then raise, which fails the task.
- ``counted``: counts the handlers of its run in flight (the most seen is written to ``{dir}/max_in_flight``); the
  first ``bound`` of them meet the test at a barrier (:func:`hold`) and wait until it lets them go, so the test sees
  what was sent while they run.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

_lock = threading.Lock()
_barriers: dict[str, threading.Barrier] = {}
_in_flight: dict[str, int] = {}
_most: dict[str, int] = {}
_holds: dict[str, tuple[threading.Barrier, threading.Event]] = {}


class SlicesNotTogetherError(RuntimeError):
    """The barrier's guard ran out: the slices did not all start."""


def _barrier(run: str, parties: int) -> threading.Barrier:
    with _lock:
        return _barriers.setdefault(run, threading.Barrier(parties))


def _meet(item: dict[str, Any]) -> None:
    barrier = _barrier(str(item["run"]), int(item["parties"]))
    try:
        barrier.wait(timeout=float(item.get("wait_seconds", 30)))
    except threading.BrokenBarrierError:
        raise SlicesNotTogetherError(
            f"slice {item.get('i')}: {barrier.n_waiting + 1} of {barrier.parties} slices met"
        ) from None


def prep(state: dict[str, Any]) -> dict[str, Any]:
    return state


def gate(item: dict[str, Any]) -> dict[str, Any]:
    _meet(item)
    return {**item, "passed": True}


def hold(run: str, bound: int) -> tuple[threading.Barrier, threading.Event]:
    """The first ``bound`` slices of ``run``'s ``counted`` map meet the caller (the test) at the barrier, then wait
    for the event; every slice that starts after the event is set runs straight through."""
    with _lock:
        return _holds.setdefault(run, (threading.Barrier(bound + 1), threading.Event()))


def in_flight(run: str) -> int:
    with _lock:
        return _in_flight.get(run, 0)


def counted(item: dict[str, Any]) -> dict[str, Any]:
    run = str(item["run"])
    barrier, release = hold(run, int(item["bound"]))
    with _lock:
        _in_flight[run] = _in_flight.get(run, 0) + 1
        _most[run] = max(_most.get(run, 0), _in_flight[run])
    try:
        if not release.is_set():
            guard = float(item.get("wait_seconds", 30))
            try:
                barrier.wait(timeout=guard)
            except threading.BrokenBarrierError:
                raise SlicesNotTogetherError(f"slice {item.get('i')}: the first slices did not meet") from None
            if not release.wait(timeout=guard):
                raise SlicesNotTogetherError(f"slice {item.get('i')}: never released")
    finally:
        with _lock:
            _in_flight[run] -= 1
            most = _most[run]
        Path(item["dir"], "max_in_flight").write_text(str(most), encoding="utf-8")
    return {**item, "counted": True}
