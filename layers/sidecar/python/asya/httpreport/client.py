"""HTTP transport of the HTTP reporter (P-STAT-18): background posts and bounded pre-flight reads.

- :meth:`GatewayClient.post` never blocks: it puts the request on a bounded in-memory queue (``queue_size``, default
  1,000) that one daemon thread, started on first use, posts in order with a 5 s timeout; a full queue drops the
  request with a warning. Requests to an origin whose breaker is open (``asya.httpreport.breaker``) are dropped.
  :meth:`GatewayClient.settle` waits for the queue to drain for at most 100 ms, and only once per stall of the gateway.
- :meth:`GatewayClient.read_statuses` reads ``GET {base}/api/v1/mesh/{id}`` for several tasks at once (up to 8 in
  parallel) and returns within 2 s whatever happens: a read still running then, an error, a 5xx, a non-JSON answer or
  an open breaker leaves that task's status unknown (``None``), as does a 404 (no task record).
- Every request carries ``X-Asya-Envelope-ID``; only when the request's base has the origin of ``ASYA_GATEWAY_URL``
  (``api_key_url``), reads carry ``X-API-Key`` (a client key) and posts ``X-Asya-Reporter-Key`` (the producer route
  takes a reporter key only, GW-EVT-1).

No request ever raises into the caller: failures are logged (a breaker that opens is logged once at WARNING).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from asya.gatewayurl import endpoint, origin, same_origin
from asya.httpreport.breaker import CircuitBreaker

if TYPE_CHECKING:
    import httpx

__all__ = ["POST_TIMEOUT_SECONDS", "READ_TIMEOUT_SECONDS", "SETTLE_SECONDS", "GatewayClient", "StatusRead"]

POST_TIMEOUT_SECONDS: Final = 5.0
READ_TIMEOUT_SECONDS: Final = 2.0
#: The longest the handler waits on the reporter (P-STAT-18), at most once per stall of the gateway.
SETTLE_SECONDS: Final = 0.1
ENVELOPE_ID_HEADER: Final = "X-Asya-Envelope-ID"
API_KEY_HEADER: Final = "X-API-Key"
REPORTER_KEY_HEADER: Final = "X-Asya-Reporter-Key"
_READERS: Final = 8
_JSON: Final = {"Content-Type": "application/json"}


@dataclass(frozen=True, slots=True)
class StatusRead:
    """One pre-flight read: the task ``task_id`` at ``base``, on behalf of envelope ``envelope_id``."""

    base: str
    task_id: str
    envelope_id: str


@dataclass(frozen=True, slots=True)
class _Post:
    base: str
    url: str
    headers: Mapping[str, str]
    body: bytes


class GatewayClient:
    """The reporter's HTTP side; ``client_factory(timeout)`` builds an ``httpx.Client`` (injectable for tests)."""

    def __init__(
        self,
        *,
        logger: logging.Logger | Any,
        api_key_url: str = "",
        api_key: str = "",
        reporter_key: str = "",
        post_timeout: float = POST_TIMEOUT_SECONDS,
        read_timeout: float = READ_TIMEOUT_SECONDS,
        queue_size: int = 1000,
        monotonic: Callable[[], float] = time.monotonic,
        client_factory: Callable[[float], httpx.Client] | None = None,
    ) -> None:
        self._log = logger
        self._api_key_url = api_key_url
        self._api_key = api_key
        self._reporter_key = reporter_key
        self._post_timeout = post_timeout
        self._read_timeout = read_timeout
        self._monotonic = monotonic
        self._factory = client_factory or _httpx_client
        self._queue: queue.Queue[_Post | None] = queue.Queue(maxsize=queue_size)
        self._lock = threading.Lock()
        self._breakers: dict[tuple[str, str, int], CircuitBreaker] = {}
        self._worker: threading.Thread | None = None
        self._post_client: httpx.Client | None = None
        self._read_client: httpx.Client | None = None
        self._readers: concurrent.futures.ThreadPoolExecutor | None = None
        self._dropping = False
        self._stalled = False

    # -- posts ------------------------------------------------------------------------------------------------------

    def post(self, base: str, task_id: str, envelope_id: str, body: bytes) -> None:
        """Queue ``POST {base}/api/v1/mesh/{task_id}/events``; returns at once."""
        item = _Post(
            base=base,
            url=endpoint(base, task_id, "/events"),
            headers={**_JSON, **self.headers(base, envelope_id, post=True)},
            body=body,
        )
        self._start()
        try:
            self._queue.put_nowait(item)
            self._dropping = False
        except queue.Full:
            if not self._dropping:  # once per burst: a stuck gateway would otherwise log every event
                self._log.warning("reporter queue full: events dropped", extra={"gateway": base})
            self._dropping = True

    def settle(self, timeout: float = SETTLE_SECONDS) -> bool:
        """Wait up to ``timeout`` seconds for the queued posts to leave, so FLY values reach the gateway before the
        frame that ends their task does; True when none is left. After a wait that timed out (the gateway is slow),
        later calls return at once until the queue has drained: a caller waits at most ``timeout`` per stall."""
        if self._stalled and self._queue.unfinished_tasks:
            return False
        self._stalled = not self.flush(timeout)
        return not self._stalled

    def flush(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until every queued post was sent or dropped; True when none is left."""
        deadline = self._monotonic() + timeout
        while self._queue.unfinished_tasks:
            if self._monotonic() >= deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self, timeout: float = 1.0) -> None:
        """Stop the poster thread (after the queued posts, up to ``timeout`` seconds) and close the clients."""
        worker = self._worker
        if worker is not None:
            with contextlib.suppress(queue.Full):  # still full: the daemon thread ends with the process
                self._queue.put(None, timeout=timeout)
            worker.join(timeout)
        if self._readers is not None:
            self._readers.shutdown(wait=False, cancel_futures=True)
        for client in (self._post_client, self._read_client):
            if client is not None:
                client.close()

    def headers(self, base: str, envelope_id: str, *, post: bool = False) -> dict[str, str]:
        """The request headers for ``base``: the envelope id, and only for its own origin the reporter key (a post)
        or the API key (a read)."""
        out = {ENVELOPE_ID_HEADER: envelope_id}
        name, key = (REPORTER_KEY_HEADER, self._reporter_key) if post else (API_KEY_HEADER, self._api_key)
        if key and same_origin(base, self._api_key_url):
            out[name] = key
        return out

    def breaker_open(self, base: str) -> bool:
        return self._breaker(base).is_open()

    def _start(self) -> None:
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="asya-http-reporter", daemon=True)
                self._worker.start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self._send(item)
            except Exception as exc:  # the poster thread must outlive any one request
                self._log.warning("reporter post failed", extra={"error": f"{type(exc).__name__}: {exc}"})
            finally:
                self._queue.task_done()

    def _send(self, item: _Post) -> None:
        import httpx

        breaker = self._breaker(item.base)
        if not breaker.allow():
            return
        if self._post_client is None:
            self._post_client = self._factory(self._post_timeout)
        try:
            response = self._post_client.post(item.url, content=item.body, headers=dict(item.headers))
        except httpx.HTTPError as exc:
            self._failed(breaker, item.base, f"{type(exc).__name__}: {exc}")
            return
        self._answered(breaker, item.base, response, "POST")

    # -- pre-flight reads -------------------------------------------------------------------------------------------

    def read_statuses(self, reads: Sequence[StatusRead]) -> dict[str, str | None]:
        """Each read task's status, ``None`` when unknown; returns within ``read_timeout`` seconds."""
        out: dict[str, str | None] = {read.task_id: None for read in reads}
        todo = [read for read in reads if self._breaker(read.base).allow()]
        if not todo:
            return out
        with self._lock:
            if self._readers is None:
                self._readers = concurrent.futures.ThreadPoolExecutor(_READERS, thread_name_prefix="asya-preflight")
            if self._read_client is None:
                self._read_client = self._factory(self._read_timeout)
            readers, client = self._readers, self._read_client
        futures = {readers.submit(self._read, client, read): read for read in todo}
        done, _late = concurrent.futures.wait(futures, timeout=self._read_timeout + 0.05)
        for future in done:
            out[futures[future].task_id] = future.result()
        return out

    def _read(self, client: httpx.Client, read: StatusRead) -> str | None:
        import httpx

        breaker = self._breaker(read.base)
        try:
            response = client.get(endpoint(read.base, read.task_id), headers=self.headers(read.base, read.envelope_id))
        except httpx.HTTPError as exc:
            self._failed(breaker, read.base, f"{type(exc).__name__}: {exc}")
            return None
        except Exception as exc:  # the reader pool must not lose a worker to one bad answer
            self._log.warning("pre-flight read failed", extra={"error": f"{type(exc).__name__}: {exc}"})
            return None
        if not self._answered(breaker, read.base, response, "GET") or response.status_code != 200:
            return None
        try:
            status = response.json().get("status")
        except (ValueError, AttributeError):
            self._log.warning("pre-flight answer is not a task view", extra={"gateway": read.base})
            return None
        return status if isinstance(status, str) else None

    # -- shared -----------------------------------------------------------------------------------------------------

    def _breaker(self, base: str) -> CircuitBreaker:
        key = origin(base) or ("", base, 0)
        with self._lock:
            breaker = self._breakers.get(key)
            if breaker is None:
                breaker = self._breakers[key] = CircuitBreaker(monotonic=self._monotonic)
            return breaker

    def _answered(self, breaker: CircuitBreaker, base: str, response: httpx.Response, method: str) -> bool:
        """Count an answer; True when the gateway is up (any status below 500)."""
        code = response.status_code
        if code >= 500:
            self._failed(breaker, base, f"HTTP {code}")
            return False
        breaker.success()
        if code >= 400 and code != 404:  # 404: an untracked task, a no-op (P-STAT-4)
            self._log.warning(
                "gateway refused a reporter request",
                extra={"gateway": base, "method": method, "status_code": code, "answer": response.text[:300]},
            )
        return True

    def _failed(self, breaker: CircuitBreaker, base: str, error: str) -> None:
        if breaker.failure():
            self._log.warning(
                "gateway unreachable: reporting to it paused",
                extra={"gateway": base, "error": error, "pause_seconds": breaker.pause},
            )
        else:
            self._log.info("reporter request failed", extra={"gateway": base, "error": error})


def _httpx_client(timeout: float) -> httpx.Client:
    import httpx

    # no redirects: a gateway answering 3xx must not steer the request (and its API key) elsewhere
    return httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False)
