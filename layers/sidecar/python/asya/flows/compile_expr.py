"""The flow compiler's base (``asya.flows.compiler``): what one compilation holds (the problems found, the code
emitted, the state's parameter name, the ``@flow`` bounds), how it reports a problem and resolves an actor's name, and
the expression language and payload paths (``docs/flows.md``, Expressions): an ``ast`` expression to the tree that
``asya.flows.expr`` evaluates, or a problem. The calls and the statements build on it (``compile_calls``,
``compile_stmt``).
"""

from __future__ import annotations

import ast
import math
from collections.abc import Collection
from typing import Any, Final

from asya.flows.errors import Problem
from asya.flows.expr import FUNCTIONS, MAX_INT_BITS, MAX_VALUE_BYTES
from asya.flows.ir import DEFAULT_MAX_ITERATIONS

__all__ = ["BIN_OPS", "RESERVED", "ExprCompiler", "dotted_name", "rooted_at"]

BIN_OPS: Final = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%"}
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
RESERVED: Final = frozenset({"pause", "timeout", "gather", "flow", "map", "sleep", "wait_for", *FUNCTIONS})


class ExprCompiler:
    """One compilation's state and its expressions; a problem is recorded (:meth:`err`), never raised."""

    def __init__(self, filename: str, flow: str, actors: Collection[str] | None) -> None:
        self.filename = filename
        self.flow = flow
        self.actors = actors
        self.problems: list[Problem] = []
        self.code: list[dict[str, Any]] = []
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
            op = BIN_OPS.get(type(node.op))
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
        if isinstance(func, ast.Name) and func.id not in RESERVED and self.is_actor_name(func.id):
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


def dotted_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def rooted_at(node: ast.expr, param: str) -> bool:
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        return rooted_at(node.func.value, param)
    return isinstance(node, ast.Name) and node.id == param
