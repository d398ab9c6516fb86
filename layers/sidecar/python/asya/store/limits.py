"""Size limits of what a status update stores on the task item (GW-DATA-6, GW-DATA-8).

Every status write rewrites the task item and DynamoDB bills a write unit per started KB of the larger of the old and
new item, so the task item stays under 1 KB (GW-DATA-8). The values a status update puts there are bounded, in UTF-8
bytes:

- ``message`` at most :data:`MESSAGE_LIMIT_BYTES`, ``error`` at most :data:`ERROR_LIMIT_BYTES`: longer text is cut
  on a character boundary and ends with an ellipsis (:func:`clip_text`); the whole error stays in ``error_details``,
  in the result item;
- ``actor`` (``current_actor``) and ``failed_actor`` at most :data:`NAME_LIMIT` characters (actor names are at most
  40, P-NAME-1; a producer's longer one is refused);
- ``data`` (the small status-data extras: ``attempt``, ``delay_seconds``, and under progress ``detailed`` ``prev``,
  ``curr``, ``next``, ``duration_ms``, ...) at most :data:`DATA_LIMIT_BYTES` as compact JSON: :func:`fit_data` clips
  long strings and leaves out the route lists, then other members, naming them under ``omitted``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from asya.envelope import dumps

__all__ = [
    "DATA_LIMIT_BYTES",
    "ERROR_LIMIT_BYTES",
    "MESSAGE_LIMIT_BYTES",
    "NAME_LIMIT",
    "clip_text",
    "data_size",
    "fit_data",
    "fit_data_json",
    "oversize",
]

MESSAGE_LIMIT_BYTES: Final = 128
ERROR_LIMIT_BYTES: Final = 256
NAME_LIMIT: Final = 256
DATA_LIMIT_BYTES: Final = 384
#: Members of the status data the layer may leave out to fit, largest first: the input route lists.
_ROUTE_LISTS: Final = ("prev", "next")
_ELLIPSIS: Final = "\u2026"
_ELLIPSIS_BYTES: Final = 3


def oversize(text: str, limit: int) -> int | None:
    """The UTF-8 size of ``text`` when it is over ``limit`` bytes, else ``None``."""
    if len(text) * 4 <= limit:  # a character takes at most 4 bytes: no need to encode
        return None
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    return size if size > limit else None


def data_size(data: Mapping[str, Any]) -> int:
    """Size of ``data`` as the compact JSON the store writes."""
    return len(dumps(dict(data)).encode("utf-8")) if data else 0


def clip_text(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` UTF-8 bytes, else its head and an ellipsis, the whole within ``limit``."""
    if oversize(text, limit) is None:
        return text
    head = text.encode("utf-8")[: max(0, limit - _ELLIPSIS_BYTES)].decode("utf-8", errors="ignore")
    return head + _ELLIPSIS


def fit_data(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` within :data:`DATA_LIMIT_BYTES`: string members clipped to :data:`MESSAGE_LIMIT_BYTES` (a retrying
    event's ``error``), then members left out, the route lists first and then the largest, until it fits; the names
    of those left out are listed under ``omitted``."""
    return fit_data_json(data)[0]


def fit_data_json(data: Mapping[str, Any]) -> tuple[dict[str, Any], str]:
    """:func:`fit_data` and the compact JSON of its result, which the size check already encoded: a status update
    takes it as its ``data_json`` instead of encoding the same data again."""
    out = {
        name: clip_text(value, MESSAGE_LIMIT_BYTES) if isinstance(value, str) else value for name, value in data.items()
    }
    text = dumps(out)
    if oversize(text, DATA_LIMIT_BYTES) is None:
        return out, text
    omitted: list[str] = []
    by_size = sorted(out, key=lambda name: (name not in _ROUTE_LISTS, -len(dumps(out[name]))))
    for name in by_size:
        del out[name]
        omitted.append(name)
        if data_size({**out, "omitted": omitted}) <= DATA_LIMIT_BYTES:
            break
    out["omitted"] = omitted
    return out, dumps(out)
