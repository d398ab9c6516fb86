"""Each function's policy is exactly what its role declares in ``asya_deploy.access`` (issue 24 item 3), asserted
statement by statement on the synthesized example mesh; the breakers issue 24 found, each as a literal template
assertion; and docs/deploy.md's matrix checked against the declaration.

Spec: GATEWAY GW-DATA-7 (bucket prefixes), GW-BACK-1 (the timer queue), GW-OPS-3 (mq-diagnostic), GW-RESUME-2;
PROTOCOL P-NAME-4, P-PAUSE-4, P-RESUME-3, P-RESUME-6.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from asya import naming, tableschema
from asya.manifest import Manifest
from asya_cdk.permissions import matrix_markdown
from asya_cdk.testing import SynthesizedMesh
from asya_deploy import access
from asya_deploy.access import Role
from tests.templates import function_ids

pytestmark = pytest.mark.infra

NS = "demo"
REPO = Path(__file__).resolve().parents[2]
_XRAY = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}


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


def _queue_pattern(pattern: str) -> dict[str, Any]:
    return {"Fn::Join": ["", ["arn:aws:sqs:us-east-1:", {"Ref": "AWS::AccountId"}, f":asya-{NS}-{pattern}"]]}


def _expected(synth: SynthesizedMesh, role: Role, consumed_queue: str | None) -> set[Grant]:
    """The permissions ``role``'s declared calls must produce, one (action, resource, condition) triple each. CDK
    merges statements that share resources or actions, so the template is compared permission by permission."""
    table = {"Fn::GetAtt": [_table_id(synth), "Arn"]}
    bucket_arn = {"Fn::GetAtt": [_bucket_id(synth), "Arn"]}
    out: set[Grant] = set()
    prefixes: list[str] = []
    for call in role.calls:
        resource = call.resource
        if isinstance(resource, access.Table):
            arns = [table]
        elif isinstance(resource, access.Index):
            arns = [{"Fn::Join": ["", [table, f"/index/{name}"]]} for name in resource.names]
        elif isinstance(resource, access.Objects):
            arns = [{"Fn::Join": ["", [bucket_arn, f"/{resource.pattern}"]]}]
        elif isinstance(resource, access.Queues):
            arns = [_queue_pattern(resource.pattern)]
        elif isinstance(resource, access.Unscoped):
            arns = ["*"]
        elif isinstance(resource, access.Listing):
            prefixes += [f"{p}*" for p in resource.prefixes]
            continue
        elif isinstance(resource, access.MeshKey):
            continue  # granted only with a customer-managed key (tests/infra/test_data_lifecycle.py)
        else:
            assert consumed_queue is not None, f"{role.name} declares {call.name} but consumes no queue"
            arns = [{"Fn::GetAtt": [consumed_queue, "Arn"]}]
        out |= {(action, _dump(arn), "") for action in call.actions for arn in arns}
    if prefixes:
        condition = {"StringLike": {"s3:prefix": list(dict.fromkeys(prefixes))}}
        out.add(("s3:ListBucket", _dump(bucket_arn), _dump(condition)))
    return out


def _actual(statements: list[dict[str, Any]]) -> set[Grant]:
    out: set[Grant] = set()
    for s in statements:
        assert s["Effect"] == "Allow"
        if _actions(s) <= _XRAY:
            continue
        condition = _dump(s["Condition"]) if "Condition" in s else ""
        out |= {(action, resource, condition) for action in _actions(s) for resource in _resources(s)}
    return out


def _role_grants(synth: SynthesizedMesh, function_name: str) -> set[Grant]:
    return _actual(_statements(synth, function_ids(synth)[function_name]))


@pytest.mark.parametrize(
    "name", ["normalize", "split", "x-fanin-chunk", naming.SINK, naming.SUMP, naming.PAUSE, naming.RESUME]
)
def test_actor_and_crew_roles_are_exactly_their_declared_calls(example_synth: SynthesizedMesh, name: str) -> None:
    """Each actor's policy is its role's declared calls (``asya_deploy.access.role_of``) and its own queue."""
    queue = _queue_ids(example_synth)[naming.queue_name(NS, name)]
    expected = _expected(example_synth, access.role_of(name), queue)
    assert _role_grants(example_synth, name) == expected


def _reporter_secret_read(synth: SynthesizedMesh) -> set[Grant]:
    """GW-EDGE-2 (R3): the gateway functions read the reporter keys' secret the construct creates."""
    (secret,) = synth.of_type("AWS::SecretsManager::Secret")
    return {
        (action, _dump({"Ref": secret}), "")
        for action in ("secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret")
    }


def test_gateway_role_is_exactly_its_declared_calls(example_synth: SynthesizedMesh) -> None:
    """GW-DATA-7: tasks/, payloads/, paused/; the listing indexes; send to the mesh's queues (creates and timers);
    GW-OPS-3: the metric read, which has no resource-level permissions; the reporter keys' secret."""
    expected = _expected(example_synth, access.GATEWAY, None) | _reporter_secret_read(example_synth)
    assert _role_grants(example_synth, "gateway") == expected


def test_stream_function_role_is_the_gateway_declaration(example_synth: SynthesizedMesh) -> None:
    """The stream function serves MCP and A2A, which create tasks: exactly the gateway role's declared calls."""
    statements = _statements(example_synth, function_ids(example_synth)["gateway-stream"])
    assert _actual(statements) == _expected(example_synth, access.GATEWAY, None) | _reporter_secret_read(example_synth)


def test_gw_back_1_backstop_role_consumes_the_timer_queue_and_touches_no_bucket(
    example_synth: SynthesizedMesh,
) -> None:
    timer = _queue_ids(example_synth)[naming.queue_name(NS, naming.DEADLINE)]
    function = function_ids(example_synth)["backstop"]
    statements = _statements(example_synth, function)
    assert _actual(statements) == _expected(example_synth, access.BACKSTOP, timer)
    assert "s3:" not in json.dumps(statements)


def test_every_deployed_function_has_a_declared_role(example_synth: SynthesizedMesh) -> None:
    """A deployed actor maps to its role: crew by name, ``x-fanin-*`` to the aggregator, the rest to ``actor``."""
    functions = function_ids(example_synth)
    roles = {access.role_of(name).name for name in functions if name not in ("gateway", "backstop")}
    assert roles == {"actor", "aggregator", naming.SINK, naming.SUMP, naming.PAUSE, naming.RESUME}


# --------------------------------------------------------------------------- the breakers of issue 24


def _allows(synth: SynthesizedMesh, name: str, action: str, object_pattern: str) -> bool:
    """Whether ``name``'s policy allows ``action`` on ``<bucket>/<object_pattern>`` (literal template form)."""
    arn = _dump({"Fn::Join": ["", [{"Fn::GetAtt": [_bucket_id(synth), "Arn"]}, f"/{object_pattern}"]]})
    return (action, arn, "") in _role_grants(synth, name)


def _listing_prefixes(synth: SynthesizedMesh, name: str) -> set[str]:
    return {
        prefix
        for action, _, condition in _role_grants(synth, name)
        if action == "s3:ListBucket"
        for prefix in json.loads(condition)["StringLike"]["s3:prefix"]
    }


def test_x_pause_may_store_its_paused_file_and_large_pause_metadata(example_synth: SynthesizedMesh) -> None:
    """P-PAUSE-4: x-pause puts paused/{id}.json (conditionally on a redelivery, P-PAUSE-5); pause metadata over 64
    KiB goes to tasks/{id}/pause_metadata.json (GW-DATA-6). Before issue 24 neither was granted."""
    assert _allows(example_synth, naming.PAUSE, "s3:PutObject", "paused/*.json")
    assert _allows(example_synth, naming.PAUSE, "s3:PutObject", "tasks/*/pause_metadata.json")


def test_x_resume_may_load_and_delete_the_paused_file_and_tell_a_missing_one(example_synth: SynthesizedMesh) -> None:
    """P-RESUME-3, P-RESUME-6: GetObject then DeleteObject of paused/{id}.json; a 403 on a missing file is told apart
    by listing its key, which the prefix-conditioned ListBucket allows."""
    assert _allows(example_synth, naming.RESUME, "s3:GetObject", "paused/*.json")
    assert _allows(example_synth, naming.RESUME, "s3:DeleteObject", "paused/*.json")
    assert "paused/*" in _listing_prefixes(example_synth, naming.RESUME)


def test_gateway_may_check_and_delete_the_paused_file(example_synth: SynthesizedMesh) -> None:
    """GW-RESUME-2: HeadObject (s3:GetObject) of paused/{id}.json; GW-CANCEL-1: its delete."""
    assert _allows(example_synth, "gateway", "s3:GetObject", "paused/*.json")
    assert _allows(example_synth, "gateway", "s3:DeleteObject", "paused/*.json")
    assert "paused/*" in _listing_prefixes(example_synth, "gateway")


def test_x_sink_may_store_a_result_and_error_details_over_64_kib(example_synth: SynthesizedMesh) -> None:
    """GW-DATA-6: a result over 64 KiB is tasks/{id}/result.json; before issue 24 x-sink could put only checkpoints."""
    assert _allows(example_synth, naming.SINK, "s3:PutObject", "tasks/*/result.json")
    assert _allows(example_synth, naming.SINK, "s3:PutObject", "tasks/*/error_details.json")


def test_backstop_may_rearm_a_timer_on_the_timer_queue(example_synth: SynthesizedMesh) -> None:
    """GW-BACK-1: a timer due before its deadline is sent again to asya-{ns}-x-deadline; before issue 24 the backstop
    could only consume."""
    grants = _role_grants(example_synth, "backstop")
    assert ("sqs:SendMessage", _dump(_queue_pattern(naming.DEADLINE)), "") in grants


def test_no_role_may_list_the_whole_bucket(example_synth: SynthesizedMesh) -> None:
    """The 403-vs-404 rule is handled by ``asya.missingkey``, never by an unconditioned ListBucket."""
    for name in function_ids(example_synth):
        for action, _, condition in _role_grants(example_synth, name):
            if action == "s3:ListBucket":
                assert condition, name


def test_no_role_may_scan_and_only_the_gateway_may_delete_items(example_synth: SynthesizedMesh) -> None:
    for role, function in function_ids(example_synth).items():
        actions = {a for s in _statements(example_synth, function) for a in _actions(s)}
        assert "dynamodb:Scan" not in actions, role
        assert ("dynamodb:DeleteItem" in actions) == role.startswith("gateway"), role
        assert not any(a.endswith("*") for a in actions), role


def test_indexes_split_between_listing_and_deadline_roles() -> None:
    """Every index of the table schema is read by exactly one role: the gateway lists, the backstop sweeps."""

    def indexes(role: Role) -> set[str]:
        return {n for c in role.calls if isinstance(c.resource, access.Index) for n in c.resource.names}

    names = {gsi.name for gsi in tableschema.GSIS}
    assert indexes(access.GATEWAY) | indexes(access.BACKSTOP) == names
    assert not indexes(access.GATEWAY) & indexes(access.BACKSTOP)
    assert indexes(access.BACKSTOP) <= access.DEADLINE_INDEXES
    assert all(not indexes(role) for role in access.ROLES.values() if role not in (access.GATEWAY, access.BACKSTOP))


def test_docs_deploy_matrix_is_the_declaration() -> None:
    """docs/deploy.md's matrix (between its markers) is exactly ``asya_cdk.permissions.matrix_markdown()``."""
    text = (REPO / "docs" / "deploy.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- access-matrix:begin -->\n(.*?)<!-- access-matrix:end -->", text, flags=re.DOTALL)
    assert found is not None, "docs/deploy.md lacks the access-matrix markers"
    assert found.group(1) == matrix_markdown(), "regenerate it from asya_cdk.permissions.matrix_markdown()"


def test_every_function_reaches_its_queues_by_account_without_get_queue_url(
    example_synth: SynthesizedMesh, example_manifest: Manifest
) -> None:
    """Contracts: every deployed function gets ASYA_ACCOUNT_ID = the stack's account (GW-CREATE-7)."""
    functions = function_ids(example_synth)
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
    functions = function_ids(example_synth)
    for actor in example_manifest.deployed_actors():
        assert example_synth.resources[functions[actor.name]]["Properties"]["RecursiveLoop"] == "Allow"
