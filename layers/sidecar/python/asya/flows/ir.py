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
``fanout``     ``calls`` (actors), ``target`` (JSON Pointer)               suspend: one slice per call
``map``        ``actor``, ``source`` (expression), ``target``              suspend: one slice per item
``pause``      ``prompt``, ``fields``, ``prompt_expr``?                    suspend: x-pause
``return``                                                                 end: the route is exhausted
=============  ==========================================================  ================================

The end of ``code`` is an implicit ``return``. A ``pause`` whose prompt is computed from the state has
``prompt_expr``, the expression evaluated at the pause, and ``prompt`` its source text (drawn by ``asya flow show``);
a literal prompt has ``prompt`` only, so its program (and digest) is what it was before prompts could be computed.

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

__all__ = ["DEFAULT_MAX_ITERATIONS", "SUSPENDING_OPS", "Program", "aggregator_name"]

#: P-FLOW-13: the loop guard when ``@flow(max_iterations=...)`` is absent.
DEFAULT_MAX_ITERATIONS: Final = 100
#: Instructions at which a continuation stops and the envelope leaves.
SUSPENDING_OPS: Final = frozenset({"call", "fanout", "map", "pause", "return"})


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

    @property
    def aggregator(self) -> str | None:
        """The flow's aggregator when the program fans out, else ``None``."""
        if any(ins["op"] in ("fanout", "map") for ins in self.code):
            return aggregator_name(self.flow)
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "flow": self.flow,
            "max_iterations": self.max_iterations,
            "source": self.source,
            "initial_route": list(self.initial_route),
            "actors": list(self.actors),
            "code": [dict(ins) for ins in self.code],
        }

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
        )
