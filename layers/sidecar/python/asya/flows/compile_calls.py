"""The flow compiler's calls (``asya.flows.compiler``): an actor call, a fan-out (``gather``, a list of calls), a
bounded map (a comprehension or ``map(...)``), and the calls that pause a flow (``pause``, ``wait_for``, ``sleep``);
each emits its instruction or records a problem.
"""

from __future__ import annotations

import ast
import math
from typing import Any, Final

from asya.flows.compile_expr import RESERVED, ExprCompiler, dotted_name, rooted_at
from asya.naming import is_event_name

__all__ = ["CallCompiler"]

#: How a bounded map is called: the stand-in ``asya.flows.map``, imported or named through its module.
_MAP_NAMES: Final = frozenset({"map", "flows.map", "asya.flows.map"})
_MAP_FIX: Final = 'state["r"] = map(act, state["items"], max_concurrency=5)'


class CallCompiler(ExprCompiler):
    """:class:`ExprCompiler` with the calls a statement may hold."""

    def actor_call_node(self, node: ast.expr) -> str | None:
        """The called name when ``node`` is ``[await] name(...)`` of a would-be actor, else ``None``."""
        call = node.value if isinstance(node, ast.Await) else node
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id not in RESERVED:
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
        elif isinstance(inner, ast.Call) and dotted_name(inner.func) in ("asyncio.gather", "gather"):
            calls = list(inner.args)
            for item in calls:
                if not self.actor_call_node(item):
                    self.err(item, "asyncio.gather(...) takes actor calls only", "asyncio.gather(a(state), b(state))")
                    return True
        elif isinstance(inner, ast.ListComp):
            self.map(inner, target, path)
            return True
        elif isinstance(inner, ast.Call) and dotted_name(inner.func) in _MAP_NAMES:
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
        source = self.expr(gen.iter) if rooted_at(gen.iter, self.param) else None
        if source is None and not rooted_at(gen.iter, self.param):
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
        if name.id in RESERVED:
            self.err(name, f"map's first argument is an actor, not '{name.id}'", _MAP_FIX)
            return
        source = self.expr(items) if rooted_at(items, self.param) else None
        if source is None and not rooted_at(items, self.param):
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
        fix = f'{self.param} = await pause({self.param}, prompt="Review", fields=[{{"name": "ok", "type": "boolean"}}])'
        matched, call = self.state_call(value, "pause", fix)
        if call is None:
            return matched
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
        fix = f'{self.param} = await wait_for({self.param}, event="approved", timeout=3600)'
        matched, call = self.state_call(value, "wait_for", fix)
        if call is None:
            return matched
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

    def state_call(self, value: ast.expr, name: str, fix: str) -> tuple[bool, ast.Call | None]:
        """``(whether value is [await] name(...), the call when its one positional argument is the state)``; a call
        of ``name`` with other arguments is an error."""
        call = value.value if isinstance(value, ast.Await) else value
        if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == name):
            return False, None
        if len(call.args) != 1 or not self.is_state(call.args[0]):
            self.err(call, f"{name}(...) takes the state as its one positional argument", fix)
            return True, None
        return True, call

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


def _whole_seconds(literal: object) -> int | None:
    """A positive finite number literal rounded up to whole seconds, else ``None``."""
    if isinstance(literal, bool) or not isinstance(literal, int | float) or not math.isfinite(literal) or literal <= 0:
        return None
    return math.ceil(literal)
