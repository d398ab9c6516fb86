"""The SQS ``AWSTraceHeader`` of a runtime's sends when X-Ray tracing is on (P-TRACE-3, ``ASYA_TRACING``).

Which header a send carries: the ``AWSTraceHeader`` of the SQS record being processed (Lambda copies the message's
system attribute into ``record["attributes"]``), else the invocation's own trace header, the environment variable
``_X_AMZN_TRACE_ID`` that the Lambda runtime sets anew for every invocation, else none (no system attribute).

:class:`TraceHeaders` is built only when tracing is on, with the environment mapping to read that variable from
(the live ``os.environ`` in Lambda, any mapping in tests and the local mode); it is read when a record begins, never
at import or build time. The runtime calls :meth:`TraceHeaders.begin` for each record and hands
:meth:`TraceHeaders.current` to its ``asya.transport.Transport`` (``trace_header=``), which stamps the value on every
message it sends. The value is passed on as it came: no X-Ray SDK is imported and no segment is recorded here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageSystemAttributeValueTypeDef

__all__ = ["RECORD_ATTRIBUTE", "TRACE_ID_ENV", "TraceHeaders", "system_attributes", "trace_headers"]

#: The variable the Lambda runtime sets to the current invocation's trace header.
TRACE_ID_ENV: Final = "_X_AMZN_TRACE_ID"
#: The SQS system attribute (and the key Lambda uses in a record's ``attributes``).
RECORD_ATTRIBUTE: Final[Literal["AWSTraceHeader"]] = "AWSTraceHeader"


def system_attributes(header: str) -> dict[Literal["AWSTraceHeader"], MessageSystemAttributeValueTypeDef]:
    """The ``MessageSystemAttributes`` of a send carrying ``header``."""
    return {RECORD_ATTRIBUTE: {"DataType": "String", "StringValue": header}}


def trace_headers(tracing: bool, environ: Mapping[str, str] | None = None) -> TraceHeaders | None:
    """A runtime's :class:`TraceHeaders` when ``tracing`` is on, else ``None``. ``environ`` is where the invocation's
    trace header is read per record (default: the live ``os.environ``, which the Lambda runtime updates per
    invocation)."""
    if not tracing:
        return None
    return TraceHeaders(os.environ if environ is None else environ)


class TraceHeaders:
    """The trace header of the record being processed; one per runtime. The value lives in a context variable: each
    record runs in its own copy of the context (``asya.batch.RecordBatch``), so records never see each other's, and
    what the outbox sends for a record after it ended runs in a copy of that record's context (``asya.outbox``)."""

    __slots__ = ("_current", "_environ")

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self._current: ContextVar[str | None] = ContextVar("asya_trace_header", default=None)

    def begin(self, record: Mapping[str, Any]) -> None:
        """A record (the Lambda SQS record mapping) begins: its sends carry its ``AWSTraceHeader``, else the
        invocation's trace header, else none."""
        attributes = record.get("attributes")
        header = attributes.get(RECORD_ATTRIBUTE) if isinstance(attributes, Mapping) else None
        if not isinstance(header, str) or not header:
            header = self._environ.get(TRACE_ID_ENV) or None
        self._current.set(header)

    def current(self) -> str | None:
        """The header of the current record's sends."""
        return self._current.get()
