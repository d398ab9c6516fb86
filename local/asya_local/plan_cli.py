"""``asya plan OLD NEW``: the static deploy preview (``asya_local.plan``), offline.

::

    asya plan OLD NEW [--json]    OLD and NEW: an asya.yaml each, or the directory holding it

Prints the actors removed and added, the flows added, removed or changed (compiled flows by program digest), and the
settings that change how work is run. Exit codes: 0 when the deploy removes no actor, 1 when it removes one (its
queue and DLQ would be deleted with their messages), 2 when a manifest cannot be read or is invalid.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from asya_local.cliio import CliIo
from asya_local.plan import deploy_plan, load_side, render_plan

if TYPE_CHECKING:
    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["add_plan_parser"]


def add_plan_parser(commands: _Commands) -> None:
    plan = commands.add_parser(
        "plan", help="what deploying manifest NEW over OLD changes for work in flight (offline, no AWS)"
    )
    plan.add_argument("old", metavar="OLD", help="the deployed manifest: asya.yaml, or its directory")
    plan.add_argument("new", metavar="NEW", help="the manifest to deploy: asya.yaml, or its directory")
    plan.add_argument("--json", action="store_true", help="print the plan as JSON (full digests)")
    plan.set_defaults(run=_plan)


def _plan(args: argparse.Namespace, io: CliIo) -> int:
    result = deploy_plan(load_side(args.old), load_side(args.new))
    if args.json:
        io.print_json(result.to_json())
    else:
        for line in render_plan(result):
            io.line(line)
    return 1 if result.removes_actors else 0
