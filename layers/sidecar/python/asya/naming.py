"""Names of actors, queues and shared resources: the one place that knows them.

Imported by the sidecar layer, the gateway, the local mode and the CDK app, so a queue is always called the same thing
wherever it is created or addressed.

Rules (docs/protocol.md section 2):

- actor names match ``^[a-z][a-z0-9-]{0,39}$`` (P-NAME-1); names starting with ``x-`` are reserved for crew (P-NAME-2);
- the namespace matches ``^[a-z][a-z0-9-]*$`` (P-NAME-3);
- the queue of actor ``a`` in namespace ``ns`` is ``asya-{ns}-{a}``, its DLQ ``asya-{ns}-{a}-dlq`` (P-NAME-4), and the
  DLQ name must fit the SQS limit of 80 characters (P-NAME-5);
- flow names match ``^[a-z][a-z0-9_-]{0,63}$`` (P-NAME-6).
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from asya.exceptions import NamingError

__all__ = [
    "ACTOR_NAME_RE",
    "AGGREGATOR_ENTRY_POINT",
    "CREW_ACTORS",
    "CREW_ENTRY_POINTS",
    "DEADLINE",
    "FIXED_CREW",
    "FLOW_NAME_RE",
    "HANDLER_ROUTABLE_CREW",
    "MAX_QUEUE_NAME",
    "NAMESPACE_RE",
    "PAUSE_CREW",
    "ROUTABLE_CREW",
    "SIDECAR_ENTRY_POINT",
    "SINK",
    "SUMP",
    "EntryPoint",
    "bucket_name",
    "default_aggregator",
    "dlq_name",
    "entry_point",
    "handler_may_route_to",
    "is_aggregator",
    "is_crew",
    "is_event_name",
    "is_valid_actor_name",
    "queue_name",
    "table_name",
    "undeployed_crew",
    "validate_actor_name",
    "validate_flow_name",
    "validate_namespace",
]

ACTOR_NAME_RE: Final = re.compile(r"^[a-z][a-z0-9-]{0,39}$")
NAMESPACE_RE: Final = re.compile(r"^[a-z][a-z0-9-]*$")
FLOW_NAME_RE: Final = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")

#: SQS queue names are at most 80 characters.
MAX_QUEUE_NAME: Final = 80

SINK: Final = "x-sink"
SUMP: Final = "x-sump"
PAUSE: Final = "x-pause"
RESUME: Final = "x-resume"
#: The queue of per-task deadline timers, consumed by the backstop function (GW-BACK-1); not an actor.
DEADLINE: Final = "x-deadline"
#: Crew names with a fixed name; aggregators (``x-fanin-*``) are crew too but are named per fan-in actor.
FIXED_CREW: Final = frozenset({SINK, SUMP, PAUSE, RESUME, DEADLINE})
#: Crew actors every mesh deploys, whatever its flows use.
CREW_ACTORS: Final = (SINK, SUMP)
#: Crew names a flow route may contain (P-MAN-3); aggregators are allowed separately.
ROUTABLE_CREW: Final = frozenset({PAUSE})
#: Crew a handler's SET may put into ``route.next`` (P-ABI-15): a handler may pause dynamically; x-sink, x-sump,
#: x-deadline, x-resume and aggregators are reached only through the layer's own routing.
HANDLER_ROUTABLE_CREW: Final = frozenset({PAUSE})

_DLQ_SUFFIX: Final = "-dlq"


class EntryPoint(NamedTuple):
    """Where an actor's Lambda code starts: the module, and the runtime class the module's ``lambda_handler`` builds.

    The CDK app deploys ``handler``; the local mode instantiates ``module.runtime`` directly, so both run the same code.
    """

    module: str
    runtime: str

    @property
    def handler(self) -> str:
        return f"{self.module}.lambda_handler"


#: Every user actor runs the sidecar layer's entry point, which loads ``ASYA_HANDLER``.
SIDECAR_ENTRY_POINT: Final = EntryPoint("asya.sidecar", "ActorRuntime")
#: Crew actors deployed with every mesh, by name.
CREW_ENTRY_POINTS: Final = {
    SINK: EntryPoint("asya_crew.sink", "SinkRuntime"),
    SUMP: EntryPoint("asya_crew.sump", "SumpRuntime"),
    PAUSE: EntryPoint("asya_crew.pause", "PauseRuntime"),
    RESUME: EntryPoint("asya_crew.resume", "ResumeRuntime"),
}
#: Crew a mesh deploys when a route, ``on_exhausted`` or sink hook names x-pause: the pair serves pause and resume.
PAUSE_CREW: Final = (PAUSE, RESUME)
#: Every fan-in aggregator (P-FANIN-1, P-AGG-1) runs the same crew runtime, named by its ``ASYA_ACTOR``.
AGGREGATOR_ENTRY_POINT: Final = EntryPoint("asya_crew.aggregator", "AggregatorRuntime")


def undeployed_crew(targets: list[tuple[str, str]]) -> str | None:
    """A readable error for the first of ``targets`` (``(field, crew name)``, ``Manifest.crew_targets``) that names
    crew this release cannot run (none of the routable crew today: x-pause and fan-in aggregators run; a route cannot
    name x-resume), else ``None``. The spec allows crew in a manifest (P-MAN-3); refusing at deploy or start time
    beats every task failing at that hop. The manifest only lets a route name an aggregator that a ``fan_in``
    declaration generates."""
    for field, name in targets:
        if name not in CREW_ENTRY_POINTS and not is_aggregator(name):
            return (
                f"{field}: crew actor {name!r} is not available in this release "
                f"(deployable crew: {', '.join(sorted(CREW_ENTRY_POINTS))})"
            )
    return None


def is_valid_actor_name(name: object) -> bool:
    """True when ``name`` is a string satisfying P-NAME-1 (crew names included)."""
    return isinstance(name, str) and ACTOR_NAME_RE.match(name) is not None


def is_aggregator(name: str) -> bool:
    """True for a fan-in aggregator's name (P-FANIN-1): crew (``x-`` prefix) without a fixed crew name."""
    return is_crew(name) and name not in FIXED_CREW


def handler_may_route_to(name: str) -> bool:
    """False for crew a handler's SET must not put into ``route.next`` (P-ABI-15); True for actors and x-pause."""
    return not is_crew(name) or name in HANDLER_ROUTABLE_CREW


def is_crew(name: str) -> bool:
    """True for reserved crew names (P-NAME-2): every name starting with ``x-``."""
    return name.startswith("x-")


def validate_actor_name(name: object, *, field: str = "actor") -> str:
    """Return ``name`` when it satisfies P-NAME-1, else raise :class:`NamingError` naming the field and value."""
    if not is_valid_actor_name(name):
        raise NamingError(
            f"{field}: invalid actor name {name!r}: use 1-40 lowercase letters, digits and '-', starting with a letter"
        )
    assert isinstance(name, str)
    return name


def validate_namespace(namespace: object, *, field: str = "namespace") -> str:
    """Return ``namespace`` when it satisfies P-NAME-3, else raise :class:`NamingError`."""
    if not isinstance(namespace, str) or NAMESPACE_RE.match(namespace) is None:
        raise NamingError(
            f"{field}: invalid namespace {namespace!r}: use lowercase letters, digits and '-', starting with a letter"
        )
    return namespace


#: P-WAIT-4: the name of an event a flow's ``wait_for`` waits for and a signal delivers.
_EVENT_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def is_event_name(name: str) -> bool:
    """Whether ``name`` may name an event (P-WAIT-4): 1 to 64 letters, digits, ``.``, ``_`` or ``-``, starting with a
    letter or digit."""
    return _EVENT_NAME.fullmatch(name) is not None


def validate_flow_name(name: object, *, field: str = "flow") -> str:
    """Return ``name`` when it satisfies P-NAME-6, else raise :class:`NamingError`."""
    if not isinstance(name, str) or FLOW_NAME_RE.match(name) is None:
        raise NamingError(
            f"{field}: invalid flow name {name!r}: use 1-64 lowercase letters, digits, '_' and '-', "
            "starting with a letter"
        )
    return name


def queue_name(namespace: str, actor: str) -> str:
    """The SQS queue of ``actor`` (P-NAME-4). Raises :class:`NamingError` when the DLQ name would not fit SQS."""
    name = f"asya-{namespace}-{actor}"
    _check_length(namespace, actor)
    return name


def dlq_name(namespace: str, actor: str) -> str:
    """The dead-letter queue of ``actor`` (P-NAME-4)."""
    _check_length(namespace, actor)
    return f"asya-{namespace}-{actor}{_DLQ_SUFFIX}"


def _check_length(namespace: str, actor: str) -> None:
    dlq = f"asya-{namespace}-{actor}{_DLQ_SUFFIX}"
    if len(dlq) > MAX_QUEUE_NAME:
        raise NamingError(
            f"actors.{actor}: queue name {dlq!r} is {len(dlq)} characters, over the SQS limit of {MAX_QUEUE_NAME}; "
            "shorten the namespace or the actor name"
        )


def table_name(namespace: str) -> str:
    """The DynamoDB task-store table (GW-DATA-2)."""
    return f"asya-{namespace}-tasks"


def bucket_name(namespace: str) -> str:
    """The storage bucket name used by the local mode. In AWS the bucket name is generated by CloudFormation (bucket
    names are global) and reaches the runtime through ``ASYA_BUCKET``."""
    return f"asya-{namespace}-storage"


def default_aggregator(actor: str) -> str:
    """The default fan-in aggregator name of ``actor`` (P-FANIN-1)."""
    return f"x-fanin-{actor}"


def entry_point(actor: str) -> EntryPoint:
    """The entry point serving ``actor``: its crew entry point, the aggregator's for a fan-in aggregator, else the
    sidecar."""
    if actor in CREW_ENTRY_POINTS:
        return CREW_ENTRY_POINTS[actor]
    return AGGREGATOR_ENTRY_POINT if is_aggregator(actor) else SIDECAR_ENTRY_POINT
