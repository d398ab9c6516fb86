"""Request bodies: size limits and JSON parsing whatever the ``Content-Type`` (GW-GEN-5).

A body over the limit answers 413 ``request body too large (limit N MiB)``: a ``Content-Length`` over the limit is
refused before reading, a chunked body as soon as the limit is passed. An unparseable body answers 400
``invalid JSON body``: this includes the non-standard ``NaN``/``Infinity`` tokens and numbers too large for a float
(``1e400``), which no envelope may carry, strings holding a lone UTF-16 surrogate (``"\\ud800"``, not encodable as
UTF-8), and nesting deeper than the parser's recursion limit; a top level that is not
an object answers 400 ``body must be a JSON object``. An empty body is an empty object (chosen: ``POST ?flow=x`` with no
body creates a task with payload ``null``).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Final

from starlette.requests import Request

from asya_gateway.errors import HttpError

__all__ = ["CREATE_BODY_LIMIT", "EVENTS_BODY_LIMIT", "parse_json_object", "read_json_object"]

MIB: Final = 1024 * 1024
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
CREATE_BODY_LIMIT: Final = 5 * MIB
EVENTS_BODY_LIMIT: Final = 1 * MIB


def _too_large(limit: int) -> HttpError:
    return HttpError(413, f"request body too large (limit {limit // MIB} MiB)")


def _reject_constant(token: str) -> Any:
    raise ValueError(f"invalid JSON token {token}")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number out of range: {text[:40]}")
    return value


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """Parse a body already read; raises :class:`HttpError` 400 with the GW-GEN-5 messages."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw, parse_constant=_reject_constant, parse_float=_finite_float)
        if _SURROGATE_ESCAPE.search(raw):  # "\ud800" parses but can never be stored or sent as UTF-8
            json.dumps(value, ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeError, RecursionError):
        raise HttpError(400, "invalid JSON body") from None
    if not isinstance(value, dict):
        raise HttpError(400, "body must be a JSON object")
    return value


async def read_json_object(request: Request, *, limit: int) -> dict[str, Any]:
    """Read the body up to ``limit`` bytes and parse it as a JSON object."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return parse_json_object(b"".join(chunks))
