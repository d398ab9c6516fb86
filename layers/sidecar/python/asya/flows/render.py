"""Diagrams and listings of a compiled flow (``asya flow show``): Graphviz DOT, Mermaid text and a readable listing.

The graph has one node per visible instruction (calls, tests, mutations, fan-outs, pauses, the end) and follows
jumps and bookkeeping (loop counters, try and deadline markers) to the next visible one. A call inside a ``try``
gets a dashed edge per ``except`` clause. Node ids are ``n<pc>``, so a console can highlight the path of a task from
the positions in its ``x-asya-flow-state`` history.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from asya.flows.ir import Program

__all__ = ["expr_text", "graph", "graph_json", "listing", "to_dot", "to_mermaid"]

_HIDDEN: Final = frozenset({"jump", "loopinit", "loop", "endloop", "try", "endtry", "deadline", "enddeadline"})
_END: Final = "done"  # not "end": a reserved word in Mermaid


def expr_text(tree: Any) -> str:
    """The Python text of an expression tree (:mod:`asya.flows.expr`)."""
    tag = tree[0]
    if tag == "const":
        return repr(tree[1])
    if tag == "state":
        return "state"
    if tag == "sub":
        return f"{expr_text(tree[1])}[{expr_text(tree[2])}]"
    if tag == "get":
        return f"{expr_text(tree[1])}.get({expr_text(tree[2])}, {expr_text(tree[3])})"
    if tag == "bin":
        return f"({expr_text(tree[2])} {tree[1]} {expr_text(tree[3])})"
    if tag == "neg":
        return f"-{expr_text(tree[1])}"
    if tag == "not":
        return f"not {expr_text(tree[1])}"
    if tag in ("and", "or"):
        return f" {tag} ".join(expr_text(t) for t in tree[1])
    if tag == "cmp":
        ops = {"notin": "not in", "isnot": "is not"}
        return expr_text(tree[1]) + "".join(f" {ops.get(op, op)} {expr_text(t)}" for op, t in tree[2])
    if tag == "if":
        return f"{expr_text(tree[2])} if {expr_text(tree[1])} else {expr_text(tree[3])}"
    if tag == "list":
        return "[" + ", ".join(expr_text(t) for t in tree[1]) + "]"
    if tag == "dict":
        return "{" + ", ".join(f"{expr_text(k)}: {expr_text(v)}" for k, v in tree[1]) + "}"
    if tag == "fn":
        return f"{tree[1]}(" + ", ".join(expr_text(t) for t in tree[2]) + ")"
    return "?"


def _label(ins: Mapping[str, Any]) -> str:
    op = ins["op"]
    if op == "call":
        return str(ins["actor"])
    if op == "set":
        path = "".join(f"[{expr_text(k)}]" for k in ins["path"])
        return f"state{path} = {expr_text(ins['expr'])}"
    if op == "test":
        return expr_text(ins["expr"])
    bound = f", {ins['limit']} at a time" if ins.get("limit") else ""
    if op == "fanout":
        return f"fan-out {', '.join(ins['calls'])} -> {ins['target']}{bound}"
    if op == "map":
        return f"map {ins['actor']} over {expr_text(ins['source'])} -> {ins['target']}{bound}"
    if op == "pause":
        timeout = f" (timeout {ins['timeout']} s)" if "timeout" in ins else ""
        if "event" in ins:
            return f"wait_for {ins['event']}{timeout}"
        return f"pause: {ins['prompt']}{timeout}"
    if op == "sleep":
        return f"sleep {ins['seconds']} s"
    return "end"


def _visible(program: Program, pc: int, seen: frozenset[int] = frozenset()) -> str:
    code = program.code
    while pc < len(code) and code[pc]["op"] in _HIDDEN and pc not in seen:
        seen = seen | {pc}
        pc = code[pc]["to"] if code[pc]["op"] == "jump" else pc + 1
    if pc >= len(code) or code[pc]["op"] == "return":
        return _END
    return f"n{pc}"


def _tries(program: Program) -> dict[int, list[int]]:
    """The try statements (their pcs, innermost last) around each call."""
    stack: list[int] = []
    out: dict[int, list[int]] = {}
    for pc, ins in enumerate(program.code):
        if ins["op"] == "try":
            stack.append(pc)
        elif ins["op"] == "endtry" and stack:
            stack.pop()
        elif ins["op"] in ("call", "fanout", "map", "pause"):  # a pause raises TimeoutError there (P-WAIT-1)
            out[pc] = list(stack)
    return out


def graph(program: Program) -> tuple[dict[str, tuple[str, str]], list[tuple[str, str, str, bool]]]:
    """``(nodes, edges)``: node id -> (kind, label); edges ``(from, to, label, dashed)``."""
    nodes: dict[str, tuple[str, str]] = {"start": ("start", program.flow)}
    edges: list[tuple[str, str, str, bool]] = [("start", _visible(program, 0), "", False)]
    tries = _tries(program)
    for pc, ins in enumerate(program.code):
        op = ins["op"]
        if op in _HIDDEN or op == "return":
            continue
        node = f"n{pc}"
        nodes[node] = (op, _label(ins))
        if op == "test":
            edges.append((node, _visible(program, pc + 1), "yes", False))
            edges.append((node, _visible(program, ins["else"]), "no", False))
        else:
            edges.append((node, _visible(program, pc + 1), "", False))
        for try_pc in tries.get(pc, []):
            for clause in program.code[try_pc]["clauses"]:
                edges.append((node, _visible(program, clause["to"]), "except " + ", ".join(clause["errors"]), True))
    nodes[_END] = ("end", "return state")
    return nodes, edges


def _node_actors(program: Program, pc: int) -> list[str]:
    """The actors whose step puts a task at node ``n<pc>``: the call's actor; a fan-out's calls and the flow's
    aggregator (the merged envelope's hop); ``x-pause`` for a pause."""
    ins = program.code[pc]
    op = ins["op"]
    if op == "call":
        return [str(ins["actor"])]
    if op in ("fanout", "map"):
        calls = list(ins["calls"]) if op == "fanout" else [str(ins["actor"])]
        return calls + ([program.aggregator] if program.aggregator else [])
    if op == "pause":
        return ["x-pause"]
    if op == "sleep":
        return ["x-resume"]
    return []


def graph_json(program: Program) -> dict[str, Any]:
    """:func:`graph` as JSON for the web console (GW-MESH-1): ``{"nodes": [{"id", "kind", "label", "actors"}],
    "edges": [{"from", "to", "label", "dashed"}]}``, nodes in program order, ``start`` first and ``done`` last."""
    nodes, edges = graph(program)
    return {
        "nodes": [
            {
                "id": node,
                "kind": kind,
                "label": label,
                "actors": _node_actors(program, int(node[1:])) if node.startswith("n") else [],
            }
            for node, (kind, label) in nodes.items()
        ],
        "edges": [{"from": src, "to": dst, "label": label, "dashed": dashed} for src, dst, label, dashed in edges],
    }


def to_dot(program: Program) -> str:
    """Graphviz DOT of ``program``."""
    shapes = {"call": "box", "test": "diamond", "set": "note", "fanout": "parallelogram", "map": "parallelogram"}
    lines = [f"digraph {json.dumps(program.flow)} {{", "  rankdir=TB;", '  node [fontname="Helvetica"];']
    nodes, edges = graph(program)
    for node, (kind, label) in nodes.items():
        shape = shapes.get(kind, "ellipse")
        lines.append(f"  {node} [shape={shape}, label={json.dumps(label)}];")
    for src, dst, label, dashed in edges:
        attrs = [f"label={json.dumps(label)}"] if label else []
        if dashed:
            attrs.append("style=dashed")
        lines.append(f"  {src} -> {dst}" + (f" [{', '.join(attrs)}]" if attrs else "") + ";")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mermaid_text(label: str) -> str:
    return label.replace('"', "#quot;")


def to_mermaid(program: Program) -> str:
    """Mermaid ``flowchart`` text of ``program`` (the console draws it without a build step)."""
    shapes = {
        "call": ('["', '"]'),
        "test": ('{"', '"}'),
        "set": ('["', '"]'),
        "fanout": ('[/"', '"/]'),
        "map": ('[/"', '"/]'),
        "pause": ('(["', '"])'),
        "sleep": ('(["', '"])'),
    }
    lines = ["flowchart TD"]
    nodes, edges = graph(program)
    for node, (kind, label) in nodes.items():
        left, right = shapes.get(kind, ('(("', '"))'))
        lines.append(f"  {node}{left}{_mermaid_text(label)}{right}")
    for src, dst, label, dashed in edges:
        arrow = "-.->" if dashed else "-->"
        lines.append(f"  {src} {arrow}" + (f'|"{_mermaid_text(label)}"|' if label else "") + f" {dst}")
    return "\n".join(lines) + "\n"


def listing(program: Program) -> str:
    """The program as numbered instructions, for ``asya flow show``."""
    lines = [
        f"flow {program.flow} ({program.source}), max_iterations={program.max_iterations}",
        f"initial route: {list(program.initial_route)}",
        f"actors: {', '.join(program.actors)}",
    ]
    if program.aggregator:
        lines.append(f"aggregator: {program.aggregator}")
    for pc, ins in enumerate(program.code):
        op = ins["op"]
        if op == "test":
            text = f"test {expr_text(ins['expr'])} else -> {ins['else']}"
        elif op == "jump":
            text = f"jump -> {ins['to']}"
        elif op == "try":
            clauses = "; ".join(f"{', '.join(c['errors'])} -> {c['to']}" for c in ins["clauses"])
            text = f"try ({clauses})"
        elif op in ("loopinit", "loop", "endloop"):
            text = f"{op} {ins['id']}"
        elif op == "deadline":
            text = f"deadline +{ins['seconds']}s"
        elif op in ("endtry", "enddeadline", "return"):
            text = op
        elif op in ("fanout", "map", "pause", "sleep"):
            text = _label(ins)
        else:
            text = f"{op} {_label(ins)}"
        line = f"  line {ins['line']}" if "line" in ins else ""
        lines.append(f"{pc:4d}  {text}{line}")
    return "\n".join(lines) + "\n"
