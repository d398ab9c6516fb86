"""Where an actor outside AWS reports to: the SSRF guard of the HTTP reporter (P-STAT-18). Pure functions, no I/O.

``reporter_base(headers, env_url)`` is the base URL of the gateway the reporter posts to: the envelope header
``x-asya-gateway-url`` only when it is an absolute ``http``/``https`` URL with a non-empty host, no user info and no
control characters or blanks (anything else is ignored, as if absent: an envelope must not point the reporter at
``file://``, ``gopher://`` or a host-less URL); otherwise env ``ASYA_GATEWAY_URL`` under the same rule; with neither,
``None`` (reporting is off). ``sends_api_key(base, env_url)`` is true only when ``base`` has the same origin (scheme,
host, port) as ``ASYA_GATEWAY_URL``, so the key never goes to a host an envelope names.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import SplitResult, urlsplit

from asya.headers import GATEWAY_URL

__all__ = ["is_reporter_url", "reporter_base", "sends_api_key"]

_SCHEMES: Final = frozenset({"http", "https"})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}
#: Longer values are not a base URL anyone configures; refusing them keeps the check cheap and the logs short.
_MAX_URL: Final = 2048


def _split(value: object) -> SplitResult | None:
    if not isinstance(value, str) or not 0 < len(value) <= _MAX_URL:
        return None
    if not value.isascii() or any(c.isspace() or not c.isprintable() for c in value):
        return None
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        return None
    if parts.scheme not in _SCHEMES or not parts.hostname or "@" in parts.netloc:
        return None
    return parts


def is_reporter_url(value: object) -> bool:
    """True when ``value`` may be a reporter's base URL (see the module docstring)."""
    return _split(value) is not None


def reporter_base(headers: Mapping[str, Any], env_url: str | None) -> str | None:
    """The base URL the reporter uses for an envelope with ``headers``, or ``None`` when reporting is off."""
    for candidate in (headers.get(GATEWAY_URL), env_url):
        if is_reporter_url(candidate):
            assert isinstance(candidate, str)
            return candidate.rstrip("/")
    return None


def sends_api_key(base: str, env_url: str | None) -> bool:
    """True when ``base`` has the origin of ``env_url`` (``ASYA_GATEWAY_URL``)."""
    ours, theirs = _split(env_url), _split(base)
    if ours is None or theirs is None:
        return False
    return _origin(ours) == _origin(theirs)


def _origin(parts: SplitResult) -> tuple[str, str, int]:
    return parts.scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS[parts.scheme]
