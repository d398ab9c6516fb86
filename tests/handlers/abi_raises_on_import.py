"""A handler module whose top-level code raises."""

from __future__ import annotations

raise RuntimeError("configuration missing at import")
