"""The flow compiler's statements (``asya.flows.compiler``): the flow function and its ``@flow`` decorator, then
each statement of its body (assignments, ``if``, ``while`` with ``break``/``continue``, ``try``/``except``, ``with
timeout``, ``return``); any other statement is a problem with its fix.
"""

from __future__ import annotations

import ast
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from asya.flows.compile_calls import CallCompiler
from asya.flows.compile_expr import BIN_OPS, RESERVED, dotted_name

__all__ = ["StatementCompiler"]

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


class StatementCompiler(CallCompiler):
    """Compiles one flow function (:meth:`function`); ``code`` and ``problems`` hold the outcome."""

    def __init__(self, filename: str, flow: str, actors: Collection[str] | None) -> None:
        super().__init__(filename, flow, actors)
        #: the loops, ``try`` blocks and deadlines around the statement being compiled
        self.ctx: list[_Ctx] = []

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
        if isinstance(call, ast.Call) and dotted_name(call.func) in ("sleep", "asyncio.sleep"):
            self.sleep(call)
            return
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id not in RESERVED:
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
        op = BIN_OPS.get(type(node.op))
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
            dotted = dotted_name(item)
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
