"""The chaos mesh's handlers (``chaos/mesh/asya.yaml``): the fault-playing wrappers of :mod:`chaos.actors`."""

from __future__ import annotations

from chaos.actors import slow, split, square

__all__ = ["slow", "split", "square"]
