"""The flow compiler: a Python flow function, parsed with ``ast`` (never run), to a :class:`~asya.flows.ir.Program`.

:func:`compile_flow` compiles one flow of a source text; :func:`check_source` returns every problem of a file
without raising. The language and the compile errors are documented in ``docs/flows.md``; every error is a
:class:`~asya.flows.errors.Problem` with file, line, column, message and fix, and all of a file's errors are
reported at once (:class:`~asya.flows.errors.FlowCompileError`).

Actors: a called name ``x`` names actor ``x`` when it is one of ``actors``, else ``x`` with ``_`` replaced by ``-``;
with ``actors`` given, a name that is neither is an error; without it (``asya flow check`` outside a project) every
called name is taken as an actor.

Limits are compile errors too (P-FLOW-22): a source over :data:`MAX_SOURCE_BYTES`, an integer literal over the
bound of evaluation (``asya.flows.expr.MAX_INT_BITS``), a string literal over ``MAX_VALUE_BYTES``, a float literal
that is not finite, and a file nested deeper than the parser or this compiler can follow (a long ``elif`` chain, a
long sum): ``RecursionError`` and ``MemoryError`` become a problem at line 1. A deep parse can still crash the
interpreter outright, so tools compile in a child process (``asya.flows.isolated``).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from asya.flows.errors import FlowCompileError, Problem
from asya.flows.expr import FUNCTIONS, MAX_INT_BITS, MAX_VALUE_BYTES
from asya.flows.ir import DEFAULT_MAX_ITERATIONS, Program
from asya.naming import is_event_name

__all__ = ["MAX_SOURCE_BYTES", "check_source", "compile_flow", "flow_functions"]

#: P-FLOW-22: the largest flow file the compiler reads.
MAX_SOURCE_BYTES: Final = 1024 * 1024

_BIN: Final = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}
_CMP: Final = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.In: "in",
    ast.NotIn: "notin",
    ast.Is: "is",
    ast.IsNot: "isnot",
}
#: Names the language gives a meaning to; never actors.
_RESERVED: Final = frozenset({"pause", "timeout", "gather", "flow", "map", "sleep", "wait_for", *FUNCTIONS})
#: How a bounded map is called: the stand-in ``asya.flows.map``, imported or named through its module.
_MAP_NAMES: Final = frozenset({"map", "flows.map", "asya.flows.map"})
_MAP_FIX: Final = 'state["r"] = map(act, state["items"], max_concurrency=5)'
_FLOW_FIX: Final = "@flow(max_iterations=10, max_concurrency=5)"
_FLOW_OPTIONS: Final = "@flow takes only max_iterations and max_concurrency, positive integer literals"
_STATEMENT_FIXES: Final = {
    "For": '`for` exists only as a map: state["r"] = [act(x) for x in state["items"]]; loop with `while`',
    "AsyncFor": '`for` exists only as a map: state["r"] = [act(x) for x in state["items"]]',
    "Import": "import at the top of the module, outside the flow function",
    "ImportFrom": "import at the top of the module, outside the flow function",
    "Raise": "a flow cannot raise; let an actor fail, or end with `return state`",
    "Delete": 'set the key to None instead: state["k"] = None',
    "Global": "flows have no variables; keep values in the state",
    "Nonlocal": "flows have no variables; keep values in the state",
    "ClassDef": "define classes outside the flow function",
    "FunctionDef": "define functions outside the flow function; actors are called by name",
    "AsyncFunctionDef": "define functions outside the flow function; actors are called by name",
    "Assert": "test with `if` and route to an actor that fails",
    "Match": "use if/elif/else",
    "AnnAssign": 'drop the annotation: state["k"] = value',
    "TryStar": "use try/except",
}


@dataclass
class _Ctx:
    kind: str  # "loop", "try", "deadline"
    head: int = 0
    loop_id: str = ""
    breaks: list[int] = field(default_factory=list)


class _Compiler:
    def __init__(self, filename: str, flow: str, actors: Collection[str] | None) -> None:
        self.filename = filename
        self.flow = flow
        self.actors = actors
        self.problems: list[Problem] = []
        self.code: list[dict[str, Any]] = []
        self.ctx: list[_Ctx] = []
        self.param = "state"
        self.max_iterations = DEFAULT_MAX_ITERATIONS
        #: ``@flow(max_concurrency=K)``: the bound of every fan-out and map without one of its own (P-MAP-1)
        self.max_concurrency: int | None = None

    # -- helpers

    def err(self, node: ast.AST, message: str, fix: str = "") -> None:
        line = getattr(node, "lineno", 0)
        col = getattr(node, "col_offset", -1) + 1
        self.problems.append(Problem(self.filename, line, col, message, fix))

    def emit(self, op: str, node: ast.AST | None = None, **members: Any) -> int:
        ins: dict[str, Any] = {"op": op, **members}
        if node is not None and hasattr(node, "lineno"):
            ins["line"] = node.lineno
        self.code.append(ins)
        return len(self.code) - 1

    def is_state(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id == self.param

    def is_actor_name(self, name: str) -> bool:
        return self.actors is None or name in self.actors or name.replace("_", "-") in self.actors

    def actor_of(self, name: str, node: ast.AST) -> str | None:
        if self.actors is None:
            return name.replace("_", "-")
        if name in self.actors:
            return name
        if name.replace("_", "-") in self.actors:
            return name.replace("_", "-")
        known = ", ".join(sorted(self.actors)) or "none"
        self.err(node, f"'{name}' is not an actor of the manifest", f"call one of: {known}")
        return None

    # -- the function

    def function(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.decorators(fn)
        args = fn.args
        if (
            len(args.args) != 1
            or args.posonlyargs
            or args.vararg is not None
            or args.kwonlyargs
            or args.kwarg is not None
        ):
            self.err(fn, f"flow '{fn.name}' must take exactly one parameter, the state", f"async def {fn.name}(state):")
        elif args.args:
            self.param = args.args[0].arg
        self.block(fn.body)

    def decorators(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        for deco in fn.decorator_list:
            target = deco.func if isinstance(deco, ast.Call) else deco
            name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
            if name != "flow":
                self.err(deco, "a flow function takes no decorator but @flow", "remove the decorator")
                continue
            if not isinstance(deco, ast.Call):
                continue
            for kw in deco.keywords:
                value = kw.value
                if (
                    kw.arg in ("max_iterations", "max_concurrency")
                    and isinstance(value, ast.Constant)
                    and type(value.value) is int
                    and value.value >= 1
                ):
                    if kw.arg == "max_iterations":
                        self.max_iterations = value.value
                    else:
                        self.max_concurrency = value.value
                else:
                    self.err(
                        kw.value if kw.arg in ("max_iterations", "max_concurrency") else deco, _FLOW_OPTIONS, _FLOW_FIX
                    )
            if deco.args:
                self.err(deco, _FLOW_OPTIONS, _FLOW_FIX)

    # -- statements

    def block(self, body: Iterable[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, node: ast.stmt) -> None:
        handler = getattr(self, f"s_{type(node).__name__.lower()}", None)
        if handler is not None:
            handler(node)
            return
        name = type(node).__name__
        word = {"AsyncFor": "for", "ImportFrom": "import", "FunctionDef": "def", "AsyncFunctionDef": "def"}.get(
            name, name.lower()
        )
        self.err(node, f"`{word}` is not supported in a flow", _STATEMENT_FIXES.get(name, "see docs/flows.md"))

    def s_pass(self, node: ast.Pass) -> None:
        del node

    def s_expr(self, node: ast.Expr) -> None:
        value = node.value
        if isinstance(value, ast.Constant) and isinstance(value.value, str):
            return  # a docstring or comment string
        call = value.value if isinstance(value, ast.Await) else value
        if isinstance(call, ast.Call) and _dotted(call.func) in ("sleep", "asyncio.sleep"):
            self.sleep(call)
            return
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id not in _RESERVED:
            self.err(
                node,
                f"the result of '{call.func.id}' is dropped",
                f"{self.param} = await {call.func.id}({self.param})",
            )
            return
        self.err(node, "an expression statement has no effect in a flow", 'assign it: state["k"] = ...')

    def s_assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            self.err(node, "an assignment with two targets", "one target per assignment")
            return
        target = node.targets[0]
        if isinstance(target, ast.Name):
            if target.id != self.param:
                self.err(
                    target,
                    f"flows have no local variables ('{target.id}')",
                    f'store the value in the payload: {self.param}["{target.id}"] = ...',
                )
                return
            self.assign_state(node.value)
            return
        if isinstance(target, ast.Subscript):
            path = self.path(target)
            if path is None:
                return
            if self.fanout(node.value, target, path):
                return
            call = self.actor_call_node(node.value)
            if call is not None and self.is_actor_name(call):
                self.err(
                    node.value,
                    "an actor's result replaces the whole state; it cannot be assigned to part of it",
                    f"{self.param} = await {call}({self.param}), then move the value with a mutation",
                )
                return
            expr = self.expr(node.value)
            if expr is not None:
                self.emit("set", node, path=path, expr=expr)
            return
        self.err(target, "an assignment to a tuple, attribute or other target", "assign one payload path at a time")

    def s_augassign(self, node: ast.AugAssign) -> None:
        op = _BIN.get(type(node.op))
        if op is None:
            self.err(node, f"the operator {type(node.op).__name__} is not supported", "use + - * / // %")
            return
        if not isinstance(node.target, ast.Subscript):
            self.err(node.target, "augmented assignment to something other than a payload path", 'state["n"] += 1')
            return
        path = self.path(node.target)
        value = self.expr(node.value)
        if path is None or value is None:
            return
        current: list[Any] = ["state"]
        for key in path:
            current = ["sub", current, key]
        self.emit("set", node, path=path, expr=["bin", op, current, value])

    def assign_state(self, value: ast.expr) -> None:
        if self.pause(value) or self.wait_for(value):
            return
        name = self.actor_call(value)
        if name is not None:
            if name:
                self.emit("call", value, actor=name)
            return
        expr = self.expr(value)
        if expr is not None:
            self.emit("set", value, path=[], expr=expr)

    def s_return(self, node: ast.Return) -> None:
        if node.value is None or not (self.is_state(node.value) or self.actor_call_node(node.value)):
            self.err(node, "a flow returns its state", f"return {self.param}")
            return
        if not self.is_state(node.value):
            name = self.actor_call(node.value)
            if name:
                self.emit("call", node.value, actor=name)
        self.emit("return", node)

    def s_if(self, node: ast.If) -> None:
        test = self.expr(node.test)
        branch = self.emit("test", node, expr=test if test is not None else ["const", True], **{"else": -1})
        self.block(node.body)
        if node.orelse:
            jump = self.emit("jump", to=-1)
            self.code[branch]["else"] = len(self.code)
            self.block(node.orelse)
            self.code[jump]["to"] = len(self.code)
        else:
            self.code[branch]["else"] = len(self.code)

    def s_while(self, node: ast.While) -> None:
        if node.orelse:
            self.err(node.orelse[0], "`while ... else` is not supported", "put the code after the loop")
        loop_id = str(len(self.code))
        self.emit("loopinit", node, id=loop_id)
        head = len(self.code)
        ctx = _Ctx("loop", head=head, loop_id=loop_id)
        always = isinstance(node.test, ast.Constant) and node.test.value is True
        test_pc = None
        if not always:
            test = self.expr(node.test)
            test_pc = self.emit("test", node, expr=test if test is not None else ["const", False], **{"else": -1})
        self.emit("loop", node, id=loop_id)
        self.ctx.append(ctx)
        self.block(node.body)
        self.ctx.pop()
        self.emit("jump", to=head)
        end = self.emit("endloop", id=loop_id)
        if test_pc is not None:
            self.code[test_pc]["else"] = end
        for jump in ctx.breaks:
            self.code[jump]["to"] = end

    def _unwind(self, node: ast.stmt, word: str) -> _Ctx | None:
        for depth in range(len(self.ctx) - 1, -1, -1):
            ctx = self.ctx[depth]
            if ctx.kind == "loop":
                for inner in reversed(self.ctx[depth + 1 :]):
                    self.emit("endtry" if inner.kind == "try" else "enddeadline")
                return ctx
        self.err(node, f"`{word}` outside a loop", f"use `{word}` only inside `while`")
        return None

    def s_break(self, node: ast.Break) -> None:
        ctx = self._unwind(node, "break")
        if ctx is not None:
            ctx.breaks.append(self.emit("jump", node, to=-1))

    def s_continue(self, node: ast.Continue) -> None:
        ctx = self._unwind(node, "continue")
        if ctx is not None:
            self.emit("jump", node, to=ctx.head)

    def s_try(self, node: ast.Try) -> None:
        if node.orelse:
            self.err(node.orelse[0], "`try ... else` is not supported", "put the code at the end of the try body")
        if node.finalbody:
            self.err(node.finalbody[0], "`try ... finally` is not supported", "repeat the code after try and in except")
        clauses: list[dict[str, Any]] = []
        try_pc = self.emit("try", node, clauses=clauses)
        self.ctx.append(_Ctx("try"))
        self.block(node.body)
        self.ctx.pop()
        self.emit("endtry")
        ends = [self.emit("jump", to=-1)]
        for handler in node.handlers:
            patterns = self.patterns(handler)
            if handler.name is not None:
                self.err(
                    handler,
                    f"`except ... as {handler.name}` is not supported",
                    "the error is in the envelope's status.error; drop `as`",
                )
            clauses.append({"errors": patterns, "to": len(self.code)})
            self.block(handler.body)
            ends.append(self.emit("jump", to=-1))
        for jump in ends:
            self.code[jump]["to"] = len(self.code)
        self.code[try_pc]["clauses"] = clauses

    def patterns(self, handler: ast.ExceptHandler) -> list[str]:
        if handler.type is None:
            self.err(
                handler, "a bare `except:` is not supported", "name the classes: except (ValueError, TimeoutError):"
            )
            return []
        nodes = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        out: list[str] = []
        for item in nodes:
            dotted = _dotted(item)
            if dotted is None:
                self.err(item, "an except clause names exception classes only", "except ConnectionError:")
            else:
                out.append(dotted)
        return out

    def s_with(self, node: ast.With | ast.AsyncWith) -> None:
        item = node.items[0] if len(node.items) == 1 else None
        call = item.context_expr if item is not None else None
        if (
            item is None
            or item.optional_vars is not None
            or not isinstance(call, ast.Call)
            or not isinstance(call.func, ast.Name)
            or call.func.id != "timeout"
        ):
            self.err(node, "`with` is supported only as a timeout block", "async with timeout(30):")
            return
        seconds = call.args[0] if len(call.args) == 1 and not call.keywords else None
        value = seconds.value if isinstance(seconds, ast.Constant) else None
        if not (isinstance(value, int | float) and not isinstance(value, bool) and value > 0):
            self.err(call, "timeout(...) takes one positive number literal, the seconds", "async with timeout(30):")
            return
        self.emit("deadline", node, seconds=value)
        self.ctx.append(_Ctx("deadline"))
        self.block(node.body)
        self.ctx.pop()
        self.emit("enddeadline")

    s_asyncwith = s_with

    # -- calls, fan-outs, pause

    def actor_call_node(self, node: ast.expr) -> str | None:
        """The called name when ``node`` is ``[await] name(...)`` of a would-be actor, else ``None``."""
        call = node.value if isinstance(node, ast.Await) else node
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id not in _RESERVED:
            return call.func.id
        return None

    def actor_call(self, node: ast.expr, arg: str | None = None) -> str | None:
        """The actor of ``[await] act(state)`` (``""`` after an error), or ``None`` when ``node`` is no call."""
        name = self.actor_call_node(node)
        if name is None:
            return None
        call = node.value if isinstance(node, ast.Await) else node
        assert isinstance(call, ast.Call)
        expected = arg or self.param
        ok = True
        if any(isinstance(a, ast.Call | ast.Await) for a in call.args):
            self.err(
                call,
                f"nested calls in '{name}(...)'",
                "one call per statement: state = await a(state); state = await b(state)",
            )
            ok = False
        elif (
            len(call.args) != 1
            or call.keywords
            or not (isinstance(call.args[0], ast.Name) and call.args[0].id == expected)
        ):
            self.err(call, f"an actor is called with the {'item' if arg else 'state'} only", f"{name}({expected})")
            ok = False
        actor = self.actor_of(name, call)
        return actor if ok and actor else ""

    def fanout(self, value: ast.expr, target: ast.Subscript, path: list[Any]) -> bool:
        calls: list[ast.expr] | None = None
        inner = value.value if isinstance(value, ast.Await) else value
        if isinstance(inner, ast.List) and inner.elts and all(self.actor_call_node(e) for e in inner.elts):
            calls = list(inner.elts)
        elif isinstance(inner, ast.Call) and _dotted(inner.func) in ("asyncio.gather", "gather"):
            calls = list(inner.args)
            for item in calls:
                if not self.actor_call_node(item):
                    self.err(item, "asyncio.gather(...) takes actor calls only", "asyncio.gather(a(state), b(state))")
                    return True
        elif isinstance(inner, ast.ListComp):
            self.map(inner, target, path)
            return True
        elif isinstance(inner, ast.Call) and _dotted(inner.func) in _MAP_NAMES:
            self.map_call(inner, target, path)
            return True
        if calls is None:
            return False
        pointer = self.pointer(target, path)
        actors = [self.actor_call(c) for c in calls]
        if pointer is not None and all(actors):
            self.emit("fanout", value, calls=actors, target=pointer, **self.bound(None))
        return True

    def map(self, comp: ast.ListComp, target: ast.Subscript, path: list[Any]) -> None:
        fix = f'{ast.unparse(target)} = [act(x) for x in {self.param}["items"]]'
        if len(comp.generators) != 1 or comp.generators[0].ifs or comp.generators[0].is_async:
            self.err(comp, "a map has one `for` and no `if`", fix)
            return
        gen = comp.generators[0]
        if not isinstance(gen.target, ast.Name):
            self.err(gen.target, "a map's loop variable is one name", fix)
            return
        if not self.actor_call_node(comp.elt):
            self.err(comp.elt, "a map's element is one actor call of the loop variable", fix)
            return
        source = self.expr(gen.iter) if _rooted_at(gen.iter, self.param) else None
        if source is None and not _rooted_at(gen.iter, self.param):
            self.err(gen.iter, "a map runs over a payload list", fix)
        actor = self.actor_call(comp.elt, arg=gen.target.id)
        pointer = self.pointer(target, path)
        if source is not None and actor and pointer is not None:
            self.emit("map", comp, actor=actor, source=source, target=pointer, **self.bound(None))

    def map_call(self, call: ast.Call, target: ast.Subscript, path: list[Any]) -> None:
        """``map(act, state["items"], max_concurrency=K)``: a map of at most ``K`` slices in flight (P-MAP-1)."""
        if len(call.args) != 2 or not isinstance(call.args[0], ast.Name):
            self.err(call, "map(...) takes an actor and a payload list", _MAP_FIX)
            return
        limit: int | None = None
        for kw in call.keywords:
            value = kw.value
            if kw.arg == "max_concurrency" and isinstance(value, ast.Constant):
                if type(value.value) is int and value.value >= 1:
                    limit = value.value
                    continue
                if value.value is None:
                    continue
            self.err(kw.value, "map takes only max_concurrency, a positive integer literal", _MAP_FIX)
            return
        name, items = call.args
        assert isinstance(name, ast.Name)
        if name.id in _RESERVED:
            self.err(name, f"map's first argument is an actor, not '{name.id}'", _MAP_FIX)
            return
        source = self.expr(items) if _rooted_at(items, self.param) else None
        if source is None and not _rooted_at(items, self.param):
            self.err(items, "a map runs over a payload list", _MAP_FIX)
        actor = self.actor_of(name.id, name)
        pointer = self.pointer(target, path)
        if source is not None and actor and pointer is not None:
            self.emit("map", call, actor=actor, source=source, target=pointer, **self.bound(limit))

    def bound(self, limit: int | None) -> dict[str, int]:
        """The ``limit`` member of a fan-out or map: its own bound, else the flow's, else none."""
        chosen = limit if limit is not None else self.max_concurrency
        return {} if chosen is None else {"limit": chosen}

    def pointer(self, target: ast.Subscript, path: list[Any]) -> str | None:
        keys = [key[1] if key[0] == "const" and isinstance(key[1], str) else None for key in path]
        if None in keys or not keys:
            self.err(target, "a fan-out's target must be a constant payload path", 'state["results"] = [...]')
            return None
        return "".join("/" + str(k).replace("~", "~0").replace("/", "~1") for k in keys)

    def pause(self, value: ast.expr) -> bool:
        call = _builtin_call(value, "pause")
        if call is None:
            return False
        fix = f'{self.param} = await pause({self.param}, prompt="Review", fields=[{{"name": "ok", "type": "boolean"}}])'
        if not self.takes_state(call, "pause", fix):
            return True
        prompt: Any = "Task paused"
        fields: Any = []
        timeout: int | None = None
        dynamic: dict[str, Any] = {}
        for kw in call.keywords:
            if kw.arg == "prompt" and not isinstance(kw.value, ast.Constant):
                prompt, dynamic = self.prompt_expr(kw.value)
                continue
            try:
                literal = ast.literal_eval(kw.value)
            except ValueError:
                self.err(kw.value, f"pause's {kw.arg} must be a literal", fix)
                continue
            if kw.arg == "prompt" and isinstance(literal, str):
                prompt = literal
            elif kw.arg == "fields" and isinstance(literal, list) and all(isinstance(f, dict) for f in literal):
                fields = literal
            elif kw.arg == "timeout":
                timeout = self.pause_timeout(kw.value, literal)
            else:
                self.err(kw.value, f"pause takes prompt (a string) and fields (a list of objects), not {kw.arg}", fix)
        members: dict[str, Any] = {"prompt": prompt, "fields": fields, **dynamic}
        if timeout is not None:
            members["timeout"] = timeout
        self.emit("pause", call, **members)
        return True

    def wait_for(self, value: ast.expr) -> bool:
        """P-WAIT-4: ``state = await wait_for(state, event="name", timeout=SECONDS, path="/pointer")``, literals; a
        pause that a signal of the event ends, its data set at ``path`` (default ``/<event>``)."""
        call = _builtin_call(value, "wait_for")
        if call is None:
            return False
        fix = f'{self.param} = await wait_for({self.param}, event="approved", timeout=3600)'
        if not self.takes_state(call, "wait_for", fix):
            return True
        members: dict[str, Any] = {}
        for kw in call.keywords:
            try:
                literal = ast.literal_eval(kw.value)
            except ValueError:
                self.err(kw.value, f"wait_for's {kw.arg} must be a literal", fix)
                continue
            if kw.arg == "event" and isinstance(literal, str) and is_event_name(literal):
                members["event"] = literal
            elif kw.arg == "path" and isinstance(literal, str) and (literal == "" or literal.startswith("/")):
                members["path"] = literal
            elif kw.arg == "timeout":
                timeout = self.pause_timeout(kw.value, literal)
                if timeout is not None:
                    members["timeout"] = timeout
            else:
                self.err(
                    kw.value,
                    f"wait_for takes event (a name of letters, digits, '.', '_', '-', up to 64), timeout (seconds) "
                    f"and path (a JSON Pointer), got {kw.arg}={literal!r}",
                    fix,
                )
        if "event" not in members:
            self.err(call, "wait_for(...) needs event=, the name of the signal it waits for", fix)
            return True
        event = members["event"]
        self.emit("pause", call, prompt=f"Waiting for event '{event}'", fields=[], **members)
        return True

    def sleep(self, call: ast.Call) -> None:
        """P-WAIT-3: ``await sleep(seconds)``, one positive number literal; a fraction rounds up."""
        seconds = call.args[0] if len(call.args) == 1 and not call.keywords else None
        whole = _whole_seconds(seconds.value if isinstance(seconds, ast.Constant) else None)
        if whole is None:
            self.err(call, "sleep(...) takes one positive number literal, the seconds", "await sleep(60)")
            return
        self.emit("sleep", call, seconds=whole)

    def pause_timeout(self, node: ast.expr, literal: object) -> int | None:
        """P-WAIT-1: ``timeout=`` of a pause, whole seconds (a fraction rounds up), at least 1."""
        whole = _whole_seconds(literal)
        if whole is None:
            self.err(
                node,
                f"pause's timeout must be a positive number of seconds, got {literal!r}",
                f"{self.param} = await pause({self.param}, prompt=..., timeout=3600)",
            )
        return whole

    def takes_state(self, call: ast.Call, name: str, fix: str) -> bool:
        """Whether a pausing call's one positional argument is the state; an error when it is not."""
        if len(call.args) != 1 or not self.is_state(call.args[0]):
            self.err(call, f"{name}(...) takes the state as its one positional argument", fix)
            return False
        return True

    def prompt_expr(self, node: ast.expr) -> tuple[str, dict[str, Any]]:
        """A prompt computed from the state: its source text (what ``asya flow show`` draws) and ``prompt_expr``, the
        expression the continuation evaluates at the pause. An f-string is outside the subset: concatenate."""
        if isinstance(node, ast.JoinedStr):
            self.err(
                node, "an f-string prompt is outside the expression language", f'"Publish " + {self.param}["title"]'
            )
            return "", {}
        expr = self.expr(node)
        return ast.unparse(node), ({"prompt_expr": expr} if expr is not None else {})

    # -- expressions and paths

    def path(self, node: ast.Subscript) -> list[Any] | None:
        keys: list[Any] = []
        current: ast.expr = node
        while isinstance(current, ast.Subscript):
            if isinstance(current.slice, ast.Slice):
                self.err(current.slice, "slices are not supported", "index one key or position")
                return None
            key = self.expr(current.slice)
            if key is None:
                return None
            keys.append(key)
            current = current.value
        if not self.is_state(current):
            self.err(current, "only payload paths can be assigned", f'{self.param}["key"] = ...')
            return None
        return list(reversed(keys))

    def expr(self, node: ast.expr) -> list[Any] | None:
        before = len(self.problems)
        tree = self._expr(node)
        return tree if len(self.problems) == before else None

    def _expr(self, node: ast.expr) -> list[Any]:
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bytes | complex) or value is Ellipsis:
                self.err(node, f"the literal {value!r} is not JSON", "use numbers, strings, True, False, None")
            elif isinstance(value, int) and not isinstance(value, bool) and value.bit_length() >= MAX_INT_BITS:
                self.err(
                    node,
                    f"integer literal of {value.bit_length()} bits, over the limit of 2**{MAX_INT_BITS} (P-FLOW-21)",
                    "keep large numbers in the payload as strings",
                )
                return ["const", 0]
            elif isinstance(value, float) and not math.isfinite(value):
                self.err(node, f"the literal {value!r} is not JSON", "use a finite number")
            elif isinstance(value, str) and len(value) > MAX_VALUE_BYTES:
                self.err(node, f"string literal of {len(value)} characters, over the limit of a flow value", "")
                return ["const", ""]
            return ["const", value]
        if isinstance(node, ast.Name):
            if node.id == self.param:
                return ["state"]
            self.err(
                node,
                f"unknown name '{node.id}': flows have no variables",
                f'read it from the state: {self.param}["{node.id}"]',
            )
            return ["const", None]
        if isinstance(node, ast.Subscript):
            if isinstance(node.slice, ast.Slice):
                self.err(node.slice, "slices are not supported", "index one key or position")
            return ["sub", self._expr(node.value), self._expr(node.slice)]
        if isinstance(node, ast.Call):
            return self._call(node)
        if isinstance(node, ast.BinOp):
            op = _BIN.get(type(node.op))
            if op is None:
                self.err(node, f"the operator {type(node.op).__name__} is not supported", "use + - * / // %")
                return ["const", None]
            return ["bin", op, self._expr(node.left), self._expr(node.right)]
        if isinstance(node, ast.UnaryOp):
            if isinstance(node.op, ast.USub):
                return ["neg", self._expr(node.operand)]
            if isinstance(node.op, ast.Not):
                return ["not", self._expr(node.operand)]
            if isinstance(node.op, ast.UAdd):
                return self._expr(node.operand)
            self.err(node, "the operator ~ is not supported", "use arithmetic")
            return ["const", None]
        if isinstance(node, ast.BoolOp):
            return ["and" if isinstance(node.op, ast.And) else "or", [self._expr(v) for v in node.values]]
        if isinstance(node, ast.Compare):
            pairs: list[Any] = []
            for cmp_op, right in zip(node.ops, node.comparators, strict=True):
                cmp_name = _CMP[type(cmp_op)]
                if cmp_name in ("is", "isnot") and not (
                    isinstance(right, ast.Constant) and right.value in (None, True, False)
                ):
                    self.err(right, "`is` compares with None, True or False only", "use == for values")
                pairs.append([cmp_name, self._expr(right)])
            return ["cmp", self._expr(node.left), pairs]
        if isinstance(node, ast.IfExp):
            return ["if", self._expr(node.test), self._expr(node.body), self._expr(node.orelse)]
        if isinstance(node, ast.List | ast.Tuple):
            return ["list", [self._expr(e) for e in node.elts]]
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                self.err(node, "`**` in a dict literal is not supported", "list the keys")
                return ["const", None]
            return ["dict", [[self._expr(k), self._expr(v)] for k, v in zip(node.keys, node.values, strict=True) if k]]
        if isinstance(node, ast.Await):
            self.err(
                node,
                "`await` of something other than an actor call or pause",
                f"{self.param} = await act({self.param})",
            )
            return ["const", None]
        if isinstance(node, ast.ListComp):
            self.err(
                node,
                "a comprehension is a map and must be assigned to a payload path",
                'state["r"] = [act(x) for x in state["items"]]',
            )
            return ["const", None]
        self.err(node, f"`{ast.unparse(node)}` is outside the expression language", "see docs/flows.md, Expressions")
        return ["const", None]

    def _call(self, node: ast.Call) -> list[Any]:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "get":
            if node.keywords or not 1 <= len(node.args) <= 2:
                self.err(node, ".get takes a key and an optional default", 'state.get("k", 0)')
                return ["const", None]
            default = self._expr(node.args[1]) if len(node.args) == 2 else ["const", None]
            return ["get", self._expr(func.value), self._expr(node.args[0]), default]
        if isinstance(func, ast.Name) and func.id in FUNCTIONS:
            if node.keywords:
                self.err(node, f"{func.id}(...) takes no keyword arguments", f"{func.id}(value)")
            return ["fn", func.id, [self._expr(a) for a in node.args]]
        if isinstance(func, ast.Name) and func.id not in _RESERVED and self.is_actor_name(func.id):
            self.err(
                node,
                f"the actor call '{func.id}(...)' is nested in an expression",
                f"call it in its own statement: {self.param} = await {func.id}({self.param})",
            )
            return ["const", None]
        self.err(
            node,
            f"the call `{ast.unparse(func)}(...)` is outside the expression language",
            "use len, min, max, abs, int, float, str, bool or .get",
        )
        return ["const", None]


def _builtin_call(value: ast.expr, name: str) -> ast.Call | None:
    """``value`` as a call of the flow language's ``name`` (awaited or not), else ``None``."""
    call = value.value if isinstance(value, ast.Await) else value
    if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == name:
        return call
    return None


def _whole_seconds(literal: object) -> int | None:
    """A positive finite number literal rounded up to whole seconds, else ``None``."""
    if isinstance(literal, bool) or not isinstance(literal, int | float) or not math.isfinite(literal) or literal <= 0:
        return None
    return math.ceil(literal)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def _rooted_at(node: ast.expr, param: str) -> bool:
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return _rooted_at(node.func.value, param)
    return isinstance(node, ast.Name) and node.id == param


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _decorated(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any(
        _dotted(d.func if isinstance(d, ast.Call) else d) in ("flow", "asya.flows.flow", "flows.flow")
        for d in fn.decorator_list
    )


def flow_functions(tree: ast.Module, flow: str | None) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The function(s) to compile: the one named after ``flow`` (``-`` as ``_``), else those decorated ``@flow``,
    else the module's only function."""
    functions = _functions(tree)
    if flow is not None:
        named = [f for f in functions if f.name == flow.replace("-", "_")]
        if named:
            return named[:1]
    decorated = [f for f in functions if _decorated(f)]
    if decorated:
        return decorated if flow is None else decorated[:1] if len(decorated) == 1 else []
    return functions if len(functions) == 1 else []


def _parse(source: str, filename: str) -> tuple[ast.Module | None, list[Problem]]:
    try:
        return ast.parse(source, filename=filename), []
    except SyntaxError as exc:
        return None, [
            Problem(filename, exc.lineno or 0, exc.offset or 0, f"syntax error: {exc.msg}", "fix the Python syntax")
        ]


def _compile_function(
    fn: ast.FunctionDef | ast.AsyncFunctionDef, *, filename: str, flow: str, actors: Collection[str] | None
) -> tuple[Program | None, list[Problem]]:
    compiler = _Compiler(filename, flow, actors)
    compiler.function(fn)
    if compiler.problems:
        return None, compiler.problems
    code = tuple(compiler.code)
    initial: list[str] = []
    for ins in code:
        if ins["op"] != "call":
            break
        initial.append(ins["actor"])
    used: dict[str, None] = {}
    for ins in code:
        for name in [ins.get("actor"), *ins.get("calls", ())]:
            if name:
                used[name] = None
    program = Program(
        flow=flow,
        code=code,
        max_iterations=compiler.max_iterations,
        source=filename,
        initial_route=tuple(initial),
        actors=tuple(used),
    )
    return program, []


def _limit_problem(filename: str, exc: BaseException) -> Problem:
    return Problem(
        filename,
        1,
        1,
        f"the flow is nested too deeply for the compiler ({type(exc).__name__})",
        "split long elif chains into nested ifs or separate actors, and long expressions into several mutations",
    )


def _size_problem(source: str, filename: str) -> Problem | None:
    size = len(source.encode("utf-8", "surrogatepass"))
    if size <= MAX_SOURCE_BYTES:
        return None
    return Problem(
        filename, 1, 1, f"the file is {size} bytes, over the limit of {MAX_SOURCE_BYTES}", "split the flow file"
    )


def _guarded(fn: Callable[[], Any], filename: str) -> Any:
    """``fn()``, with the parser's and the compiler's depth limits (and memory) as one compile error."""
    try:
        return fn()
    except (RecursionError, MemoryError) as exc:
        raise FlowCompileError([_limit_problem(filename, exc)]) from None


def compile_flow(source: str, *, flow: str, filename: str = "<flow>", actors: Collection[str] | None = None) -> Program:
    """Compile flow ``flow`` of ``source``; raises :class:`FlowCompileError` with every problem of the file."""
    too_big = _size_problem(source, filename)
    if too_big is not None:
        raise FlowCompileError([too_big])
    program: Program = _guarded(lambda: _compile_flow(source, flow=flow, filename=filename, actors=actors), filename)
    return program


def _compile_flow(source: str, *, flow: str, filename: str, actors: Collection[str] | None) -> Program:
    tree, problems = _parse(source, filename)
    if tree is None:
        raise FlowCompileError(problems)
    functions = flow_functions(tree, flow)
    if not functions:
        raise FlowCompileError(
            [
                Problem(
                    filename,
                    1,
                    1,
                    f"no flow function for flow '{flow}'",
                    f"name the function {flow.replace('-', '_')} or decorate exactly one function with @flow",
                )
            ]
        )
    program, problems = _compile_function(functions[0], filename=filename, flow=flow, actors=actors)
    if program is None:
        raise FlowCompileError(problems)
    return program


def check_source(source: str, *, filename: str = "<flow>", actors: Collection[str] | None = None) -> list[Problem]:
    """Every problem of a flow file, sorted by position (``asya flow check``); ``[]`` when it compiles."""
    too_big = _size_problem(source, filename)
    if too_big is not None:
        return [too_big]
    try:
        problems: list[Problem] = _guarded(lambda: _check_source(source, filename=filename, actors=actors), filename)
    except FlowCompileError as exc:
        return list(exc.problems)
    return problems


def _check_source(source: str, *, filename: str, actors: Collection[str] | None) -> list[Problem]:
    tree, problems = _parse(source, filename)
    if tree is None:
        return problems
    functions = flow_functions(tree, None)
    if not functions:
        return [Problem(filename, 1, 1, "no flow function", "decorate the flow function with @flow")]
    out: list[Problem] = []
    for fn in functions:
        out += _compile_function(fn, filename=filename, flow=fn.name.replace("_", "-"), actors=actors)[1]
    return sorted(out, key=lambda p: (p.line, p.col))
