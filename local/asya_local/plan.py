"""``asya plan OLD NEW``: what a deploy from manifest OLD to manifest NEW means for work in flight, read from the two
manifests alone (docs/deploy.md "Upgrading a mesh").

:func:`deploy_plan` compares two validated manifests and returns a :class:`DeployPlan`:

- actors (crew included) removed and added. A deploy deletes a removed actor's queue and DLQ with the messages in
  them, so the tasks routed to it end only at their deadline. A rename is a removal plus an addition; a removed and an
  added user actor with the same handler are paired as a likely rename, still counted as a removal;
- flows added, removed and changed: a compiled flow by its program digest on each side (P-FLOWV-1), a static route by
  its actors;
- settings that change how work is run: per actor the timeout, batch size, concurrency, receive count, retry policies,
  handler, fan-in, environment (names only, never values) and tracing; per flow the timeout, progress, history and
  input schema; the mesh's ``max_hops``, payload offload threshold and namespace.

Nothing here reads AWS: the number of messages in a removed actor's queues and of tasks on a changed flow need the
deployed mesh and are not part of this plan. :func:`load_side` accepts an ``asya.yaml`` path or the directory that
holds it, so OLD can be a checkout of the deployed version.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel

from asya import naming
from asya.exceptions import ManifestError
from asya.manifest import DeployedActor, Flow, Manifest, load_manifest

__all__ = ["ActorRemoval", "DeployPlan", "FlowChange", "SettingChange", "deploy_plan", "load_side", "render_plan"]

_MANIFEST_NAME: Final = "asya.yaml"

#: Actor fields compared as they are, with what a change does to work in flight.
_ACTOR_FIELDS: Final[dict[str, str]] = {
    "handler": "the next hop of every task in flight runs the new handler",
    "timeout": "a call longer than the new limit fails and is retried",
    "batch_size": "records per invocation change; the Lambda and visibility timeouts follow",
    "max_concurrency": "how many invocations drain the queue at once",
    "reserved_concurrency": "how many invocations drain the queue at once",
    "max_receive_count": "deliveries before a message moves to the DLQ, messages already in the queue included",
    "memory": "",
    "tracing": "",
    "lambda_timeout": "",
    "visibility_timeout": "how long a failed delivery waits before it is received again",
}
_FLOW_FIELDS: Final[dict[str, str]] = {
    "timeout": "the deadline of tasks created after the deploy; tasks in flight keep theirs",
    "progress": "",
    "history": "tasks created after the deploy",
    "history_body_bytes": "",
    "mcp": "",
    "input_schema": "checked at task creation",
}


@dataclass(frozen=True, slots=True)
class ActorRemoval:
    """An actor OLD deploys and NEW does not: its queue and DLQ are deleted with their messages."""

    name: str
    crew: bool
    #: an added user actor with the same handler: likely a rename (the queue is still a new, empty one)
    renamed_to: str | None = None


@dataclass(frozen=True, slots=True)
class FlowChange:
    """A flow added, removed or changed. A digest is ``None`` on a side where the flow is absent or a static route;
    a route is ``None`` on a side where the flow is absent or compiled."""

    name: str
    kind: Literal["added", "removed", "changed"]
    old_digest: str | None = None
    new_digest: str | None = None
    old_route: tuple[str, ...] | None = None
    new_route: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class SettingChange:
    """One setting that differs: ``scope`` is ``actors.NAME``, ``flows.NAME`` or ``mesh``."""

    scope: str
    setting: str
    old: Any
    new: Any
    effect: str = ""


@dataclass(frozen=True, slots=True)
class DeployPlan:
    """What a deploy from OLD to NEW changes, statically."""

    removed: tuple[ActorRemoval, ...] = ()
    added: tuple[str, ...] = ()
    flows: tuple[FlowChange, ...] = ()
    settings: tuple[SettingChange, ...] = ()

    @property
    def removes_actors(self) -> bool:
        return bool(self.removed)

    @property
    def empty(self) -> bool:
        return not (self.removed or self.added or self.flows or self.settings)

    def to_json(self) -> dict[str, Any]:
        return {
            "removed": [{"name": r.name, "crew": r.crew, "renamed_to": r.renamed_to} for r in self.removed],
            "added": list(self.added),
            "flows": [
                {
                    "name": f.name,
                    "kind": f.kind,
                    "old_digest": f.old_digest,
                    "new_digest": f.new_digest,
                    "old_route": None if f.old_route is None else list(f.old_route),
                    "new_route": None if f.new_route is None else list(f.new_route),
                }
                for f in self.flows
            ],
            "settings": [
                {"scope": s.scope, "setting": s.setting, "old": s.old, "new": s.new, "effect": s.effect}
                for s in self.settings
            ],
        }


def load_side(path: Path | str) -> Manifest:
    """The manifest at ``path``: an ``asya.yaml`` file, or a directory holding one."""
    where = Path(path)
    if where.is_dir():
        candidate = where / _MANIFEST_NAME
        if not candidate.is_file():
            raise ManifestError(f"{where}: a directory without {_MANIFEST_NAME}; pass the manifest's path")
        where = candidate
    return load_manifest(where)


def deploy_plan(old: Manifest, new: Manifest) -> DeployPlan:
    """What deploying ``new`` over ``old`` changes for work in flight."""
    old_actors = {a.name: a for a in old.deployed_actors()}
    new_actors = {a.name: a for a in new.deployed_actors()}
    added = tuple(name for name in new_actors if name not in old_actors)
    removed = tuple(
        ActorRemoval(name=name, crew=actor.crew, renamed_to=_rename_of(actor, new_actors, added))
        for name, actor in old_actors.items()
        if name not in new_actors
    )
    settings: list[SettingChange] = _mesh_settings(old, new)
    for name, before in old_actors.items():
        after = new_actors.get(name)
        if after is not None:
            settings += _actor_settings(name, before, after)
    flows: list[FlowChange] = []
    for name in [*old.flows, *(n for n in new.flows if n not in old.flows)]:
        change = _flow_change(name, old.flows.get(name), new.flows.get(name))
        if change is not None:
            flows.append(change)
        if name in old.flows and name in new.flows:
            settings += _flow_settings(name, old.flows[name], new.flows[name])
    return DeployPlan(removed=removed, added=added, flows=tuple(flows), settings=tuple(settings))


def _rename_of(actor: DeployedActor, new_actors: dict[str, DeployedActor], added: tuple[str, ...]) -> str | None:
    if actor.crew or actor.handler is None:
        return None
    same = [name for name in added if new_actors[name].handler == actor.handler]
    return same[0] if len(same) == 1 else None


def _mesh_settings(old: Manifest, new: Manifest) -> list[SettingChange]:
    out = []
    if old.namespace != new.namespace:
        out.append(
            SettingChange(
                "mesh",
                "namespace",
                old.namespace,
                new.namespace,
                "another namespace is another mesh: nothing is updated",
            )
        )
    if old.max_hops != new.max_hops:
        out.append(
            SettingChange("mesh", "max_hops", old.max_hops, new.max_hops, "applies to the next hop of every task")
        )
    before, after = old.storage.offload_threshold_kb, new.storage.offload_threshold_kb
    if before != after:
        out.append(SettingChange("mesh", "storage.offload_threshold_kb", before, after))
    return out


def _actor_settings(name: str, before: DeployedActor, after: DeployedActor) -> list[SettingChange]:
    scope = f"actors.{name}"
    out = _field_changes(scope, before, after, _ACTOR_FIELDS)
    old_res, new_res = _dumped(before.resiliency), _dumped(after.resiliency)
    if old_res != new_res:
        out.append(
            SettingChange(scope, "resiliency", old_res, new_res, "retries of tasks in flight follow the new policies")
        )
    old_fan, new_fan = _dumped(before.fan_in), _dumped(after.fan_in)
    if old_fan != new_fan:
        out.append(SettingChange(scope, "fan_in", old_fan, new_fan, "slices in flight are merged by the new rule"))
    changed_env = sorted(k for k in before.env.keys() | after.env.keys() if before.env.get(k) != after.env.get(k))
    if changed_env:
        out.append(SettingChange(scope, "env", None, changed_env, "names of the variables changed; values not shown"))
    return out


def _dumped(block: BaseModel | None) -> Any:
    return None if block is None else block.model_dump(mode="json")


def _flow_settings(name: str, before: Flow, after: Flow) -> list[SettingChange]:
    return _field_changes(f"flows.{name}", before, after, _FLOW_FIELDS)


def _field_changes(scope: str, before: object, after: object, fields: Mapping[str, str]) -> list[SettingChange]:
    """One change per attribute of ``fields`` (name -> effect) that differs, in the order of ``fields``."""
    return [
        SettingChange(scope, key, getattr(before, key), getattr(after, key), effect)
        for key, effect in fields.items()
        if getattr(before, key) != getattr(after, key)
    ]


def _flow_change(name: str, before: Flow | None, after: Flow | None) -> FlowChange | None:
    old_digest, old_route = _flow_identity(before)
    new_digest, new_route = _flow_identity(after)
    if before is None:
        return FlowChange(name, "added", new_digest=new_digest, new_route=new_route)
    if after is None:
        return FlowChange(name, "removed", old_digest=old_digest, old_route=old_route)
    if (old_digest, old_route) == (new_digest, new_route):
        return None
    return FlowChange(name, "changed", old_digest, new_digest, old_route, new_route)


def _flow_identity(flow: Flow | None) -> tuple[str | None, tuple[str, ...] | None]:
    if flow is None:
        return None, None
    if flow.program is not None:
        return flow.program.digest, None
    return None, tuple(flow.route)


def render_plan(plan: DeployPlan) -> list[str]:
    """The plan as text lines, most consequential first."""
    if plan.empty:
        return ["no change to actors, flows or settings"]
    lines: list[str] = []
    if plan.removed:
        lines.append("actors removed (their queue and DLQ are deleted with the messages in them):")
        for removal in plan.removed:
            kind = " (crew)" if removal.crew else ""
            if removal.name == naming.RESUME:
                kind += ": paused tasks can no longer be resumed"
            rename = (
                f"; renamed to {removal.renamed_to}? (same handler; its queue is a new, empty one)"
                if removal.renamed_to
                else ""
            )
            lines.append(f"  - {removal.name}{kind}{rename}")
        lines.append("  drain each first: see docs/deploy.md 'Upgrading a mesh'")
    if plan.added:
        lines.append("actors added:")
        lines += [f"  + {name}" for name in plan.added]
    if plan.flows:
        lines.append("flows:")
        lines += [f"  {_flow_line(change)}" for change in plan.flows]
    if plan.settings:
        lines.append("settings:")
        for s in plan.settings:
            effect = f"  ({s.effect})" if s.effect else ""
            values = f"changed: {', '.join(s.new)}" if s.setting == "env" else f"{_value(s.old)} -> {_value(s.new)}"
            lines.append(f"  {s.scope}.{s.setting}: {values}{effect}")
    return lines


def _flow_line(change: FlowChange) -> str:
    old = _side(change.old_digest, change.old_route)
    new = _side(change.new_digest, change.new_route)
    if change.kind == "added":
        return f"+ {change.name}: {new}"
    if change.kind == "removed":
        return f"- {change.name}: {old} (new tasks refused; tasks in flight finish on their program or route)"
    return f"~ {change.name}: {old} -> {new} (tasks in flight finish on the old one, new tasks take the new one)"


def _side(digest: str | None, route: tuple[str, ...] | None) -> str:
    if digest is not None:
        return f"program {digest[:12]}"
    return f"route [{', '.join(route or ())}]"


def _value(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
