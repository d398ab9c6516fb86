"""The gateway-restart fault: when an SSE follower's stream goes live, at the injector's ``gateway_restart`` rate,
the local gateway is stopped and served again on the same port (:meth:`asya_local.mesh.LocalMesh.restart_gateway`),
from a background thread so the workload's clients meet it mid-request: the old gateway drains (its SSE streams end
at their next poll), requests under way get uvicorn's grace period, then connections are refused until the new
gateway answers ``/health``. Followers resume with ``Last-Event-ID`` and clients send again what got no answer.
One restart at a time: a roll that hits while one is under way is played (counted) but does not stack a second one.
``join`` waits for the last one.
"""

from __future__ import annotations

import threading
from typing import Protocol

from chaos.faults import Injector

__all__ = ["GatewayRestarter"]


class _Restartable(Protocol):
    def restart_gateway(self) -> None: ...


class GatewayRestarter:
    """Restarts ``mesh``'s gateway when ``injector`` rolls ``gateway_restart``; failures are kept in ``errors``."""

    def __init__(self, mesh: _Restartable, injector: Injector) -> None:
        self._mesh = mesh
        self._injector = injector
        self._thread: threading.Thread | None = None
        self.errors: list[str] = []

    def on_follow(self) -> None:
        if not self._injector.roll("gateway_restart", None):
            return
        if self._thread is not None and self._thread.is_alive():
            return
        self._thread = threading.Thread(target=self._restart, name="chaos-gateway-restart", daemon=True)
        self._thread.start()

    def _restart(self) -> None:
        try:
            self._mesh.restart_gateway()
        except Exception as exc:  # a gateway that does not come back fails the run, with the reason in the report
            self.errors.append(f"gateway restart: {type(exc).__name__}: {exc}")

    def join(self, timeout: float = 60.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)
