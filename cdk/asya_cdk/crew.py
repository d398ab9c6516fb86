"""The crew actors every mesh deploys (x-sink, x-sump; docs/protocol.md section 13): their Lambda handlers.

Crew actors are deployed by the same :class:`asya_cdk.actor.Actor` construct as user actors; their code asset is the
``crew/`` directory (package ``asya_crew``) and they run on the same layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from asya import naming
from asya_cdk.errors import DeploymentError

__all__ = ["CREW_HANDLERS", "SIDECAR_HANDLER", "crew_handler"]

#: Lambda handler of every user actor: the sidecar layer's entry point, which loads ``ASYA_HANDLER``.
SIDECAR_HANDLER: Final = naming.SIDECAR_ENTRY_POINT.handler
CREW_HANDLERS: Final[Mapping[str, str]] = {name: entry.handler for name, entry in naming.CREW_ENTRY_POINTS.items()}


def crew_handler(name: str) -> str:
    """The Lambda handler of crew actor ``name``; every fan-in aggregator runs ``asya_crew.aggregator``."""
    if naming.is_aggregator(name) and name not in CREW_HANDLERS:
        return naming.AGGREGATOR_ENTRY_POINT.handler
    try:
        return CREW_HANDLERS[name]
    except KeyError:
        raise DeploymentError(
            f"crew actor {name!r} has no Lambda handler in this CDK app; deployable crew: {sorted(CREW_HANDLERS)}"
        ) from None
