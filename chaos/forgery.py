"""The ``forged_status`` fault: crew-only statuses posted to a task's producer route (GW-EVT-1, GW-EVT-3).

Right after a task's creation, at the fault's rate, :class:`Forger` posts to ``POST /api/v1/mesh/{id}/events`` the
statuses only the crew writes: ``paused`` (with pause metadata), ``succeeded`` (with a forged result), ``failed`` and
``canceled``, once with the client's own credentials (what the workload sends) and once with the reporter's
credential (``reporter_key``, which the chaos run gives the gateway; sent as ``X-Asya-Reporter-Key``, as the HTTP
reporter does). Each answer is
written down as a :class:`ForgedPost`. The gateway refuses all of them: a client credential is no reporter's, and a
reporter's crew-only status answers 400. A forged post answered 2xx is a violation (``forged`` in the checker), and
one that got through shows in the other properties too (a task paused for ever, a succeeded task without its
checkpoint line).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Final

import httpx

from asya_gateway.auth import REPORTER_KEY_HEADER
from chaos.faults import Injector

__all__ = ["FORGED_EVENTS", "ForgedPost", "Forger"]

#: The forged events, one post each per credential.
FORGED_EVENTS: Final = (
    {"type": "status", "status": "paused", "data": {"pause_metadata": {"prompt": "forged"}}},
    {"type": "status", "status": "succeeded", "data": {"result": {"forged": True}}},
    {"type": "status", "status": "failed", "data": {"error": "forged"}},
    {"type": "status", "status": "canceled"},
)


@dataclass(frozen=True, slots=True)
class ForgedPost:
    task_id: str
    status: str
    #: ``client`` or ``reporter``
    credential: str
    #: The HTTP status answered (0: no answer).
    answer: int

    def __str__(self) -> str:
        return f"{self.task_id}: {self.status!r} with the {self.credential}'s credential answered {self.answer}"


class Forger:
    """Plays ``forged_status`` on each created task (``on_create``, from the workload's creating thread)."""

    def __init__(
        self,
        url: str,
        injector: Injector,
        *,
        reporter_key: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        """``transport``: the HTTP transport of the posts (tests); the network by default."""
        self._url = url
        self._injector = injector
        self._reporter_key = reporter_key
        self._transport = transport
        self._lock = threading.Lock()
        self.posts: list[ForgedPost] = []

    def on_create(self, task_id: str) -> None:
        if not self._injector.roll("forged_status", None):
            return
        credentials: list[tuple[str, dict[str, str]]] = [("client", {})]
        if self._reporter_key:
            credentials.append(("reporter", {REPORTER_KEY_HEADER: self._reporter_key}))
        with httpx.Client(base_url=self._url, timeout=30, transport=self._transport) as http:
            for name, headers in credentials:
                for event in FORGED_EVENTS:
                    self._post(http, task_id, event, name, headers)

    def _post(
        self, http: httpx.Client, task_id: str, event: dict[str, Any], name: str, headers: dict[str, str]
    ) -> None:
        try:
            answer = http.post(f"/api/v1/mesh/{task_id}/events", json=event, headers=headers).status_code
        except httpx.TransportError:
            answer = 0  # a gateway restart: nothing was accepted
        with self._lock:
            self.posts.append(ForgedPost(task_id, str(event["status"]), name, answer))

    def accepted(self) -> list[ForgedPost]:
        """The forged posts the gateway accepted (2xx): each is a violation."""
        with self._lock:
            return [post for post in self.posts if 200 <= post.answer < 300]
