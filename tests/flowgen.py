"""One generator of flow programs of the documented subset (docs/flows.md, The language), shared by the equivalence
tests (tests/unit/test_flow_generated.py, tests/e2e/test_local_flow_programs.py) and the fuzz tier
(tests/fuzz/test_flow_fuzz.py).

:func:`flow_programs` is a hypothesis strategy of :class:`FlowProgram`: the source text of a flow module whose flow
function uses actor calls, mutations (plain and augmented), ``if``/``elif``/``else``, bounded ``while`` loops (with a
counter, or ``while True`` with ``break``; ``continue`` and ``break`` under tests), ``try``/``except`` around actors
that raise (tests/flowgen_actors.py), fan-outs (list literals), maps (comprehensions over ``state["items"]``), bounded
maps (``map(act, state["items"], max_concurrency=K)``, and ``@flow(max_concurrency=K)`` bounding every fan-out of a
program), pauses (resumed with :data:`RESUME`), ``timeout`` blocks and ``return``. ``lead``, ``middle`` and ``tail``
force a construct into the first, a middle or the last top-level position. :func:`payloads` draws the payloads the
programs are written for; ``wild=True`` (the fuzz tier) also draws partial expressions (a missing key, a division by a
payload value), loop bounds past ``max_iterations`` and payloads of any shape, where the compiled run may fail with
``FlowError`` where plain Python does not.

Every program terminates as plain Python: loops are bounded by a counter in the state, and a fan-out inside a loop is
reduced to its length, so the state stays small.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from asya.flows import Program, compile_flow
from tests.flowgen_actors import ACTORS, RAISING, SAFE

#: Every construct a program can have, as named by ``lead``/``middle``/``tail``.
CONSTRUCTS: Final = (
    "call",
    "set",
    "if",
    "while",
    "try",
    "fanout",
    "map",
    "bmap",
    "pause",
    "timeout",
    "pass",
    "return",
)
#: What the plain run and the mesh merge in at a pause (a shallow merge, P-RESUME-4).
RESUME: Final = {"approved": True}
MAX_ITERATIONS: Final = 4
_EXCEPT_CLAUSES: Final = ("ValueError", "KeyError", "LookupError", "(ValueError, KeyError)", "ArithmeticError")


@dataclass(frozen=True)
class FlowProgram:
    """A generated flow module: ``name`` is the flow (and function) name, ``source`` the module text. ``exact_calls``
    is false when a fan-out or map holds an actor that can raise: plain Python then stops at the first failing call
    of the list where the mesh runs every slice, so only the outcome is compared, not the calls."""

    name: str
    source: str
    exact_calls: bool
    pauses: bool

    def namespace(self) -> dict[str, Any]:
        """The module run as plain Python (the actors are injected by the plain run)."""
        namespace: dict[str, Any] = {"__name__": f"flowgen_{self.name}"}
        exec(compile(self.source, f"flows/{self.name}.py", "exec"), namespace)
        return namespace

    def compile(self) -> Program:
        return compile_flow(self.source, flow=self.name, filename=f"flows/{self.name}.py", actors=set(ACTORS))


class _Writer:
    """Draws statements; ``draw`` is hypothesis's, ``wild`` allows partial expressions and unbounded loop counts."""

    def __init__(self, draw: st.DrawFn, *, wild: bool, max_depth: int, pauses: bool, is_async: bool) -> None:
        self.draw = draw
        self.is_async = is_async
        self.wait = "await " if is_async else ""
        self.wild = wild
        self.max_depth = max_depth
        self.allow_pause = pauses
        self.counters = 0
        self.exact_calls = True
        self.pauses = False

    # expressions -------------------------------------------------------------------------------------------------

    def number(self) -> str:
        options = [
            'state["n"] + {k}',
            'state["n"] % 1000 * {k}',
            'state["n"] // {p}',
            'state["n"] % {p}',
            'len(state["log"])',
            'len(state["items"])',
            'state.get("a", 0) + {k}',
            'max(state["n"], {k})',
            'abs(state["n"]) - {p}',
            "{k}",
            'int(float(state["n"]) / {p})',
            'min(state["n"], {k}, len(state["items"]))',
            '[{k}, state["n"]][{p} % 2]',
            '{{"v": state["n"]}}["v"]',
            '(state["n"], {k})[0]',
            '-state["n"] if state["n"] > {k} else {k}',
        ]
        if self.wild:
            options += ['state["n"] // state.get("a", 0)', 'state["missing"] + 1', 'state["log"][{p}]', "int(state)"]
        template = self.draw(st.sampled_from(options))
        return template.format(k=self.draw(st.integers(-3, 5)), p=self.draw(st.integers(1, 4)))

    def condition(self) -> str:
        simple = self.draw(
            st.sampled_from(
                [
                    "{number} {op} {k}",
                    '"{a}" in state["log"]',
                    '"{a}" not in state["log"]',
                    'state["items"]',
                    'not state.get("approved", False)',
                    'state.get("a") is None',
                    'state.get("a") is not None and state["a"] > {k}',
                    'bool(state["items"])',
                    '(state["log"][0] if state["log"] else "none") == "{a}"',
                    'state["n"] % 2 == 0 and len(state["log"]) < {p}',
                    'state["n"] < {k} or "{a}" in state["log"]',
                ]
            )
        )
        return simple.format(
            number=self.number(),
            op=self.draw(st.sampled_from(["<", "<=", "==", "!=", ">", ">="])),
            k=self.draw(st.integers(-3, 6)),
            p=self.draw(st.integers(1, 4)),
            a=self.draw(st.sampled_from(SAFE)),
        )

    # statements --------------------------------------------------------------------------------------------------

    def block(self, depth: int, *, in_loop: bool, size: int | None = None) -> list[str]:
        count = size if size is not None else self.draw(st.integers(1, 3))
        return [line for _ in range(count) for line in self.statement(depth, in_loop=in_loop)]

    def statement(self, depth: int, *, in_loop: bool, kind: str | None = None) -> list[str]:
        simple = ["call", "call", "set", "set", "fanout", "bmap", "timeout", "pass"]
        if not self.is_async:  # a comprehension of calls is a map only where plain Python calls them: a sync flow
            simple.append("map")
        if self.allow_pause:
            simple.append("pause")
        nested = ["if", "while", "try"] if depth < self.max_depth else []
        if in_loop:
            simple += ["break", "continue"]
        if kind is None:
            kind = self.draw(st.sampled_from(simple + nested + ["return"]))
        return getattr(self, f"_{kind}")(depth, in_loop=in_loop)

    def _call(self, depth: int, *, in_loop: bool) -> list[str]:
        actor = self.draw(st.sampled_from(sorted(ACTORS)))
        return [f"state = {self.wait}{actor.replace('-', '_')}(state)"]

    def _pass(self, depth: int, *, in_loop: bool) -> list[str]:
        return ["pass"]

    def _set(self, depth: int, *, in_loop: bool) -> list[str]:
        form = self.draw(st.integers(0, 5))
        if form == 0:
            return [f'state["{self.draw(st.sampled_from(["a", "n", "b"]))}"] = {self.number()}']
        if form == 5:
            return [f'state["d"] = {{"n": state["n"], "t": ({self.number()}, "x"), "f": state["n"] / 4}}']
        if form == 1:
            op = self.draw(st.sampled_from(["+=", "-=", "//=", "%=", *(["*="] if self.wild else [])]))
            key = self.draw(st.sampled_from(["n", "a"])) if self.wild else "n"
            return [f'state["{key}"] {op} {self.draw(st.integers(1, 3))}']
        if form == 2:
            return ['state["s"] = str(state["n"]) + "!"']
        if form == 3:
            return [f'state["log"] = state["log"] + ["{self.draw(st.sampled_from(["x", "y"]))}"]']
        return [f'state["items"] = state["items"] + [{self.number()}]']

    def _timeout(self, depth: int, *, in_loop: bool) -> list[str]:
        body = self.block(depth + 1, in_loop=in_loop) if depth < self.max_depth else self._call(depth, in_loop=in_loop)
        opening = "async with" if self.is_async else "with"
        return [f"{opening} timeout({self.draw(st.sampled_from([30, 60, 300]))}):", *_indent(body)]

    def _return(self, depth: int, *, in_loop: bool) -> list[str]:
        return [f"if {self.condition()}:", "    return state"]

    def _break(self, depth: int, *, in_loop: bool) -> list[str]:
        return [f"if {self.condition()}:", "    break"]

    def _continue(self, depth: int, *, in_loop: bool) -> list[str]:
        return [f"if {self.condition()}:", "    continue"]

    def _if(self, depth: int, *, in_loop: bool) -> list[str]:
        lines = [f"if {self.condition()}:", *_indent(self.block(depth + 1, in_loop=in_loop))]
        for _ in range(self.draw(st.integers(0, 1))):
            lines += [f"elif {self.condition()}:", *_indent(self.block(depth + 1, in_loop=in_loop))]
        if self.draw(st.booleans()):
            lines += ["else:", *_indent(self.block(depth + 1, in_loop=in_loop))]
        return lines

    def _while(self, depth: int, *, in_loop: bool) -> list[str]:
        counter = f"i{self.counters}"
        self.counters += 1
        bound = self.draw(st.integers(0, MAX_ITERATIONS + 2 if self.wild else MAX_ITERATIONS))
        body = self.block(depth + 1, in_loop=True)
        if self.draw(st.booleans()):
            return [
                f'state["{counter}"] = 0',
                f'while state["{counter}"] < {bound}:',
                f'    state["{counter}"] += 1',
                *_indent(body),
            ]
        # the iteration that breaks counts too (P-FLOW-13): bound + 1 iterations in all
        return [
            f'state["{counter}"] = 0',
            "while True:",
            f'    state["{counter}"] += 1',
            f'    if state["{counter}"] > {bound if self.wild else min(bound, MAX_ITERATIONS - 1)}:',
            "        break",
            *_indent(body),
        ]

    def _try(self, depth: int, *, in_loop: bool) -> list[str]:
        body = self.block(depth + 1, in_loop=in_loop)
        if not any(name in line for line in body for name in RAISING):
            body.append(f"state = {self.wait}{self.draw(st.sampled_from(sorted(RAISING)))}(state)")
        lines = ["try:", *_indent(body)]
        clauses = self.draw(st.lists(st.sampled_from(_EXCEPT_CLAUSES), min_size=1, max_size=2, unique=True))
        for clause in clauses:
            handler = self.block(depth + 1, in_loop=in_loop, size=self.draw(st.integers(0, 2))) or ["pass"]
            lines += [f"except {clause}:", *_indent(handler)]
        return lines

    def _slice_actors(self, count: int) -> list[str]:
        # at most one kind of raising actor per fan-out, so which slice fails first cannot change the error's type
        pool = [*SAFE, self.draw(st.sampled_from(sorted(RAISING)))]
        chosen = [self.draw(st.sampled_from(pool)) for _ in range(count)]
        if any(a in RAISING for a in chosen):
            self.exact_calls = False
        return chosen

    def _fanout(self, depth: int, *, in_loop: bool) -> list[str]:
        calls = ", ".join(f"{a.replace('-', '_')}(state)" for a in self._slice_actors(self.draw(st.integers(1, 3))))
        lines = [f'state["r"] = await asyncio.gather({calls})' if self.is_async else f'state["r"] = [{calls}]']
        if in_loop or depth:  # the slices carry the whole state: keep it from doubling at every iteration
            lines.append('state["r"] = len(state["r"])')
        return lines

    def _map(self, depth: int, *, in_loop: bool) -> list[str]:
        (actor,) = self._slice_actors(1)
        return [f'state["m"] = [{actor.replace("-", "_")}(x) for x in state["items"]]']

    def _bmap(self, depth: int, *, in_loop: bool) -> list[str]:
        (actor,) = self._slice_actors(1)
        bound = self.draw(st.integers(1, 3))
        return [f'state["m"] = {self.wait}map({actor.replace("-", "_")}, state["items"], max_concurrency={bound})']

    def _pause(self, depth: int, *, in_loop: bool) -> list[str]:
        self.pauses = True
        return [f'state = {self.wait}pause(state, prompt="Go on?", fields=[{{"name": "approved", "type": "boolean"}}])']


def _indent(lines: list[str]) -> list[str]:
    return [f"    {line}" for line in lines]


@st.composite
def flow_programs(
    draw: st.DrawFn,
    *,
    name: str = "gen",
    lead: str | None = None,
    middle: str | None = None,
    tail: str | None = None,
    wild: bool = False,
    max_depth: int = 2,
    max_statements: int = 5,
    pauses: bool = True,
) -> FlowProgram:
    """A flow module with one flow function ``name``; ``lead``/``middle``/``tail`` force a construct of
    :data:`CONSTRUCTS` first, in the middle (after and before at least one statement) or last."""
    forced = (lead, middle, tail)
    is_async = "map" not in forced and draw(st.booleans())
    writer = _Writer(draw, wild=wild, max_depth=max_depth, pauses=pauses or "pause" in forced, is_async=is_async)
    body: list[str] = ['"""A generated flow."""'] if draw(st.booleans()) else []
    if lead is not None:
        body += _forced(writer, lead)
    if middle is not None:
        body += writer.block(0, in_loop=False, size=1)
        body += _forced(writer, middle)
        body += writer.block(0, in_loop=False, size=1)
    body += writer.block(0, in_loop=False, size=draw(st.integers(0 if lead or tail else 1, max_statements)))
    if tail is not None:
        body += _forced(writer, tail)
    if tail != "return":  # plain Python's function returns None when it falls off the end; a flow returns its state
        body.append(
            draw(st.sampled_from(["return state", *([f"return {writer.wait}inc(state)"] if tail is None else [])]))
        )
    bound = draw(st.sampled_from(["", ", max_concurrency=1", ", max_concurrency=2"]))
    source = "\n".join(
        [
            "import asyncio",
            "",
            "from asya.flows import flow, map, pause, timeout",
            "",
            "",
            f"@flow(max_iterations={MAX_ITERATIONS}{bound})",
            f"{'async def' if is_async else 'def'} {name}(state):",
            *_indent(body),
            "",
        ]
    )
    return FlowProgram(name=name, source=source, exact_calls=writer.exact_calls, pauses=writer.pauses)


def _forced(writer: _Writer, kind: str) -> list[str]:
    if kind == "return":  # a return that is sure to run: what follows it is dead code, as in Python
        return [writer.draw(st.sampled_from(["return state", f"return {writer.wait}dbl(state)"]))]
    if kind not in CONSTRUCTS:
        raise ValueError(f"construct must be one of {CONSTRUCTS}, got {kind!r}")
    return writer.statement(0, in_loop=False, kind=kind)


_words = st.sampled_from(["inc", "dbl", "x", "add-three"])


def payloads(*, wild: bool = False) -> st.SearchStrategy[Any]:
    """The payloads generated programs are written for: ``n`` an integer, ``log`` a list of strings, ``items`` a
    list of integers (empty sometimes: an empty map), plus a passenger value; ``wild`` adds any JSON."""
    passenger = st.recursive(
        st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
        max_leaves=6,
    )
    typed = st.fixed_dictionaries(
        {
            "n": st.integers(-20, 20),
            "log": st.lists(_words, max_size=3),
            "items": st.lists(st.integers(-9, 9), max_size=3),
        },
        optional={"a": st.integers(-3, 3), "extra": passenger},
    )
    if not wild:
        return typed
    return typed | st.dictionaries(st.sampled_from(["n", "log", "items", "a"]), passenger, max_size=4)


def example(strategy: st.SearchStrategy[Any], *, seed_value: int) -> Any:
    """One value of ``strategy`` for a fixed seed, the same on every run (a seeded sample outside a test): the last
    of a few draws, since hypothesis starts from the simplest value."""
    found: list[Any] = []

    @seed(seed_value)
    @settings(
        max_examples=12, database=None, phases=[Phase.generate], deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def collect(value: Any) -> None:
        found.append(value)

    collect()
    return found[-1]
