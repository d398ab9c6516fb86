"""Queues of actors the manifest no longer declares, under ``asya dev`` (LOCAL-ORPHAN-1 in docs/local.md).

A manifest change restarts the local mesh against the same moto (:mod:`asya_local.devloop`): an actor removed from
the manifest leaves its queue behind, and nothing polls it any more. The envelopes waiting there would keep their
tasks ``running`` until their deadlines, and senders that still name the actor would add more.

:class:`OrphanSweeper` fails those tasks at once instead. At each mesh start, and then every ``interval`` seconds
until nothing is left, it lists the namespace's queues (``asya-{ns}-*``, tagged with the namespace by
:func:`asya_local.provision.provision`); a queue that the current mesh did not provision and that is not a dead-letter
queue is *orphaned*. Each envelope received from it is sent to x-sump as
``UnknownActor`` (``actor '<name>' is no longer in the manifest``), which fails its task with its checkpoint, and is
then deleted from the queue (a body that does not parse goes to x-sump as ``ParseError``). An orphaned queue that is
empty, nothing in flight or delayed, is deleted: a sender that still names the actor then gets ``UnknownActor`` itself
(P-ROUTE-8) instead of stranding another envelope. Its DLQ is kept, with what it holds, for inspection
(``mq-diagnostic`` reports it with ``declared: false``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection
from typing import Any, Final

from botocore.exceptions import BotoCoreError, ClientError

from asya import naming
from asya.timeutil import Clock, system_clock
from asya.transport import Transport
from asya_local.provision import NAMESPACE_TAG
from asya_local.sumpdrain import drain_to_sump

__all__ = ["OrphanSweeper"]

_log = logging.getLogger("asya_local.orphans")

_DLQ_SUFFIX: Final = "-dlq"
_COUNTS: Final = (
    "ApproximateNumberOfMessages",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
)
_NO_QUEUE: Final = frozenset({"AWS.SimpleQueueService.NonExistentQueue", "QueueDoesNotExist"})


class OrphanSweeper:
    """Fails the envelopes of the namespace's orphaned queues and deletes those queues (module docstring)."""

    def __init__(
        self,
        *,
        namespace: str,
        sqs: Any,
        provisioned: Collection[str],
        clock: Clock = system_clock,
        interval: float = 1.0,
    ) -> None:
        """``provisioned``: the URLs of every queue and DLQ the current mesh created."""
        self._namespace = namespace
        self._prefix = f"asya-{namespace}-"
        self._sqs = sqs
        self._known = frozenset(url.rstrip("/").rsplit("/", 1)[-1] for url in provisioned)
        self._transport = Transport(namespace=namespace, sqs=sqs)
        self._clock = clock
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sweep(self) -> tuple[int, int]:
        """One pass: ``(envelopes sent to x-sump, orphaned queues left)``."""
        failed = left = 0
        for actor, url in self._orphans():
            try:
                failed += self._drain(actor, url)
                if self._empty(url):
                    self._sqs.delete_queue(QueueUrl=url)
                    _log.warning("deleted the queue of actor %r, which the manifest no longer declares", actor)
                else:
                    left += 1
            except ClientError as exc:
                if exc.response["Error"]["Code"] not in _NO_QUEUE:
                    raise
        return failed, left

    def start(self) -> None:
        """Sweep now, then in a daemon thread until no orphaned queue is left or :meth:`stop`."""
        _, left = self.sweep()
        if left:
            self._thread = threading.Thread(target=self._run, name="asya-orphans", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self._interval + 10)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                if self.sweep()[1] == 0:
                    return
            except (ClientError, BotoCoreError) as exc:  # moto restarting or gone: the dev loop reports that
                _log.warning("orphaned queues not swept: %s", exc)

    def _orphans(self) -> list[tuple[str, str]]:
        urls: list[str] = []
        token: str | None = None
        while True:
            page = self._sqs.list_queues(
                QueueNamePrefix=self._prefix, MaxResults=1000, **({"NextToken": token} if token else {})
            )
            urls.extend(page.get("QueueUrls") or [])
            token = page.get("NextToken")
            if not token:
                break
        found = []
        for url in urls:
            name = url.rstrip("/").rsplit("/", 1)[-1]
            actor = name.removeprefix(self._prefix)
            if name in self._known or name.endswith(_DLQ_SUFFIX) or not naming.is_valid_actor_name(actor):
                continue
            try:
                tags = self._sqs.list_queue_tags(QueueUrl=url).get("Tags") or {}
            except ClientError as exc:
                if exc.response["Error"]["Code"] in _NO_QUEUE:
                    continue
                raise
            if tags.get(NAMESPACE_TAG) == self._namespace:  # not a queue of a namespace that merely shares the prefix
                found.append((actor, url))
        return found

    def _drain(self, actor: str, url: str) -> int:
        message = f"actor {actor!r} is no longer in the manifest: its queue was left behind by a restart"
        return drain_to_sump(self._sqs, url, actor=actor, transport=self._transport, message=message, clock=self._clock)

    def _empty(self, url: str) -> bool:
        attributes = self._sqs.get_queue_attributes(QueueUrl=url, AttributeNames=list(_COUNTS))["Attributes"]
        return all(int(attributes.get(name, 0)) == 0 for name in _COUNTS)
