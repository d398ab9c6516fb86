"""The whole manifest: :class:`Manifest`, the blocks of :mod:`asya.manifest.blocks` with ``defaults`` applied to
every user actor (the actor's own fields win, ``env`` maps are merged: P-MAN-2), names checked against the naming
rules (``asya.naming``) and every route, ``on_exhausted`` target and sink hook checked against the actors it may
name (P-MAN-3).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from asya import naming
from asya.exceptions import NamingError
from asya.flows.ir import DEFAULT_MAX_PAUSE, Program
from asya.hops import DEFAULT_MAX_HOPS
from asya.manifest.blocks import (
    CREW_SETTINGS,
    ActorSettings,
    ActorSpec,
    CrewConfig,
    DeployedActor,
    DeploymentConfig,
    FanIn,
    Flow,
    GatewayConfig,
    ObservabilityConfig,
    StorageConfig,
    _Model,
)
from asya.manifest.capacity import CapacityTarget
from asya.suggest import did_you_mean

__all__ = ["Manifest"]


class Manifest(_Model):
    """A validated manifest. ``base_dir`` is the manifest's own directory; actor ``code`` is relative to it."""

    namespace: str
    defaults: ActorSettings = Field(default_factory=ActorSettings)
    actors: dict[str, ActorSpec] = Field(default_factory=dict)
    flows: dict[str, Flow] = Field(default_factory=dict)
    crew: CrewConfig = Field(default_factory=CrewConfig)
    gateway: GatewayConfig = Field(default_factory=GatewayConfig)
    storage: StorageConfig = Field(default_factory=StorageConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    deployment: DeploymentConfig = Field(default_factory=DeploymentConfig)
    #: The declared target rate (docs/capacity.md): what ``asya synth`` sizes the mesh for.
    capacity: CapacityTarget = Field(default_factory=CapacityTarget)
    #: The per-task hop ceiling (P-HOP-1): a task whose envelopes were sent this many times fails.
    max_hops: int = Field(DEFAULT_MAX_HOPS, ge=1, le=1_000_000, strict=True)
    base_dir: Path = Field(default=Path(), exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _apply_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        defaults = data.get("defaults") or {}
        actors = data.get("actors")
        if not isinstance(defaults, dict) or not isinstance(actors, dict):
            return data
        try:
            ActorSettings.model_validate(defaults)
        except ValidationError:
            return data  # the defaults field reports it once, as defaults.<key>, instead of once per actor
        merged: dict[str, Any] = {}
        for name, spec in actors.items():
            if not isinstance(spec, dict):
                merged[name] = spec
                continue
            combined = {**defaults, **spec}
            if isinstance(defaults.get("env"), dict) and isinstance(spec.get("env"), dict):
                combined["env"] = {**defaults["env"], **spec["env"]}
            merged[name] = combined
        return {**data, "actors": merged}

    @model_validator(mode="after")
    def _check_names_and_references(self) -> Manifest:
        # every problem at once, one line each: a manifest with three mistakes needs one run, not three
        problems: list[str] = []
        _collect(problems, self._check_namespace)
        for name, actor in self.actors.items():
            _collect(problems, self._check_actor_name, name, actor, check_queues=not problems)
        routable = self.routable_names()
        for name, actor in self.actors.items():
            if actor.resiliency is None:
                continue
            for policy_name, policy in actor.resiliency.policies.items():
                for index, target in enumerate(policy.on_exhausted):
                    field = f"actors.{name}.resiliency.policies.{policy_name}.on_exhausted[{index}]"
                    _collect(problems, self._check_target, target, routable, field)
        for index, hook in enumerate(self.crew.sink_hooks):
            _collect(problems, self._check_target, hook, routable, f"crew.sink_hooks[{index}]")
        for flow_name, flow in self.flows.items():
            _collect(problems, self._check_flow, flow_name, flow, routable)
        for flow_name in self.capacity.mix:
            if flow_name not in self.flows:
                problems.append(f"capacity.mix.{flow_name}: no flow {flow_name!r} (flows: {sorted(self.flows)})")
        for flow_name in self.gateway.auth.flow_scopes:
            if flow_name not in self.flows:
                problems.append(
                    f"gateway.auth.flow_scopes.{flow_name}: no flow {flow_name!r} (flows: {sorted(self.flows)})"
                )
        if problems:
            raise ValueError("\n  ".join(problems))
        return self

    def _check_namespace(self) -> None:
        _check(naming.validate_namespace, self.namespace, field="namespace")
        for crew in self.crew_actors():  # every mesh deploys these: a namespace too long for them is its fault
            try:
                naming.dlq_name(self.namespace, crew)
            except NamingError:
                longest = f"asya-{self.namespace}-{crew}-dlq"
                raise ValueError(
                    f"namespace: {self.namespace!r} is too long: the crew queue {longest!r} would be {len(longest)} "
                    f"characters, over the SQS limit of {naming.MAX_QUEUE_NAME}"
                ) from None

    def _check_actor_name(self, name: str, actor: ActorSpec, *, check_queues: bool) -> None:
        field = f"actors.{name}"
        _check(naming.validate_actor_name, name, field=field)
        if naming.is_crew(name):
            raise ValueError(f"{field}: actor name {name!r} is reserved for crew (names starting with 'x-')")
        if check_queues:  # with a bad namespace every queue name would be wrong: that is said once, above
            _check(naming.dlq_name, self.namespace, name)
            if actor.fan_in is not None:
                _check(naming.dlq_name, self.namespace, self.aggregator_of(name))

    def _compile_flow(self, flow_name: str, flow: Flow, field: str) -> None:
        """P-FLOW-1: compile ``source`` once; the program and its initial route are stored on the flow."""
        # the compiler is needed only where a manifest loads, and runs in a child process there (P-FLOW-22)
        from asya.flows import FlowCompileError
        from asya.flows.isolated import compile_isolated

        assert flow.source is not None
        if flow.compiled is not None:  # a deployment's dump of an already validated manifest
            try:
                flow._program = Program.from_json(flow.compiled)
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"{field}.compiled: not a compiled flow: {exc}") from None
            return
        path = (self.base_dir / flow.source).resolve()
        try:
            source = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{field}.source: cannot read {str(path)!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            raise ValueError(f"{field}.source: {str(path)!r} is not UTF-8 text: {exc.reason}") from None
        try:
            program = compile_isolated(source, flow=flow_name, filename=flow.source, actors=set(self.actors))
        except FlowCompileError as exc:
            lines = "\n    ".join(map(str, exc.problems))
            raise ValueError(f"{field}.source: the flow does not compile:\n    {lines}") from None
        if flow.max_pause != DEFAULT_MAX_PAUSE:
            program = dataclasses.replace(
                program, max_pause=None if flow.max_pause is None else math.ceil(flow.max_pause)
            )
        flow._program = program
        # frozen model: set once, during validation
        object.__setattr__(flow, "route", list(program.initial_route))
        object.__setattr__(flow, "compiled", program.to_json())
        if program.aggregator is not None:
            _check(naming.dlq_name, self.namespace, program.aggregator)

    def _check_flow(self, flow_name: str, flow: Flow, routable: frozenset[str]) -> None:
        field = f"flows.{flow_name}"
        _check(naming.validate_flow_name, flow_name, field=field)
        if flow.source is not None:
            self._compile_flow(flow_name, flow, field)
        problems: list[str] = []
        for index, target in enumerate(flow.route):
            _collect(problems, self._check_target, target, routable, f"{field}.route[{index}]")
        for index, target in enumerate(flow.route):
            spec = self.actors.get(target)
            if spec is None or spec.fan_in is None:
                continue
            aggregator = self.aggregator_of(target)
            if aggregator not in flow.route[index + 1 :]:
                problems.append(
                    f"{field}.route: fan-in actor {target!r} must be followed by its aggregator {aggregator!r}, "
                    f"got {flow.route!r}"
                )
        if flow.input_schema is not None:
            _collect(problems, _check_json_schema, flow.input_schema, f"{field}.input_schema")
        if flow.mcp:
            schema = flow.input_schema
            if schema is not None and schema.get("type") != "object":
                problems.append(
                    f"{field}.input_schema: an MCP flow needs an object schema (type: object), "
                    f"got type {schema.get('type')!r}"
                )
        if problems:
            raise ValueError("\n  ".join(problems))

    def _check_target(self, target: str, routable: frozenset[str], field: str) -> None:
        if target in (naming.SINK, naming.SUMP, naming.RESUME):
            raise ValueError(f"{field}: {target!r} cannot be routed to; it is added by the runtime")
        if target not in routable:
            # only names that every deployment runs are offered: crew this release refuses (x-pause, aggregators)
            # would only trade this error for another
            offered = sorted(self.actors)
            hint = did_you_mean(target, offered)
            raise ValueError(f"{field}: unknown actor {target!r}{hint}; actors: {', '.join(offered) or 'none'}")

    def aggregator_of(self, actor: str) -> str:
        """The aggregator name of fan-in actor ``actor`` (P-FANIN-1)."""
        spec = self.actors[actor]
        assert spec.fan_in is not None
        return spec.fan_in.aggregator or naming.default_aggregator(actor)

    def crew_targets(self) -> list[tuple[str, str]]:
        """``(field, name)`` of every route entry, ``on_exhausted`` target and sink hook that names crew (x-pause or
        an aggregator), in manifest order. The deployments check these against the crew they can run."""
        found: list[tuple[str, str]] = []
        for flow_name, flow in self.flows.items():
            found += [(f"flows.{flow_name}.route[{i}]", t) for i, t in enumerate(flow.route) if naming.is_crew(t)]
        for name, actor in self.actors.items():
            for policy_name, policy in (actor.resiliency.policies if actor.resiliency else {}).items():
                field = f"actors.{name}.resiliency.policies.{policy_name}.on_exhausted"
                found += [(f"{field}[{i}]", t) for i, t in enumerate(policy.on_exhausted) if naming.is_crew(t)]
        found += [(f"crew.sink_hooks[{i}]", t) for i, t in enumerate(self.crew.sink_hooks) if naming.is_crew(t)]
        return found

    def routable_names(self) -> frozenset[str]:
        """Names a flow route, ``on_exhausted`` or a sink hook may contain (P-MAN-3)."""
        aggregators = {self.aggregator_of(name) for name, spec in self.actors.items() if spec.fan_in is not None}
        return frozenset(self.actors) | naming.ROUTABLE_CREW | aggregators

    def code_dir(self, actor: str) -> Path:
        """Absolute code directory of user actor ``actor``, relative to the manifest's directory."""
        return (self.base_dir / self.actors[actor].code).resolve()

    def missing_code_dir(self) -> str | None:
        """The error of the first user actor whose ``code`` directory does not exist, else ``None``: checked before
        anything is deployed or started, since the handler could not load from it."""
        for name in self.actors:
            directory = self.code_dir(name)
            if not directory.is_dir():
                return (
                    f"actors.{name}.code: directory {directory} does not exist "
                    f"(relative to the manifest's directory {self.base_dir})"
                )
        return None

    def deployed_actors(self) -> list[DeployedActor]:
        """Every actor a deployment creates: user actors in manifest order, then the crew (x-sink, x-sump, x-pause with
        x-resume when used, and the fan-in aggregators, :meth:`crew_actors`), whose ``tracing`` is
        ``defaults.tracing``."""
        out = [
            DeployedActor(
                name=name,
                crew=False,
                handler=spec.handler,
                code_dir=self.code_dir(name),
                memory=spec.memory,
                timeout=spec.timeout,
                batch_size=spec.batch_size,
                max_concurrency=spec.max_concurrency,
                reserved_concurrency=spec.reserved_concurrency,
                max_receive_count=spec.max_receive_count,
                record_concurrency=spec.record_concurrency,
                env=dict(spec.env),
                resiliency=spec.resiliency,
                tracing=spec.tracing,
                fan_in=(
                    None if spec.fan_in is None else FanIn(aggregator=self.aggregator_of(name), key=spec.fan_in.key)
                ),
            )
            for name, spec in self.actors.items()
        ]
        # the crew is traced with the mesh: ``defaults.tracing`` (an actor's own setting covers that actor only)
        out.extend(
            DeployedActor(
                name=crew,
                crew=True,
                handler=None,
                code_dir=None,
                env={},
                tracing=self.defaults.tracing,
                **CREW_SETTINGS,
            )
            for crew in self.crew_actors()
        )
        return out

    def crew_actors(self) -> tuple[str, ...]:
        """The crew this mesh deploys: x-sink and x-sump always, x-pause and x-resume when anything names x-pause
        (P-PAUSE-1), then the fan-in aggregators."""
        pauses = any(name == naming.PAUSE for _, name in self.crew_targets()) or any(
            ins["op"] == "pause" for program in self.programs().values() for ins in program.code
        )
        pause = naming.PAUSE_CREW if pauses else ()
        return (*naming.CREW_ACTORS, *pause, *self.aggregators())

    def programs(self) -> dict[str, Program]:
        """The compiled flows (P-FLOW-1), by flow name."""
        return {name: flow.program for name, flow in self.flows.items() if flow.program is not None}

    def programs_for(self, actor: str) -> dict[str, Program]:
        """The compiled flows ``actor`` runs continuations of (P-FLOW-4, P-FLOW-6, P-FLOW-7): those that call it,
        fan in through it, or pause (for x-resume)."""
        out: dict[str, Program] = {}
        for name, program in self.programs().items():
            pauses = any(ins["op"] == "pause" for ins in program.code)
            if actor in program.actors or actor == program.aggregator or (actor == naming.RESUME and pauses):
                out[name] = program
        return out

    def aggregators(self) -> list[str]:
        """The fan-in aggregators the ``fan_in`` declarations generate (P-FANIN-1), in manifest order, once each."""
        names = [self.aggregator_of(name) for name, spec in self.actors.items() if spec.fan_in is not None]
        names += [p.aggregator for p in self.programs().values() if p.aggregator is not None]
        return list(dict.fromkeys(names))

    def queue_name(self, actor: str) -> str:
        return naming.queue_name(self.namespace, actor)

    def dlq_name(self, actor: str) -> str:
        return naming.dlq_name(self.namespace, actor)

    @property
    def table_name(self) -> str:
        return naming.table_name(self.namespace)


def _collect(problems: list[str], fn: Any, *args: Any, **kwargs: Any) -> None:
    """Run one check; its ``ValueError`` becomes a line of ``problems`` instead of ending the validation."""
    try:
        fn(*args, **kwargs)
    except ValueError as exc:
        problems.append(str(exc))


def _check(fn: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return fn(*args, **kwargs)
    except NamingError as exc:
        raise ValueError(str(exc)) from None


def _check_json_schema(schema: dict[str, Any], field: str) -> None:
    from jsonschema import exceptions as js_exceptions
    from jsonschema import validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except js_exceptions.SchemaError as exc:
        raise ValueError(f"{field}: invalid JSON Schema: {exc.message}") from None
