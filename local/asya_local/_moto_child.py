"""The child process ``MotoServer`` starts: ``python -P .../_moto_child.py HOST PORT``, a script on its own (it imports
moto and the standard library, not the package around it).

It serves moto's server app, as moto's ``ThreadedMotoServer`` does, on ``HOST:PORT`` (port 0: any free port); writes
one JSON line ``{"host": ..., "port": ...}`` to stdout once the socket is bound (any later output goes to stderr), or
exits with code 1, the reason on stderr, if it cannot bind; then serves until its stdin reaches end of file and
exits. The parent holds the other end of that pipe, so the server goes away with the parent however the parent ends
(a clean ``stop()``, an exception, ``SIGKILL``): no orphaned moto is left holding a port. ``SIGINT`` is ignored:
Ctrl-C in a terminal reaches the whole process group, and the parent must be able to drain its pollers against a
live moto before it closes the pipe.

Atomicity: DynamoDB requests are served one at a time (``dynamodb_one_request_at_a_time``), so a read never sees a
half-applied ``UpdateItem`` and two conditional writes never both pass a condition meant for one.

Speed: two of moto 5.2's hot paths redo work whose answer cannot change, so the child replaces them at start-up with
functions giving the same answers:

- its dispatcher tells service hosts apart by listing its own package directory (a ``listdir`` and one ``isdir`` per
  entry, some 300 system calls) twice per request; the package cannot change while the process runs, so the listing
  is taken once (about a tenth less server CPU per request);
- ``ReceiveMessage`` checks each message it returns against the queue's retention period by computing every
  attribute of the queue twice, and ``ApproximateNumberOfMessages`` and its kin walk all the queue's messages: each
  receive costs time in proportion to the queue's depth, a tenth of the server's CPU with the mesh under load. The
  check reads the retention period from the queue instead.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["dynamodb_one_request_at_a_time", "list_moto_modules_once", "retention_from_the_queue"]


def _main(argv: Sequence[str]) -> int:
    host, port = argv[0], int(argv[1])
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
    from werkzeug.serving import make_server

    # werkzeug logs every request at INFO to stderr unless its logger is configured; keep only warnings.
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    list_moto_modules_once()
    retention_from_the_queue()
    dynamodb_one_request_at_a_time()
    # What moto's ThreadedMotoServer builds, bound here rather than in its thread: werkzeug binds in make_server and,
    # when it cannot, writes why to stderr and exits with code 1, where ThreadedMotoServer would wait forever.
    server = make_server(
        host, port, DomainDispatcherApplication(create_backend_app), True, request_handler=MotoRequestHandler
    )
    bound_host, bound_port = server.server_address[:2]
    threading.Thread(target=server.serve_forever, name="moto-server", daemon=True).start()
    sys.stdout.write(json.dumps({"host": bound_host, "port": bound_port}) + "\n")
    sys.stdout.flush()
    # Nothing reads the pipe after that line: anything printed later goes to stderr rather than filling the pipe
    # until a write blocks the server.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    while sys.stdin.buffer.read(65536):
        pass
    # No server.shutdown(): it waits out werkzeug's half-second poll, and the state goes with the process anyway.
    return 0


def list_moto_modules_once() -> None:
    """Replace moto's per-request listing of its package directory with the listing taken once (idempotent)."""
    from moto import backends

    listing = backends.list_of_moto_modules
    if getattr(listing, "_asya_once", False):
        return
    modules = tuple(listing())

    def listed() -> Iterable[str]:
        return modules

    setattr(listed, "_asya_once", True)  # noqa: B010 - a marker on a plain function, for idempotence
    setattr(backends, "list_of_moto_modules", listed)  # noqa: B010 - module attribute: moto looks it up per call


def retention_from_the_queue() -> None:
    """Make ``SQSBackend.is_message_valid_based_on_retention_period`` read the queue's retention period directly."""
    from moto.sqs import models
    from moto.sqs.models import Message, SQSBackend

    def is_message_valid_based_on_retention_period(self: SQSBackend, queue_name: str, message: Message) -> bool:
        retention_period: int = self.get_queue(queue_name).message_retention_period  # type: ignore[attr-defined]
        # models.unix_time looked up per call, as moto's own method does (tests replace it to skip time)
        now: float = models.unix_time()  # type: ignore[attr-defined]
        return retention_period + message.sent_timestamp / 1000 > now  # type: ignore[operator]

    SQSBackend.is_message_valid_based_on_retention_period = is_message_valid_based_on_retention_period  # type: ignore[method-assign]


def dynamodb_one_request_at_a_time() -> None:
    """Serve DynamoDB requests one at a time, each from parsing its parameters to serializing its answer (idempotent).

    moto applies an ``UpdateItem`` to the stored item in place, clause by clause, after checking its condition, and
    serves each HTTP request on its own thread. Concurrent requests can therefore read a half-updated item (a status
    set, its step not yet) or both pass a condition only one of them should, which DynamoDB never allows: every
    single-item write is atomic and conditions are checked atomically with it. Python runs one thread at a time
    anyway, so the lock costs moto no throughput."""
    from moto.dynamodb.responses import DynamoHandler

    original = DynamoHandler.call_action
    if getattr(original, "_asya_locked", False):
        return
    lock = threading.RLock()

    @functools.wraps(original)
    def call_action(self: DynamoHandler) -> Any:
        with lock:
            return original(self)

    setattr(call_action, "_asya_locked", True)  # noqa: B010 - a marker on a plain function, for idempotence
    DynamoHandler.call_action = call_action  # type: ignore[method-assign]


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
