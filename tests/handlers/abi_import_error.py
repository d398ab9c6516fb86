"""A handler module whose own import fails: it needs a package that is not installed."""

from __future__ import annotations

import abi_definitely_not_installed  # type: ignore[import-not-found]  # noqa: F401


def process(payload: object) -> object:
    return payload
