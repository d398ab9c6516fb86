"""The chaos mesh's handlers (``chaos/mesh/asya.yaml``): the fault-playing wrappers of :mod:`chaos.actors`."""

from __future__ import annotations

from chaos.actors import double, inc, slow, split, square

__all__ = ["double", "inc", "slow", "split", "square"]
