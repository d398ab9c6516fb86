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

Speed: moto 5.2's hot paths redo work whose answer cannot change; the child replaces them at start-up with functions
giving the same answers (each one's docstring says why the answer cannot change; the tests compare them with moto's):

- its dispatcher tells service hosts apart by listing its own package directory (a ``listdir`` and one ``isdir`` per
  entry, some 300 system calls) twice per request; the package cannot change while the process runs, so the listing
  is taken once (about a tenth less server CPU per request);
- ``ReceiveMessage`` checks each message it returns against the queue's retention period by computing every
  attribute of the queue twice, and ``ApproximateNumberOfMessages`` and its kin walk all the queue's messages: each
  receive costs time in proportion to the queue's depth, a tenth of the server's CPU with the mesh under load. The
  check reads the retention period from the queue instead;
- each distinct ``UpdateExpression`` text is parsed once, and each condition expression text lexed once, instead of
  twice per ``UpdateItem`` (the mesh sends a few dozen texts over and over);
- ``Query`` takes the queried partition rather than every item of the table sorted (an index query: every item,
  unsorted, since its results are sorted afterwards anyway), so a query no longer costs ``n log n`` in the table size;
- the response serializer finds the attribute names it tries for each member of a result once per member and
  shape, not by asking six alias providers for every attribute value of every item;
- ``call_action`` lists the handler class's methods once per class, not with ``inspect.getmembers`` per request.

Together the last four take about a fifth off moto's CPU per request with the mesh under load (``make bench``,
section 4).
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

__all__ = [
    "dynamodb_one_request_at_a_time",
    "lex_condition_expressions_once",
    "list_handler_methods_once",
    "list_moto_modules_once",
    "parse_update_expressions_once",
    "pick_serialized_keys_once",
    "query_reads_one_partition",
    "retention_from_the_queue",
]

#: Distinct expression texts kept parsed: the mesh sends a few dozen; the bound only caps a client that varies them.
_EXPRESSIONS = 1024


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
    parse_update_expressions_once()
    lex_condition_expressions_once()
    query_reads_one_partition()
    pick_serialized_keys_once()
    list_handler_methods_once()
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


def parse_update_expressions_once() -> None:
    """Parse each distinct ``UpdateExpression`` text once (idempotent).

    moto tokenizes and parses the expression twice per ``UpdateItem`` (in the handler, to list the placeholders it
    uses, and in the backend), in pure Python, although the tree depends on the text alone. Nothing mutates the tree
    it returns: the handler only reads it (``find_clauses``) and the backend's validator works on a deep copy. Texts
    that do not parse still raise each time (exceptions are not cached)."""
    import importlib

    # the module is untyped (a file-wide type: ignore): its attributes reach mypy as Any only through ModuleType
    parser = importlib.import_module("moto.dynamodb.parsing.expressions").UpdateExpressionParser
    if getattr(parser.make, "_asya_once", False):
        return
    parse = vars(parser)["make"].__func__
    parsed = functools.lru_cache(maxsize=_EXPRESSIONS)(parse)

    def make(cls: Any, expression_str: Any) -> Any:
        if type(expression_str) is not str:  # unhashable or odd input: moto's own path, its own error
            return parse(cls, expression_str)
        return parsed(cls, expression_str)

    setattr(make, "_asya_once", True)  # noqa: B010 - a marker on a plain function, for idempotence
    parser.make = classmethod(make)


def lex_condition_expressions_once() -> None:
    """Split each distinct condition expression text into tokens once (idempotent).

    ``ConditionExpressionParser`` (``ConditionExpression``, ``KeyConditionExpression``, ``FilterExpression``) first
    lexes the text with a dozen regular expressions per token, twice per conditional ``UpdateItem``; the tokens
    depend on the text alone. They are immutable named tuples (their ``children`` lists are empty and never
    appended to); each parse gets a new deque of them, since parsing consumes the deque. Texts that do not lex still
    raise each time."""
    from collections import deque

    from moto.dynamodb.comparisons import ConditionExpressionParser

    lex = ConditionExpressionParser._lex_condition_expression
    if getattr(lex, "_asya_once", False):
        return
    tokens: dict[tuple[type[ConditionExpressionParser], str], tuple[Any, ...]] = {}

    @functools.wraps(lex)
    def lex_once(self: ConditionExpressionParser) -> deque[Any]:
        text = self.condition_expression
        if type(text) is not str:
            return lex(self)
        key = (type(self), text)
        found = tokens.get(key)
        if found is None:
            found = tuple(lex(self))
            if len(tokens) < _EXPRESSIONS:
                tokens[key] = found
        return deque(found)

    setattr(lex_once, "_asya_once", True)  # noqa: B010 - a marker on a plain function, for idempotence
    ConditionExpressionParser._lex_condition_expression = lex_once  # type: ignore[method-assign]


def query_reads_one_partition() -> None:
    """Make ``Query`` take its candidates without sorting the whole table (idempotent).

    ``Table.query`` starts from ``all_items()``, every item of the table sorted by its key (``n log n`` comparisons
    of ``DynamoType``, each a few Python calls), so each query costs time in proportion to the table's size, which
    grows with every task and event; the mesh's backstop queries an index (16 shards) every few seconds. The same
    candidates, in an order that cannot show, come cheaper:

    - on the table's own key: the table holds its items by hash key (a dict keyed by ``DynamoType``, whose hash
      agrees with its equality), so that partition alone, sorted as ``all_items`` sorts it, is all the filter on the
      hash key would keep, in the same order;
    - on an index: the candidates are sorted afterwards by the index's keys then the table's, a key no two items
      share, so the order ``all_items`` hands them over in cannot show; they come unsorted."""
    from moto.dynamodb.models.table import Table

    query = Table.query
    if getattr(query, "_asya_partition", False):
        return
    all_items = Table.all_items
    current = threading.local()  # the query this thread is serving: (table, hash key or None for an index)

    @functools.wraps(query)
    def query_one_partition(self: Table, hash_key: Any, *args: Any, **kwargs: Any) -> Any:
        index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
        if not index_name and hash_key is None:
            return query(self, hash_key, *args, **kwargs)
        current.query = (self, None if index_name else hash_key)
        try:
            return query(self, hash_key, *args, **kwargs)
        finally:
            current.query = None

    @functools.wraps(all_items)
    def all_items_of_the_partition(self: Table) -> list[Any]:
        serving = getattr(current, "query", None)
        if serving is None or serving[0] is not self:
            return all_items(self)
        hash_key = serving[1]
        if hash_key is None:  # an index query: every item, in any order
            if self.range_key_attr:
                return [item for hash_set in self.items.values() for item in hash_set.values()]
            return list(self.items.values())
        stored = self.items.get(hash_key)  # get: items is a defaultdict, a lookup must not add a key
        if stored is None:
            return []
        found = list(stored.values()) if self.range_key_attr else [stored]
        return sorted(found, key=lambda x: (x.hash_key, x.range_key) if x.range_key else x.hash_key)

    setattr(query_one_partition, "_asya_partition", True)  # noqa: B010 - a marker on a plain function, for idempotence
    Table.query = query_one_partition  # type: ignore[method-assign]
    Table.all_items = all_items_of_the_partition  # type: ignore[method-assign]


def pick_serialized_keys_once() -> None:
    """Find the attribute names a response serializer tries for a member of a plain dict once per member (idempotent).

    moto serializes every result against the service model: for each member of each structure (each attribute value
    of each item is one, with ten members) its ``AttributePicker`` builds six alias providers and asks each, from the
    key, the member's shape, its parent shape and the value's class, which names to look up. For a ``dict`` value
    (no ``Meta``, class name ``dict``) those names depend on the rest alone, and service models are loaded once, so
    the shapes are the same objects on every request: the names are computed by moto's own picker the first time and
    looked up in the same order afterwards. Any other value, or a picker moto's serializer does not build, takes
    moto's own path."""
    from moto.core.constants import MISSING
    from moto.core.serialize import AttributePicker, AttributePickerContext, ResponseSerializer, XFormedAttributePicker
    from moto.core.utils import get_value as value_of

    get_value = ResponseSerializer.get_value
    if getattr(get_value, "_asya_once", False):
        return
    no_parent = object()
    names: dict[tuple[Any, ...], tuple[str, ...]] = {}

    @functools.wraps(get_value)
    def get_value_once(self: ResponseSerializer, value: Any, key: str, shape: Any) -> Any:
        picker = self._value_picker
        if type(value) is not dict or type(picker) not in (AttributePicker, XFormedAttributePicker):
            return get_value(self, value, key, shape)
        cache_key = (type(picker), tuple(picker.alias_providers), key, shape, getattr(shape, "parent", no_parent))
        possible = names.get(cache_key)
        if possible is None:
            context = AttributePickerContext(
                obj=value,
                key=key,
                shape=shape,
                operation_model=self.operation_model,
                service_model=self.operation_model.service_model,
                key_path=".".join(self.path),
            )
            try:
                possible = tuple(picker.get_possible_keys(context))
            except Exception:  # moto's lazy walk might stop before the failing provider: take moto's path
                return picker(context)
            names[cache_key] = possible
        # AttributePicker.__call__ from here on, with the names found
        for possible_key in possible:
            found = value_of(value, possible_key, MISSING)
            if found is not MISSING:
                break
        else:
            found = None
        if picker.response_transformers:
            key_path = f"{'.'.join(self.path)}.{key}"
            for transform_path, transform in picker.response_transformers.items():
                if key_path.endswith(transform_path):
                    return transform(found)
        return found

    setattr(get_value_once, "_asya_once", True)  # noqa: B010 - a marker on a plain function, for idempotence
    ResponseSerializer.get_value = get_value_once  # type: ignore[method-assign]


def list_handler_methods_once() -> None:
    """List each response handler class's methods once, not on every request (idempotent).

    ``BaseResponse.call_action`` checks the requested action against ``inspect.getmembers`` of the handler class
    (some hundred attributes, sorted) on every request; the classes do not change once the server is serving (the
    adjustments above are all applied before it starts)."""
    from moto.core import responses

    names_of = vars(responses)["method_names_from_class"]
    if getattr(names_of, "_asya_once", False):
        return
    listed = functools.cache(names_of)

    @functools.wraps(names_of)
    def method_names_from_class(clazz: object) -> list[str]:
        names: list[str] = listed(clazz)
        return names

    setattr(method_names_from_class, "_asya_once", True)  # noqa: B010 - a marker on a plain function, for idempotence
    setattr(responses, "method_names_from_class", method_names_from_class)  # noqa: B010 - moto looks it up per call


if __name__ == "__main__":
    code = _main(sys.argv[1:])
    # Skip the interpreter's own shutdown: tearing down moto's thousands of modules and objects took about a second
    # at every mesh's stop, and nothing the process holds outlives it (no file is left half-written: both standard
    # streams are flushed first).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
