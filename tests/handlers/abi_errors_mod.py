"""A user exception class living in a module (P-ERR-3 names it by module and qualified name)."""

from __future__ import annotations


class Boom(ValueError):
    """A custom handler error."""


def explode(payload: object) -> object:
    raise Boom(f"cannot handle {payload!r}")
