"""Argument types shared by the ``asya`` commands: each turns a bad value into a one-line usage error (exit 2)."""

from __future__ import annotations

import argparse

import httpx

__all__ = ["check_http_url", "count", "http_url", "port", "seconds"]


def check_http_url(raw: str) -> str:
    """``raw`` without a trailing slash when it is an absolute ``http``/``https`` URL with a host; else ``ValueError``
    saying why, with the value."""
    try:
        url = httpx.URL(raw)
    except httpx.InvalidURL as exc:
        raise ValueError(f"{raw!r} is not a URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"{raw!r} is not an http(s) URL with a host, such as http://127.0.0.1:8080")
    return raw.rstrip("/")


def http_url(raw: str) -> str:
    try:
        return check_http_url(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def port(raw: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{raw!r} is not a port: use 0..65535 (0 picks a free one)")
    return value


def count(raw: str) -> int:
    """A whole number >= 1 (``--max``)."""
    return _at_least_one(raw, "an integer")


def seconds(raw: str) -> int:
    """A whole number of seconds >= 1 (``--timeout``, ``--wait``)."""
    return _at_least_one(raw, "an integer number of seconds")


def _at_least_one(raw: str, what: str) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {raw!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {raw!r}")
    return value
