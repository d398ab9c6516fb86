"""Which gateway an HTTP-reporter request goes to, and whether it may carry the API key (P-STAT-18): stdlib
only, so ``asya.config`` can check ``ASYA_GATEWAY_URL`` without loading the reporter.

- :func:`gateway_base` applies the SSRF guard: an envelope's ``x-asya-gateway-url`` is used only when it is a string
  of at most 2048 printable ASCII characters holding an absolute URL with scheme ``http`` or ``https`` (any case), a
  non-empty host, no user info and a valid port, when one is given; anything else (``file:``, ``http:///x``,
  ``http://user@host``, a relative path, a number) is refused and the configured ``ASYA_GATEWAY_URL`` applies, else
  nothing (reporting off for that envelope). The manifest's ``gateway.callback_url`` follows the same rule, so no
  envelope carries a URL the reporter would refuse.
- :func:`same_origin` compares scheme, host (case-insensitive) and port (the scheme's default when absent): the API key
  goes only to the origin of ``ASYA_GATEWAY_URL``, never to a host an envelope names.
- :func:`endpoint` joins a base (which may carry a path, such as API Gateway's stage ``.../prod/``) and the route,
  with the task id percent-encoded as one path segment.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote, urlsplit

__all__ = ["endpoint", "gateway_base", "is_gateway_url", "origin", "same_origin"]

_SCHEMES: Final = ("http", "https")
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
#: Longer values are not a base URL anyone configures; refusing them keeps the check cheap and the logs short.
_MAX_URL: Final = 2048


def is_gateway_url(value: object) -> bool:
    """True for an absolute ``http``/``https`` URL with a non-empty host and a valid port (the SSRF guard)."""
    return origin(value) is not None


def origin(value: object) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of a gateway URL, lower-cased, the port defaulted; ``None`` when it is not one."""
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_URL or not value.isascii():
        return None
    if any(ch.isspace() or not ch.isprintable() for ch in value):
        return None
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:  # a malformed netloc or a port out of range
        return None
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if scheme not in _SCHEMES or not host or "@" in parts.netloc:
        return None
    return (scheme, host, port if port is not None else _DEFAULT_PORTS[scheme])


def same_origin(a: str, b: str) -> bool:
    """True when both are gateway URLs of one origin (scheme, host, port)."""
    left = origin(a)
    return left is not None and left == origin(b)


def gateway_base(header_value: object, configured: str) -> str | None:
    """The base URL of one envelope's requests: its header when that passes the guard, else ``configured`` (``""``:
    none)."""
    if is_gateway_url(header_value):
        assert isinstance(header_value, str)  # narrowed by the guard
        return header_value
    return configured or None


def endpoint(base: str, task_id: str, suffix: str = "") -> str:
    """``{base}/api/v1/mesh/{id}{suffix}``; ``base`` may end with a slash."""
    return f"{base.rstrip('/')}/api/v1/mesh/{quote(task_id, safe='')}{suffix}"
