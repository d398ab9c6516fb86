"""The least-privilege matrix (issue 19 item 5, ``asya_cdk.permissions``, docs/deploy.md) asserted statement by
statement on the synthesized example mesh, role by role: nothing more than the matrix, and all of it.

Spec: GATEWAY GW-DATA-7 (bucket prefixes), GW-BACK-1 (the timer queue), GW-OPS-3 (mq-diagnostic); PROTOCOL P-NAME-4.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from asya import naming, tableschema
from asya.manifest import Manifest
from asya_cdk.permissions import ACTOR, BACKSTOP, DEADLINE_INDEXES, GATEWAY, SINK, SUMP, Access
from asya_cdk.testing import SynthesizedMesh

pytestmark = pytest.mark.infra

NS = "demo"
_XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
#: What CDK's SQS event source adds for the consumed queue.
_CONSUME = {"sqs:ReceiveMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueUrl", "sqs:DeleteMessage"}


def _ref_id(value: Any) -> str:
    return str(value["Ref"]) if "Ref" in value else str(value["Fn::GetAtt"][0])


def _actions(statement: dict[str, Any]) -> set[str]:
    action = statement["Action"]
    return set(action) if isinstance(action, list) else {action}


def _resources(statement: dict[str, Any]) -> list[str]:
    value = statement["Resource"]
    return [_dump(r) for r in (value if isinstance(value, list) else [value])]


def _statements(synth: SynthesizedMesh, function_id: str) -> list[dict[str, Any]]:
    role = _ref_id(synth.resources[function_id]["Properties"]["Role"])
    return [
        statement
        for policy in synth.of_type("AWS::IAM::Policy").values()
        if role in {_ref_id(r) for r in policy["Properties"]["Roles"]}
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


def _function_ids(synth: SynthesizedMesh) -> dict[str, str]:
    """Role name (actor name, ``gateway``, ``backstop``) -> the function's logical id."""
    out: dict[str, str] = {}
    for key, res in synth.of_type("AWS::Lambda::Function").items():
        props = res["Properties"]
        env = props.get("Environment", {}).get("Variables", {})
        if "ASYA_ACTOR" in env:
            out[env["ASYA_ACTOR"]] = key
        elif props["Handler"] == "run.sh":
            # the main function, and the stream function sized for waiting (GW-SSE (R3))
            out["gateway-stream" if props["Description"].endswith(", streams") else "gateway"] = key
        elif env.get("POWERTOOLS_SERVICE_NAME") == "backstop":
            out["backstop"] = key
    return out


def _queue_ids(synth: SynthesizedMesh) -> dict[str, str]:
    return {res["Properties"]["QueueName"]: key for key, res in synth.of_type("AWS::SQS::Queue").items()}


def _bucket_id(synth: SynthesizedMesh) -> str:
    (key,) = synth.of_type("AWS::S3::Bucket")
    return key


def _table_id(synth: SynthesizedMesh) -> str:
    (key,) = synth.of_type("AWS::DynamoDB::Table")
    return key


Grant = tuple[str, str, str]  # (action, resource, condition), each rendered as JSON where structured


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _expected(synth: SynthesizedMesh, access: Access, consumed_queue: str | None) -> set[Grant]:
    """The permissions ``access`` must produce, one (action, resource, condition) triple each. CDK merges statements
    that share resources or actions, so the template is compared permission by permission."""
    table = {"Fn::GetAtt": [_table_id(synth), "Arn"]}
    bucket_arn = {"Fn::GetAtt": [_bucket_id(synth), "Arn"]}
    out: set[Grant] = {(action, _dump(table), "") for action in access.table_actions}
    out |= {
        ("dynamodb:Query", _dump({"Fn::Join": ["", [table, f"/index/{name}"]]}), "") for name in access.index_names()
    }
    for action, prefixes in (
        ("s3:GetObject", access.s3_read),
        ("s3:PutObject", access.s3_write),
        ("s3:DeleteObject", access.s3_delete),
    ):
        out |= {(action, _dump({"Fn::Join": ["", [bucket_arn, f"/{prefix}*"]]}), "") for prefix in prefixes}
    if access.s3_read:
        condition = {"StringLike": {"s3:prefix": [f"{prefix}*" for prefix in access.s3_read]}}
        out.add(("s3:ListBucket", _dump(bucket_arn), _dump(condition)))
    if access.send_to_mesh:
        pattern = {"Fn::Join": ["", ["arn:aws:sqs:us-east-1:", {"Ref": "AWS::AccountId"}, f":asya-{NS}-*"]]}
        sends = ("sqs:SendMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl")
        out |= {(action, _dump(pattern), "") for action in sends}
    if consumed_queue is not None:
        queue = _dump({"Fn::GetAtt": [consumed_queue, "Arn"]})
        out |= {(action, queue, "") for action in _CONSUME | {"sqs:GetQueueAttributes"}}
    return out


def _actual(statements: list[dict[str, Any]]) -> set[Grant]:
    out: set[Grant] = set()
    for s in statements:
        assert s["Effect"] == "Allow"
        if _actions(s) <= _XRAY or s["Action"] == "cloudwatch:GetMetricStatistics":
            continue
        condition = _dump(s["Condition"]) if "Condition" in s else ""
        out |= {(action, resource, condition) for action in _actions(s) for resource in _resources(s)}
    return out


@pytest.mark.parametrize(
    ("role", "access"),
    [("normalize", ACTOR), ("split", ACTOR), (naming.SINK, SINK), (naming.SUMP, SUMP)],
)
def test_actor_and_crew_roles_are_exactly_the_matrix(example_synth: SynthesizedMesh, role: str, access: Access) -> None:
    """Each actor role: its table actions, its prefixes, send to the mesh, consume its own queue; nothing else."""
    function = _function_ids(example_synth)[role]
    queue = _queue_ids(example_synth)[naming.queue_name(NS, role)]
    assert _actual(_statements(example_synth, function)) == _expected(example_synth, access, queue)


def test_gateway_role_is_exactly_the_matrix(example_synth: SynthesizedMesh) -> None:
    """GW-DATA-7: tasks/ and payloads/; the listing indexes; send to the mesh's queues (creates and timers); GW-OPS-3:
    the metric read, which has no resource-level permissions."""
    function = _function_ids(example_synth)["gateway"]
    statements = _statements(example_synth, function)
    metric = [s for s in statements if s["Action"] == "cloudwatch:GetMetricStatistics"]
    assert [s["Resource"] for s in metric] == ["*"]
    assert _actual(statements) == _expected(example_synth, GATEWAY, None)


def test_stream_function_role_is_the_gateway_matrix_without_the_metric_read(example_synth: SynthesizedMesh) -> None:
    """The stream function serves MCP and A2A, which create tasks: the gateway's grants, but not GW-OPS-3's metric
    read (the diagnostic route stays on the main function)."""
    statements = _statements(example_synth, _function_ids(example_synth)["gateway-stream"])
    assert not [s for s in statements if s["Action"] == "cloudwatch:GetMetricStatistics"]
    assert _actual(statements) == _expected(example_synth, GATEWAY, None)


def test_gw_back_1_backstop_role_consumes_the_timer_queue_and_touches_no_bucket(
    example_synth: SynthesizedMesh,
) -> None:
    function = _function_ids(example_synth)["backstop"]
    timer = _queue_ids(example_synth)[naming.queue_name(NS, naming.DEADLINE)]
    statements = _statements(example_synth, function)
    assert _actual(statements) == _expected(example_synth, BACKSTOP, timer)
    assert "s3:" not in json.dumps(statements)


def test_no_role_may_scan_and_only_the_gateway_may_delete_items(example_synth: SynthesizedMesh) -> None:
    for role, function in _function_ids(example_synth).items():
        actions = {a for s in _statements(example_synth, function) for a in _actions(s)}
        assert "dynamodb:Scan" not in actions, role
        assert ("dynamodb:DeleteItem" in actions) == role.startswith("gateway"), role
        assert not any(a.endswith("*") for a in actions), role


def test_indexes_split_between_listing_and_deadline_roles() -> None:
    """Every index of the table schema is read by exactly one role: the gateway lists, the backstop sweeps."""
    names = {gsi.name for gsi in tableschema.GSIS}
    assert set(GATEWAY.index_names()) | set(BACKSTOP.index_names()) == names
    assert not set(GATEWAY.index_names()) & set(BACKSTOP.index_names())
    assert set(BACKSTOP.index_names()) <= DEADLINE_INDEXES


def test_every_function_reaches_its_queues_by_account_without_get_queue_url(
    example_synth: SynthesizedMesh, example_manifest: Manifest
) -> None:
    """Contracts: every deployed function gets ASYA_ACCOUNT_ID = the stack's account (GW-CREATE-7)."""
    functions = _function_ids(example_synth)
    assert set(functions) == {a.name for a in example_manifest.deployed_actors()} | {
        "gateway",
        "gateway-stream",
        "backstop",
    }
    for function in functions.values():
        env = example_synth.resources[function]["Properties"]["Environment"]["Variables"]
        assert env["ASYA_ACCOUNT_ID"] == {"Ref": "AWS::AccountId"}


def test_actor_functions_allow_recursive_loops(example_synth: SynthesizedMesh, example_manifest: Manifest) -> None:
    """Issue 19 item 4: the layer re-sends to its own queue by design; Lambda's loop detection would drop it."""
    functions = _function_ids(example_synth)
    for actor in example_manifest.deployed_actors():
        assert example_synth.resources[functions[actor.name]]["Properties"]["RecursiveLoop"] == "Allow"
