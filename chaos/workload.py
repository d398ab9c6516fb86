"""The chaos workload: tasks over the chaos mesh's flows, driven over HTTP as clients do, and a recorder of every
status a client observed.

A :class:`TaskPlan` is one task: ``fan`` (``split`` -> ``square``, 1..3 parts: fan-out children, retries under the
injected handler errors) with its expected result, some of them canceled a moment after creation, ``late``
(``slow`` past a 2 s deadline), and ``calc`` (the compiled flow ``chaos/mesh/flows/calc.py`` from ``{"n": 0..4}``,
whose expected result is its plain-Python run, ``chaos.flowplain``). The :class:`Workload` creates the tasks (at
most ``max_in_flight`` unfinished at a time), cancels those planned so, follows a share of them over SSE
(``/api/v1/mesh/{id}/events``, one stream per follower) and polls every unfinished task with
``GET /api/v1/mesh/{id}``. Each status seen becomes an :class:`Observation`; the order of one stream (one SSE
follower, or the GET poller) is the order it was seen in.

Clients behave as a careful client of a gateway that may restart (the gateway-restart fault): a request that got no
HTTP answer is sent again after ``_RETRY_PAUSE`` (GET is safe and DELETE idempotent, GW-CANCEL-1). A creation cut
after it was sent is ambiguous (a keep-alive connection the stopping server closed before it read the request, or
after it created the task): every creation carries its own ``Idempotency-Key`` (GW-CREATE-R3-6), so it is sent again
with that key and answers the task it may already have created, never a second one (a 409, the first attempt still
being created, is sent again too). These are still counted apart (:attr:`Recorder.ambiguous`). An SSE follower
whose stream ends early (the gateway drained it) or breaks resumes it with ``Last-Event-ID`` after the server's
``retry`` delay, as EventSource does (GW-SSE-9). Each is counted (:attr:`Recorder.retries`, :attr:`Recorder.resumes`).
A follower follows its task until it sees the terminal status or the workload's budget ends; the latter is recorded as
an error. ``on_follow`` is called once per follower, when its stream delivered its first status (the gateway-restart
fault restarts the gateway there); ``on_create`` once per task, right after its creation (the forged-status fault posts
there).
"""

from __future__ import annotations

import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

import httpx

from asya_local.sse import SseParser

__all__ = ["TERMINAL", "Observation", "Recorder", "TaskPlan", "Workload", "plan_tasks"]

TERMINAL: Final = frozenset({"succeeded", "failed", "canceled"})
_POLL_PAUSE: Final = 0.2
_FOLLOW_READ_SECONDS: Final = 3.0
_RETRY_PAUSE: Final = 0.25
#: a first creation still under way (409) or cut by a restart (5xx): sent again with the same Idempotency-Key
_CREATE_RETRY_STATUSES: Final = frozenset({409, 429, 502, 503, 504})
_DEFAULT_SSE_RETRY_MS: Final = 1000
#: Answers a client waits out (Retry-After) and sends again: the gateway stopping or shedding load.
_RETRYABLE: Final = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class TaskPlan:
    flow: str
    payload: dict[str, Any]
    #: Seconds after creation to cancel the task (``None``: never).
    cancel_after: float | None = None
    follow: bool = False

    @property
    def expected(self) -> dict[str, Any] | None:
        """The result a ``fan`` task must end with: frame 0's lineage, part 0 squared (P-FAN-6); a ``calc`` task's is
        its flow's plain run."""
        if self.flow == "calc":
            from chaos.flowplain import plain_run  # loads the flow file only where a calc task is checked

            result: dict[str, Any] = plain_run(self.payload)[1]
            return result
        if self.flow != "fan":
            return None
        x = self.payload["x"]
        return {"x": x, "part": 0, "square": x * x}


def plan_tasks(
    count: int,
    *,
    seed: int = 0,
    cancel_rate: float = 0.08,
    late_rate: float = 0.06,
    follow_rate: float = 0.25,
    calc_rate: float = 0.2,
) -> list[TaskPlan]:
    """``count`` tasks, the same for the same seed."""
    draw = random.Random(seed)
    plans = []
    for index in range(count):
        kind = draw.random()
        if kind < late_rate:
            plans.append(TaskPlan("late", {"sleep": 4}, follow=draw.random() < follow_rate))
            continue
        if kind < late_rate + calc_rate:
            plans.append(TaskPlan("calc", {"n": draw.randint(0, 4)}, follow=draw.random() < follow_rate))
            continue
        cancel = draw.uniform(0.0, 0.4) if draw.random() < cancel_rate else None
        payload = {"x": index, "parts": draw.randint(1, 3)}
        plans.append(TaskPlan("fan", payload, cancel_after=cancel, follow=draw.random() < follow_rate))
    return plans


@dataclass(frozen=True, slots=True)
class Observation:
    task_id: str
    #: ``create``, ``get`` or ``sse``; ``stream`` names the ordered stream it belongs to.
    source: str
    stream: str
    status: str
    at: float


class Recorder:
    """Every observation, in the order each stream saw them (thread-safe)."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._monotonic = monotonic
        self.observations: list[Observation] = []
        self.errors: list[str] = []
        #: Requests sent again because the first got no HTTP answer.
        self.retries = 0
        #: SSE streams that broke and were resumed with ``Last-Event-ID``.
        self.resumes = 0
        #: Creations cut after they were sent (sent again with their Idempotency-Key: never a second task).
        self.ambiguous = 0

    def observe(self, task_id: str, source: str, stream: str, status: str) -> None:
        with self._lock:
            self.observations.append(Observation(task_id, source, stream, status, self._monotonic()))

    def error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)

    def retried(self) -> None:
        with self._lock:
            self.retries += 1

    def cut_after_send(self) -> None:
        with self._lock:
            self.ambiguous += 1

    def resumed(self) -> None:
        with self._lock:
            self.resumes += 1


class Workload:
    """Runs ``plans`` against the gateway at ``url``; ``run`` returns ``{task id: plan}`` of the tasks created."""

    def __init__(
        self,
        url: str,
        plans: list[TaskPlan],
        recorder: Recorder,
        *,
        max_in_flight: int = 40,
        follow_workers: int = 6,
        monotonic: Callable[[], float] = time.monotonic,
        on_follow: Callable[[], None] | None = None,
        on_create: Callable[[str], None] | None = None,
    ) -> None:
        self._url = url
        self._plans = plans
        self._recorder = recorder
        self._max_in_flight = max_in_flight
        self._follow_workers = follow_workers
        self._monotonic = monotonic
        self._on_follow = on_follow
        self._on_create = on_create
        self._ends = float("inf")
        self._lock = threading.Lock()
        self._open: set[str] = set()
        self._done = threading.Event()
        self.tasks: dict[str, TaskPlan] = {}

    def run(self, *, budget_seconds: float) -> dict[str, TaskPlan]:
        """Create every task, then wait until each is terminal or the budget is spent."""
        ends = self._ends = self._monotonic() + budget_seconds
        with (
            httpx.Client(base_url=self._url, timeout=30) as http,
            ThreadPoolExecutor(self._follow_workers, thread_name_prefix="chaos-follow") as followers,
            ThreadPoolExecutor(2, thread_name_prefix="chaos-cancel") as cancels,
        ):
            poller = threading.Thread(target=self._poll, args=(ends,), name="chaos-poller", daemon=True)
            poller.start()
            for plan in self._plans:
                while len(self._open) >= self._max_in_flight and self._monotonic() < ends:
                    time.sleep(0.05)
                if self._monotonic() >= ends:
                    break
                task_id = self._create(http, plan)
                if task_id is None:
                    continue
                if self._on_create is not None:
                    self._on_create(task_id)  # the forged-status fault's opportunity
                if plan.cancel_after is not None:
                    cancels.submit(self._cancel, http, task_id, plan.cancel_after)
                if plan.follow:
                    followers.submit(self._follow, task_id)
            while self._open and self._monotonic() < ends:
                time.sleep(_POLL_PAUSE)
            self._done.set()
            poller.join()
        return dict(self.tasks)

    def _send(self, http: httpx.Client, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        """``method url``, sent again while it gets no HTTP answer (until the budget ends: ``None``)."""
        while True:
            try:
                return http.request(method, url, **kwargs)
            except httpx.TransportError as exc:
                if method == "POST" and not isinstance(exc, httpx.ConnectError):
                    self._recorder.cut_after_send()
                if self._monotonic() >= self._ends:
                    self._recorder.error(f"{method} {url}: no answer within the budget ({type(exc).__name__})")
                    return None
                self._recorder.retried()
                time.sleep(_RETRY_PAUSE)

    def _create(self, http: httpx.Client, plan: TaskPlan) -> str | None:
        key = {"Idempotency-Key": str(uuid.uuid4())}  # one per creation, the same on every resend (GW-CREATE-R3-6)
        while True:
            response = self._send(
                http, "POST", "/api/v1/mesh/", params={"flow": plan.flow}, json={"payload": plan.payload}, headers=key
            )
            if response is None:
                return None
            if response.status_code not in _CREATE_RETRY_STATUSES or self._monotonic() >= self._ends:
                break
            # the first attempt is still being created (409), or a restart cut it (503, GW-GEN-11): ask again with the
            # same key; a 500 is a defect the report shows, not something to wait out
            self._recorder.retried()
            time.sleep(_RETRY_PAUSE)
        if response.status_code != 201:
            self._recorder.error(f"create {plan.flow}: {response.status_code} {response.text[:200]}")
            return None
        task_id = str(response.json()["id"])
        with self._lock:
            self.tasks[task_id] = plan
            self._open.add(task_id)
        self._recorder.observe(task_id, "create", "create", str(response.json()["status"]))
        return task_id

    def _cancel(self, http: httpx.Client, task_id: str, after: float) -> None:
        time.sleep(after)
        response = self._send(http, "DELETE", f"/api/v1/mesh/{task_id}")
        if response is not None and response.status_code != 204:
            self._recorder.error(f"cancel {task_id}: {response.status_code} {response.text[:200]}")

    def _follow(self, task_id: str) -> None:
        """One SSE follower until the terminal status (or the budget's end). A stream quiet for
        ``_FOLLOW_READ_SECONDS`` is resumed with ``Last-Event-ID`` at once; one that ended early or broke (the gateway
        restarted) after the server's ``retry`` delay."""
        stream = f"sse:{task_id}"
        parser = SseParser()
        followed = False
        timeout = httpx.Timeout(30, read=_FOLLOW_READ_SECONDS)
        with httpx.Client(base_url=self._url, timeout=timeout) as http:
            while self._monotonic() < self._ends:
                headers = {"Accept": "text/event-stream"}
                if parser.last_event_id is not None:
                    headers["Last-Event-ID"] = parser.last_event_id
                try:
                    with http.stream("GET", f"/api/v1/mesh/{task_id}/events", headers=headers) as response:
                        if response.status_code in _RETRYABLE:
                            # the gateway stopping (GW-GEN-11) or shedding load (GW-OVL-2): the client waits and resumes
                            self._recorder.resumed()
                            time.sleep(float(response.headers.get("Retry-After", "1")))
                            continue
                        if response.status_code != 200:
                            self._recorder.error(f"sse {task_id}: {response.status_code}")
                            return
                        for line in response.iter_lines():
                            event = parser.feed(line)
                            if event is None or event.event != "status":
                                continue
                            status = str(event.json()["status"])
                            self._recorder.observe(task_id, "sse", stream, status)
                            if self._on_follow is not None and not followed:
                                followed = True
                                self._on_follow()  # the stream is live: the gateway-restart fault's opportunity
                            if status in TERMINAL:
                                return
                    # the response ended before the terminal status: the gateway drained it (a restart)
                    self._recorder.resumed()
                    time.sleep((parser.retry or _DEFAULT_SSE_RETRY_MS) / 1000)
                except httpx.ReadTimeout:
                    continue
                except httpx.TransportError:
                    self._recorder.resumed()
                    time.sleep((parser.retry or _DEFAULT_SSE_RETRY_MS) / 1000)
            self._recorder.error(f"sse {task_id}: no terminal status before the budget ended")

    def _poll(self, ends: float) -> None:
        with httpx.Client(base_url=self._url, timeout=30) as http:
            while not self._done.is_set() and self._monotonic() < ends:
                with self._lock:
                    pending = list(self._open)
                for task_id in pending:
                    try:
                        response = http.get(f"/api/v1/mesh/{task_id}")
                    except httpx.TransportError:
                        self._recorder.retried()  # the gateway is restarting: this task is read again next round
                        continue
                    if response.status_code in _RETRYABLE:
                        self._recorder.retried()
                        continue
                    if response.status_code != 200:
                        self._recorder.error(f"get {task_id}: {response.status_code} {response.text[:200]}")
                        continue
                    status = str(response.json()["status"])
                    self._recorder.observe(task_id, "get", "get", status)
                    if status in TERMINAL:
                        with self._lock:
                            self._open.discard(task_id)
                time.sleep(_POLL_PAUSE)
