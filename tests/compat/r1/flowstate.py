"""FROZEN copy of release 1's reader of ``x-asya-flow-state`` (``asya.flows.interp.FlowState``, tests/compat/r1):
never edit it."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

STATE_HEADER: Final = "x-asya-flow-state"
_NO_BASE: Final[Any] = object()
_DIGEST: Final = re.compile(r"[0-9a-f]{64}")


class FlowError(Exception):
    """A malformed flow state."""


@dataclass(frozen=True)
class FlowState:
    """``pc``: where to resume; ``owner``: the envelope id whose lineage the flow is (P-FLOW-11); ``loops``: iteration
    counts; ``tries``: ``[try pc, deadlines depth]`` innermost last; ``deadlines``: saved deadlines; ``base``: the
    state before a fan-out inside a try, carried by its slices (P-FLOW-10); ``digest``: the program the task runs
    (P-FLOWV-1), empty on a task started before programs were versioned."""

    flow: str
    pc: int = 0
    owner: str = ""
    loops: Mapping[str, int] = field(default_factory=dict)
    tries: tuple[tuple[int, int], ...] = ()
    deadlines: tuple[str | None, ...] = ()
    base: Any = _NO_BASE
    digest: str = ""

    def to_header(self) -> dict[str, Any]:
        out: dict[str, Any] = {"flow": self.flow, "pc": self.pc, "owner": self.owner}
        if self.digest:
            out["digest"] = self.digest
        if self.loops:
            out["loops"] = dict(self.loops)
        if self.tries:
            out["try"] = [list(t) for t in self.tries]
        if self.deadlines:
            out["deadlines"] = list(self.deadlines)
        if self.base is not _NO_BASE:
            out["base"] = self.base
        return out

    @property
    def has_base(self) -> bool:
        return self.base is not _NO_BASE

    @classmethod
    def from_header(cls, raw: object) -> FlowState:
        """Raises :class:`FlowError` on a malformed header."""
        try:
            if not isinstance(raw, Mapping):
                raise TypeError("not an object")
            loops = raw.get("loops", {})
            tries = raw.get("try", [])
            deadlines = raw.get("deadlines", [])
            digest = raw.get("digest", "")
            if not isinstance(digest, str) or (digest and not _DIGEST.fullmatch(digest)):
                raise ValueError(f"digest must be 64 lowercase hex digits, got {digest!r}")
            state = cls(
                flow=str(raw["flow"]),
                pc=int(raw["pc"]),
                owner=str(raw.get("owner", "")),
                loops={str(k): int(v) for k, v in loops.items()},
                tries=tuple((int(t[0]), int(t[1])) for t in tries),
                deadlines=tuple(d if isinstance(d, str) else None for d in deadlines),
                base=raw.get("base", _NO_BASE),
                digest=digest,
            )
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            raise FlowError(f"{STATE_HEADER} is malformed: {exc}") from exc
        return state
