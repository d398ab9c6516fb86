"""Actors of the e2e failing mesh: ``prepare`` passes the payload on, ``explode`` always raises ``Kaboom``."""

from __future__ import annotations

from typing import Any


class KaboomError(ValueError):
    """The error ``explode`` raises."""


def prepare(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "prepared": True}


def explode(payload: dict[str, Any]) -> dict[str, Any]:
    raise KaboomError(f"kaboom on {payload.get('text')!r}")
