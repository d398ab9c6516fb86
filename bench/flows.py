"""Cost of a flow written as Python (P-FLOW-2..8): hops, Lambda invocations and DynamoDB write units per
task, measured on the local mesh, against the same flow built from upstream-style router actors; and the wall time of
a map of 10 slices run at the same time (``bench.maps``).

One task of ``flows/bench_cost.py`` (a branch, a loop of 3 iterations, a 3-way fan-out) on a fresh ``LocalMesh``
with the example's actors; the pollers are stopped and each actor is driven with ``poll_once`` in route order, its
calls metered as its component (``bench.meter``, exact write units). Continuations record every instruction they run
(``asya.flows.interp.advance``'s ``trace``), so the upstream figures come from the same run: upstream Asya compiles
each control node (an ``if`` or ``while`` test, a mutation, a fan-out) to a router actor, so each one it executed is
one more hop, one more invocation (a single task: one record per batch) and the write units of one intermediate hop
(measured here on the flow's own actor hops).
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Final

import httpx
import yaml

from asya import naming
from asya.flows import aggregator_name
from asya.flows import mesh as flow_mesh
from asya.flows.interp import advance
from asya.manifest import Manifest, parse_manifest
from asya.sidecar import ActorRuntime
from asya.store import TaskStore
from bench import maps
from bench.meshes import MANIFEST_PATH, running_mesh, statuses, stop_pollers
from bench.meter import WRITE_OPERATIONS, Meter
from bench.traffic import POLLER_OPERATIONS

__all__ = ["FLOW", "run"]

FLOW: Final = "bench-flow"
_AGGREGATOR: Final = aggregator_name(FLOW)
_ACTORS: Final = ("normalize", "analyze", "summarize-chunk")
_DRIVE: Final = (*_ACTORS, _AGGREGATOR, naming.SINK, naming.SUMP)
_ROUTER_OPS: Final = frozenset({"test", "set", "fanout", "map"})
_MAX_ROUNDS: Final = 50


def _manifest() -> Manifest:
    data: dict[str, Any] = copy.deepcopy(yaml.safe_load(MANIFEST_PATH.read_text(encoding="utf-8")))
    data["flows"][FLOW] = {"source": "flows/bench_cost.py", "timeout": 600}
    return parse_manifest(data, base_dir=MANIFEST_PATH.parent, source=f"{MANIFEST_PATH.name} (flow bench variant)")


def _drive(mesh: Any, meter: Meter) -> None:
    for _ in range(_MAX_ROUNDS):
        delivered = 0
        for actor in _DRIVE:
            with meter.component(actor):
                while (received := mesh.esms[actor].poll_once(wait_seconds=0)) > 0:
                    delivered += received
        if delivered == 0:
            return
    raise RuntimeError(f"flow benchmark: queues still not empty after {_MAX_ROUNDS} rounds")


def _counting_hand_back(counter: list[int]) -> Any:
    """``ActorRuntime._hand_back`` that adds the records it handed back (P-MAP-3) to ``counter[0]``."""
    original = ActorRuntime._hand_back

    def counted(self: ActorRuntime, records: Any, items: Any) -> frozenset[str]:
        handed = original(self, records, items)
        counter[0] += len(handed)
        return handed

    return counted


def run(*, quick: bool = False) -> dict[str, Any]:
    """One task (``quick`` changes nothing: the figures are counts); prints the comparison."""
    del quick
    from asya_local.moto_server import make_clients

    manifest = _manifest()
    program = manifest.flows[FLOW].program
    assert program is not None
    trace: list[int] = []
    namespace = vars(flow_mesh)  # the continuations call asya.flows.mesh's advance: count what they run
    original = namespace["advance"]
    namespace["advance"] = functools.partial(advance, trace=trace)
    handed: list[int] = [0]  # the records the fan-out's actor handed back to its queue: no hops (P-MAP-3)
    hand_back = ActorRuntime._hand_back
    ActorRuntime._hand_back = _counting_hand_back(handed)  # type: ignore[method-assign]
    try:
        with running_mesh(manifest) as mesh, httpx.Client(timeout=60) as http:
            stop_pollers(mesh)
            unmetered = make_clients(mesh.clients.endpoint_url)
            shadow = unmetered.dynamodb
            meter = Meter(shadow_dynamodb=shadow)
            for client in (mesh.clients.sqs, mesh.clients.dynamodb, mesh.clients.s3):
                meter.attach(client)
            parts = [{"chunk": i, "text": f"Part {i} of the text."} for i in range(3)]
            response = http.post(
                f"{mesh.url}/api/v1/mesh/",
                params={"flow": FLOW},
                json={"payload": {"text": "A good text.", "parts": parts}},
            )
            if response.status_code != 201:
                raise RuntimeError(f"creating a {FLOW} task failed: {response.status_code} {response.text}")
            task_id = str(response.json()["id"])
            _drive(mesh, meter)
            # the task's result may be in its checkpoint object: read from moto's S3, never a default client
            store = TaskStore(
                table=mesh.resources.table, bucket=mesh.resources.bucket, dynamodb=shadow, s3=unmetered.s3
            )
            status = statuses(store, [task_id])[task_id]
            stats = {actor: mesh.esms[actor].stats for actor in _DRIVE}
    finally:
        namespace["advance"] = original
        ActorRuntime._hand_back = hand_back  # type: ignore[method-assign]
    handed_back = handed[0]
    if status != "succeeded":
        raise RuntimeError(f"flow benchmark: the task ended {status}")
    usage = meter.snapshot()
    wru = sum(v.wru for (_, _, op), v in usage.items() if op in WRITE_OPERATIONS)
    hop_wru = sum(v.wru for (c, _, op), v in usage.items() if c in _ACTORS and op in WRITE_OPERATIONS)
    requests = sum(v.requests for (_, _, op), v in usage.items() if op not in POLLER_OPERATIONS)
    # a record handed back to its queue (P-MAP-3) ran nothing: no hop, though its invocation counts
    hops = sum(stats[a].records for a in (*_ACTORS, _AGGREGATOR)) - handed_back
    invocations = sum(s.invocations for s in stats.values())
    actor_hops = sum(stats[a].records for a in _ACTORS) - handed_back
    routers = sum(1 for pc in trace if program.code[pc]["op"] in _ROUTER_OPS)
    per_hop_wru = hop_wru / actor_hops if actor_hops else 0.0
    result = {
        "hops": hops,
        "invocations": invocations,
        "wru": wru,
        "requests": requests,
        "handed_back": handed_back,
        "control_nodes_run": routers,
        "instructions_run": len(trace),
        "wru_per_actor_hop": per_hop_wru,
        "upstream": {
            "hops": hops + routers,
            "invocations": invocations + routers,
            "wru": wru + routers * per_hop_wru,
        },
        "extra_hops": 0,
    }
    print(
        f"bench: flow {FLOW}: {hops} hops, {invocations} invocations, {wru:.0f} write units per task; "
        f"upstream-style routers: {hops + routers} hops, {invocations + routers} invocations, "
        f"{wru + routers * per_hop_wru:.0f} write units ({routers} control nodes run inside the layer)"
    )
    result["parallel_map"] = maps.run()  # the wall time of a map whose slices run at the same time
    return result
