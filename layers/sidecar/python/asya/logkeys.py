"""The log keys of the record being processed (P-TRACE-4): ``correlation_id``, ``attempt`` and ``phase``.

They live in a context variable, not in the logger: :func:`record` opens a record's scope and removes its keys when
the record ends, so a batch-level line (history flush, backoff) and the ticker thread's lines carry none, and records
run concurrently (threads or asyncio tasks, each with its own context) never see each other's. :func:`update` sets
keys inside the open scope. A logger shows them once :func:`install` added the filter that copies them onto each of
its log records; a key the call passes in ``extra`` wins. Runtime-wide keys (``actor``) stay in the logger.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any, Final

__all__ = ["install", "record", "update"]

_NONE: Final[Mapping[str, object]] = MappingProxyType({})
_KEYS: ContextVar[Mapping[str, object]] = ContextVar("asya_record_log_keys", default=_NONE)


class _RecordKeys(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        fields = record.__dict__
        for key, value in _KEYS.get().items():
            fields.setdefault(key, value)
        return True


_FILTER: Final = _RecordKeys()


def install(logger: Any) -> None:
    """Let ``logger`` (a Powertools ``Logger`` or a ``logging.Logger``) show the record's keys; idempotent."""
    logger.addFilter(_FILTER)


@contextmanager
def record(**keys: object) -> Iterator[None]:
    """One record's scope: ``keys`` (and any :func:`update` inside) are gone when it exits."""
    token = _KEYS.set(MappingProxyType(dict(keys)))
    try:
        yield
    finally:
        _KEYS.reset(token)


def update(**keys: object) -> None:
    """Add or replace keys of the open record's scope (outside one they last until the context ends)."""
    _KEYS.set(MappingProxyType({**_KEYS.get(), **keys}))
