"""The compiled form of a flow (P-FLOW-1): a :class:`Program` of JSON instructions, stored in the manifest model.

An instruction is a JSON object with ``op`` and, for the ones the compiler can place, ``line`` (the flow source line).
Jump targets are indexes into :attr:`Program.code`. Expressions are the JSON trees of :mod:`asya.flows.expr`.

=============  ==========================================================  ================================
op             members                                                     effect
=============  ==========================================================  ================================
``call``       ``actor``                                                   suspend: the actor is the next hop
``set``        ``path`` (expressions), ``expr``                            state[path] = value (a copy)
``test``       ``expr``, ``else``                                          jump to ``else`` when falsy
``jump``       ``to``                                                      jump
``loopinit``   ``id``                                                      the loop's counter = 0
``loop``       ``id``                                                      counter + 1; above the limit: fail
``endloop``    ``id``                                                      drop the counter
``try``        ``clauses``: ``[{errors: [pattern], to}]``                  push this try on the try stack
``endtry``                                                                 pop it
``deadline``   ``seconds``                                                 push deadline_at, set min(it, now+s)
``enddeadline``                                                            restore the pushed deadline_at
``fanout``     ``calls`` (actors), ``target`` (JSON Pointer), ``limit``?   suspend: one slice per call
``map``        ``actor``, ``source`` (expression), ``target``, ``limit``?  suspend: one slice per item
``pause``      ``prompt``, ``fields``, ``prompt_expr``?, ``timeout``?,       suspend: x-pause
               ``event`` and ``path`` (a ``wait_for``, P-WAIT-4)
``sleep``      ``seconds``                                                 suspend: x-resume, delayed (P-WAIT-3)
``return``                                                                 end: the route is exhausted
=============  ==========================================================  ================================

The end of ``code`` is an implicit ``return``. A ``pause`` whose prompt is computed from the state has
``prompt_expr``, the expression evaluated at the pause, and ``prompt`` its source text (drawn by ``asya flow show``);
a literal prompt has ``prompt`` only, so its program (and digest) is what it was before prompts could be computed.
``limit``, when present, is the most slices of that fan-out or map in flight at once (P-MAP-1, P-MAP-2).

:attr:`Program.max_pause` caps every pause of the flow (P-WAIT-1): a pause waits at most ``min(timeout, max_pause)``
seconds, ``max_pause`` when it names no timeout; ``None`` (the manifest's explicit ``max_pause: null``) lifts the cap.
The canonical JSON carries it only when it is not :data:`DEFAULT_MAX_PAUSE`, so programs compiled before the cap
existed keep their digests.

A program is versioned by its content (P-FLOWV-1): :attr:`Program.digest` is the SHA-256 of its canonical JSON
(:meth:`Program.canonical`: sorted keys, no spaces, UTF-8), the same bytes the program store keeps
(``asya.programstore``), so a reader checks what it read against the name it asked for.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "DEFAULT_MAX_PAUSE",
    "SUSPENDING_OPS",
    "Program",
    "aggregator_name",
]

#: P-FLOW-13: the loop guard when ``@flow(max_iterations=...)`` is absent.
DEFAULT_MAX_ITERATIONS: Final = 100
#: P-WAIT-1: the longest a flow's pause waits when the manifest sets no ``max_pause``: 7 days.
DEFAULT_MAX_PAUSE: Final = 7 * 24 * 3600
#: Instructions at which a continuation stops and the envelope leaves.
SUSPENDING_OPS: Final = frozenset({"call", "fanout", "map", "pause", "sleep", "return"})


def aggregator_name(flow: str) -> str:
    """The fan-in aggregator of a compiled flow's fan-outs (P-FLOW-8)."""
    return f"x-fanin-flow-{flow}"


@dataclass(frozen=True)
class Program:
    """One compiled flow. ``initial_route`` is the run of calls the flow starts with (for display and the static
    route); ``actors`` every actor the program may call, in first-use order."""

    flow: str
    code: tuple[Mapping[str, Any], ...]
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    source: str = ""
    initial_route: tuple[str, ...] = ()
    actors: tuple[str, ...] = field(default=())
    max_pause: int | None = DEFAULT_MAX_PAUSE

    def pause_timeout(self, timeout: int | None) -> int | None:
        """P-WAIT-1: the seconds a pause naming ``timeout`` (or none) waits before it raises ``TimeoutError``."""
        if timeout is None:
            return self.max_pause
        return timeout if self.max_pause is None else min(timeout, self.max_pause)

    @property
    def aggregator(self) -> str | None:
        """The flow's aggregator when the program fans out, else ``None``."""
        if any(ins["op"] in ("fanout", "map") for ins in self.code):
            return aggregator_name(self.flow)
        return None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "flow": self.flow,
            "max_iterations": self.max_iterations,
            "source": self.source,
            "initial_route": list(self.initial_route),
            "actors": list(self.actors),
            "code": [dict(ins) for ins in self.code],
        }
        if self.max_pause != DEFAULT_MAX_PAUSE:
            out["max_pause"] = self.max_pause
        return out

    def canonical(self) -> bytes:
        """The program's canonical JSON (sorted keys, compact, UTF-8): what its digest is taken of."""
        text = json.dumps(self.to_json(), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return text.encode("utf-8")

    @cached_property
    def digest(self) -> str:
        """64 lowercase hex digits: the SHA-256 of :meth:`canonical` (P-FLOWV-1)."""
        return hashlib.sha256(self.canonical()).hexdigest()

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> Program:
        code = raw.get("code")
        if not isinstance(code, Sequence) or not all(isinstance(i, Mapping) and "op" in i for i in code):
            raise ValueError(f"flow program {raw.get('flow')!r}: code must be a list of instructions")
        return cls(
            flow=str(raw["flow"]),
            code=tuple(dict(i) for i in code),
            max_iterations=int(raw.get("max_iterations", DEFAULT_MAX_ITERATIONS)),
            source=str(raw.get("source", "")),
            initial_route=tuple(raw.get("initial_route", ())),
            actors=tuple(raw.get("actors", ())),
            max_pause=_max_pause(raw.get("max_pause", DEFAULT_MAX_PAUSE)),
        )


def _max_pause(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"max_pause must be a positive integer (seconds) or null, got {value!r}")
    return value
