"""What a declared target means to every sizing rule: whether the manifest declares one, and the headroom settings
are sized with. Pure."""

from __future__ import annotations

from typing import Any, Final

__all__ = ["HEADROOM", "declared"]

#: Settings are sized for the target times this, so the target is not the edge.
HEADROOM: Final = 1.25


def declared(manifest: Any) -> bool:
    """Whether the manifest declares a target; without one nothing is derived (the manifest's settings stand) and
    the default target is only checked."""
    return "capacity" in manifest.model_fields_set
