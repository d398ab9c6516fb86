"""The example mesh (``asya.yaml``) synthesized: names, sizing, security settings, the gateway and cdk-nag.

Spec: PROTOCOL P-NAME-4, P-MAN-4, P-ACK-1, P-ACK-6, P-LARGE-6; GATEWAY GW-GEN-1, GW-AUTH-2, GW-AUTH-3, GW-DATA-2,
GW-DATA-7, GW-BACK-1.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Match

from asya import naming, tableschema
from asya.manifest import Manifest, parse_manifest
from asya_cdk import CREW_HANDLERS, SIDECAR_HANDLER, crew_handler, queue_output_key
from asya_cdk.testing import SynthesizedMesh, build_mesh_app

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]

NS = "demo"
FOURTEEN_DAYS = 14 * 24 * 3600
SEVEN_DAYS = 7 * 24 * 3600


def _ref_id(value: Any) -> str:
    """Logical id behind ``{"Ref": id}`` or ``{"Fn::GetAtt": [id, attr]}``."""
    if "Ref" in value:
        return str(value["Ref"])
    return str(value["Fn::GetAtt"][0])


def _queues_by_name(synth: SynthesizedMesh) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        res["Properties"]["QueueName"]: (key, res["Properties"])
        for key, res in synth.of_type("AWS::SQS::Queue").items()
    }


def _function_of_queue(synth: SynthesizedMesh) -> dict[str, dict[str, Any]]:
    """Queue logical id -> properties of the function its event source mapping invokes."""
    functions = synth.of_type("AWS::Lambda::Function")
    out = {}
    for esm in synth.of_type("AWS::Lambda::EventSourceMapping").values():
        props = esm["Properties"]
        out[_ref_id(props["EventSourceArn"])] = functions[_ref_id(props["FunctionName"])]["Properties"]
    return out


def _actor_names(manifest: Manifest) -> list[str]:
    return [actor.name for actor in manifest.deployed_actors()]


def test_p_name_4_every_deployed_actor_has_queue_and_dlq(
    example_synth: SynthesizedMesh, example_manifest: Manifest
) -> None:
    names = _actor_names(example_manifest)
    assert names == [
        "normalize",
        "analyze",
        "summarize",
        "split",
        "chunk",
        "summarize-chunk",
        "digest",
        "request-review",
        "publish",
        naming.SINK,
        naming.SUMP,
        naming.PAUSE,
        naming.RESUME,
        "x-fanin-chunk",  # the aggregator chunk's fan_in declaration generates (P-FANIN-1)
        "x-fanin-flow-triage",  # the aggregator of the compiled triage flow's fan-out (P-FLOW-8)
    ]
    names.append(naming.DEADLINE)  # the backstop's timer queue (GW-BACK-1)
    expected = {f"asya-{NS}-{name}" for name in names} | {f"asya-{NS}-{name}-dlq" for name in names}
    assert set(_queues_by_name(example_synth)) == expected


def test_p_ack_6_redrive_to_own_dlq_with_max_receive_count(
    example_synth: SynthesizedMesh, example_manifest: Manifest
) -> None:
    queues = _queues_by_name(example_synth)
    for actor in example_manifest.deployed_actors():
        _, props = queues[naming.queue_name(NS, actor.name)]
        dlq_id, dlq_props = queues[naming.dlq_name(NS, actor.name)]
        assert props["RedrivePolicy"]["maxReceiveCount"] == actor.max_receive_count == 5
        assert _ref_id(props["RedrivePolicy"]["deadLetterTargetArn"]) == dlq_id
        # SQS keeps the original enqueue time on redrive: the DLQ must keep messages longer than its source
        assert props["MessageRetentionPeriod"] == SEVEN_DAYS
        assert dlq_props["MessageRetentionPeriod"] == FOURTEEN_DAYS
        assert "RedrivePolicy" not in dlq_props


def test_p_man_4_visibility_is_six_times_lambda_timeout(
    example_synth: SynthesizedMesh, example_manifest: Manifest
) -> None:
    """P-MAN-4: Lambda timeout = min(900, batch_size * timeout + 10); visibility = 6 x Lambda timeout."""
    queues = _queues_by_name(example_synth)
    by_queue = _function_of_queue(example_synth)
    actors = {f"asya-{NS}-{actor.name}" for actor in example_manifest.deployed_actors()}
    for name in actors:
        queue_id, props = queues[name]
        function = by_queue[queue_id]
        # batch_size 10 x 30 s + 10 s slack, for user actors (defaults) and crew (CREW_SETTINGS) alike.
        assert function["Timeout"] == 310
        assert props["VisibilityTimeout"] == function["Timeout"] + 60 == 370


def test_queues_are_encrypted_and_tls_only(example_synth: SynthesizedMesh) -> None:
    queues = example_synth.of_type("AWS::SQS::Queue")
    assert len(queues) == 32  # 15 actors (2 aggregators, x-pause, x-resume included) and the timer queue, with DLQs
    # SSE-SQS: the AWS-owned key, no KMS charge (no customer-managed key in the example manifest)
    assert all(res["Properties"]["SqsManagedSseEnabled"] is True for res in queues.values())
    assert not any("KmsMasterKeyId" in res["Properties"] for res in queues.values())
    protected: set[str] = set()
    for policy in example_synth.of_type("AWS::SQS::QueuePolicy").values():
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        denies_plain_http = any(
            s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}} for s in statements
        )
        if denies_plain_http:
            protected.update(_ref_id(q) for q in policy["Properties"]["Queues"])
    assert protected == set(queues)


def test_p_ack_1_event_source_mappings_report_batch_item_failures(example_synth: SynthesizedMesh) -> None:
    mappings = example_synth.of_type("AWS::Lambda::EventSourceMapping")
    assert len(mappings) == 16  # fifteen actors and the backstop's timer queue
    for esm in mappings.values():
        props = esm["Properties"]
        assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert props["BatchSize"] == 10
        if props["FunctionName"]["Ref"].startswith("Backstop"):  # capped below its reservation (GW-BACK-7)
            assert props["ScalingConfig"] == {"MaximumConcurrency": 2}
        else:
            assert "ScalingConfig" not in props  # no max_concurrency in the example


def test_p_ckpt_1_crew_and_timers_consume_without_batching_window(example_synth: SynthesizedMesh) -> None:
    """P-CKPT-1 (R2): x-sink and x-sump take batches of 10 with no batching window; so do the deadline timers."""
    queues = {key: name for name, (key, _) in _queues_by_name(example_synth).items()}
    windows = {
        queues[_ref_id(esm["Properties"]["EventSourceArn"])]: esm["Properties"].get("MaximumBatchingWindowInSeconds")
        for esm in example_synth.of_type("AWS::Lambda::EventSourceMapping").values()
    }
    for crew in (naming.SINK, naming.SUMP, naming.DEADLINE):
        assert windows[naming.queue_name(NS, crew)] == 0
    assert windows[naming.queue_name(NS, "normalize")] is None


def _layer_ids(synth: SynthesizedMesh) -> dict[str, str]:
    """Layer description prefix -> logical id."""
    out = {}
    for key, res in synth.of_type("AWS::Lambda::LayerVersion").items():
        description = res["Properties"]["Description"]
        out[description.split(" (")[0].split(":")[0]] = key
    return out


def test_actor_functions_runtime_arch_handler_env_layers(
    example_synth: SynthesizedMesh, example_manifest: Manifest
) -> None:
    queues = _queues_by_name(example_synth)
    by_queue = _function_of_queue(example_synth)
    layers = _layer_ids(example_synth)
    assert set(layers) == {"asya sidecar library", "asya actor dependencies", "asya gateway dependencies"}
    for actor in example_manifest.deployed_actors():
        queue_id, _ = queues[naming.queue_name(NS, actor.name)]
        fn = by_queue[queue_id]
        assert fn["Architectures"] == ["arm64"]
        assert fn["Runtime"] == "python3.14"
        assert fn["MemorySize"] == 256
        assert "ReservedConcurrentExecutions" not in fn
        assert {_ref_id(layer) for layer in fn["Layers"]} == {
            layers["asya sidecar library"],
            layers["asya actor dependencies"],
        }
        env = fn["Environment"]["Variables"]
        assert env["ASYA_NAMESPACE"] == NS
        assert env["ASYA_ACTOR"] == actor.name
        assert env["ASYA_ACTOR_TIMEOUT"] == "30"
        assert env["ASYA_OFFLOAD_THRESHOLD_KB"] == "240"
        assert env["POWERTOOLS_SERVICE_NAME"] == actor.name  # issue 26 item 7: logs carry the actor
        assert env["POWERTOOLS_METRICS_NAMESPACE"] == "Asya"
        assert _ref_id(env["ASYA_TABLE"]) in example_synth.of_type("AWS::DynamoDB::Table")
        assert _ref_id(env["ASYA_BUCKET"]) in example_synth.of_type("AWS::S3::Bucket")
        assert "ASYA_CODE_DIR" not in env
        if actor.crew:
            assert fn["Handler"] == crew_handler(actor.name)
            assert "ASYA_HANDLER" not in env
        else:
            assert fn["Handler"] == SIDECAR_HANDLER == "asya.sidecar.lambda_handler"
            assert env["ASYA_HANDLER"] == actor.handler
        assert ("ASYA_SINK_HOOKS" in env) == (actor.name == naming.SINK)
        assert ("ASYA_FAN_IN" in env) == (actor.name == "chunk")  # P-FANIN-1: the fan-in actor's declaration


def test_crew_handlers() -> None:
    assert CREW_HANDLERS == {
        "x-sink": "asya_crew.sink.lambda_handler",
        "x-sump": "asya_crew.sump.lambda_handler",
        "x-pause": "asya_crew.pause.lambda_handler",
        "x-resume": "asya_crew.resume.lambda_handler",
    }
    # every fan-in aggregator runs one crew entry point (P-FANIN-1, P-AGG-1)
    assert crew_handler("x-fanin-chunk") == crew_handler("x-merge") == "asya_crew.aggregator.lambda_handler"


def test_functions_log_to_groups_with_retention(example_synth: SynthesizedMesh) -> None:
    groups = example_synth.of_type("AWS::Logs::LogGroup")
    for key, res in example_synth.of_type("AWS::Lambda::Function").items():
        group = _ref_id(res["Properties"]["LoggingConfig"]["LogGroup"])
        assert groups[group]["Properties"]["RetentionInDays"] == 30, key


def test_gw_data_2_task_table(example_synth: SynthesizedMesh) -> None:
    tables = example_synth.of_type("AWS::DynamoDB::Table")
    assert len(tables) == 1
    (table,) = tables.values()
    props = table["Properties"]
    assert table["DeletionPolicy"] == table["UpdateReplacePolicy"] == "Retain"
    assert props["TableName"] == f"asya-{NS}-tasks"
    assert props["KeySchema"] == [
        {"AttributeName": "pk", "KeyType": "HASH"},
        {"AttributeName": "sk", "KeyType": "RANGE"},
    ]
    assert props["BillingMode"] == "PAY_PER_REQUEST"
    assert props["TimeToLiveSpecification"] == {"AttributeName": "ttl", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    # SSEEnabled false is DynamoDB's AWS-owned key: encrypted at rest, no KMS charge (issue 19 item 6)
    assert props["SSESpecification"] == {"SSEEnabled": False}
    keys = {"pk", "sk"} | {key for gsi in tableschema.GSIS for key in (gsi.partition_key, gsi.sort_key)}
    assert {a["AttributeName"]: a["AttributeType"] for a in props["AttributeDefinitions"]} == dict.fromkeys(keys, "S")
    gsis = {g["IndexName"]: g for g in props["GlobalSecondaryIndexes"]}
    assert set(gsis) == {gsi.name for gsi in tableschema.GSIS}
    for gsi in tableschema.GSIS:
        assert gsis[gsi.name]["KeySchema"] == [
            {"AttributeName": gsi.partition_key, "KeyType": "HASH"},
            {"AttributeName": gsi.sort_key, "KeyType": "RANGE"},
        ]
        assert gsis[gsi.name]["Projection"] == gsi.boto3_projection()


def test_gw_data_8_every_index_projects_keys_only(example_synth: SynthesizedMesh) -> None:
    """Issue 15 item 5 (R2): indexes project keys only (by_created, by_outcome, long_deadlines)."""
    (table,) = example_synth.of_type("AWS::DynamoDB::Table").values()
    indexes = table["Properties"]["GlobalSecondaryIndexes"]
    assert indexes
    assert {g["IndexName"]: g["Projection"] for g in indexes} == {
        name: {"ProjectionType": "KEYS_ONLY"} for name in ("by_created", "by_outcome", "long_deadlines")
    }


def test_p_ack_6_every_dlq_has_a_depth_alarm(example_synth: SynthesizedMesh) -> None:
    queues = _queues_by_name(example_synth)
    dlq_ids = {key for name, (key, _) in queues.items() if name.endswith("-dlq")}
    alarmed = set()
    for alarm in example_synth.of_type("AWS::CloudWatch::Alarm").values():
        props = alarm["Properties"]
        if not any(isinstance(d["Value"], dict) and _ref_id(d["Value"]) in dlq_ids for d in props["Dimensions"]):
            continue  # the mesh-wide alarms (tests/infra/test_alarms.py)
        assert props["MetricName"] == "ApproximateNumberOfMessagesVisible"
        assert props["Namespace"] == "AWS/SQS"
        assert props["ComparisonOperator"] == "GreaterThanThreshold"
        assert props["Threshold"] == 0
        (dimension,) = props["Dimensions"]
        assert dimension["Name"] == "QueueName"
        alarmed.add(_ref_id(dimension["Value"]))
    assert alarmed == dlq_ids


def _policy_statements_of_function(synth: SynthesizedMesh, function: dict[str, Any]) -> list[dict[str, Any]]:
    role = _ref_id(function["Properties"]["Role"])
    statements: list[dict[str, Any]] = []
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if role in {_ref_id(r) for r in policy["Properties"]["Roles"]}:
            statements.extend(policy["Properties"]["PolicyDocument"]["Statement"])
    return statements


def _resources(statement: dict[str, Any]) -> list[Any]:
    value = statement["Resource"]
    return value if isinstance(value, list) else [value]


def test_gw_gen_1_every_gateway_method_streams(example_synth: SynthesizedMesh) -> None:
    """GW-GEN-1: the SSE route (served by ``/{proxy+}``) and every other method use response transfer mode STREAM
    with the streaming invocation URI (the Lambda Web Adapter answers in the streaming format only)."""
    methods = example_synth.of_type("AWS::ApiGateway::Method")
    assert methods
    for key, res in methods.items():
        integration = res["Properties"]["Integration"]
        assert integration["Type"] == "AWS_PROXY", key
        assert integration["ResponseTransferMode"] == "STREAM", key
        assert integration["TimeoutInMillis"] == 900_000, key
        uri = json.dumps(integration["Uri"])
        assert "lambda:path/2021-11-15/functions/" in uri, key
        assert "/response-streaming-invocations" in uri, key


def _resource_paths(synth: SynthesizedMesh) -> dict[str, str]:
    """Logical id of each API resource -> full path."""
    resources = synth.of_type("AWS::ApiGateway::Resource")
    rest_api = next(iter(synth.of_type("AWS::ApiGateway::RestApi")))

    def path_of(key: str) -> str:
        props = resources[key]["Properties"]
        parent = props["ParentId"]
        prefix = "" if "Fn::GetAtt" in parent and parent["Fn::GetAtt"][0] == rest_api else path_of(_ref_id(parent))
        return f"{prefix}/{props['PathPart']}"

    return {key: path_of(key) for key in resources}


def _methods_by_route(synth: SynthesizedMesh) -> dict[tuple[str, str], str]:
    paths = _resource_paths(synth)
    routes = {}
    for res in synth.of_type("AWS::ApiGateway::Method").values():
        props = res["Properties"]
        resource = props["ResourceId"]
        path = "/" if "Fn::GetAtt" in resource else paths[_ref_id(resource)]
        routes[(props["HttpMethod"], path)] = props["AuthorizationType"]
    return routes


def test_gw_auth_3_iam_on_every_non_public_route(example_synth: SynthesizedMesh) -> None:
    """GW-AUTH-2, GW-AUTH-3: AWS_IAM everywhere except GET on the public routes."""
    assert _methods_by_route(example_synth) == {
        ("ANY", "/"): "AWS_IAM",
        ("ANY", "/{proxy+}"): "AWS_IAM",
        ("GET", "/health"): "NONE",
        ("ANY", "/health"): "AWS_IAM",
        ("GET", "/openapi.json"): "NONE",
        ("ANY", "/openapi.json"): "AWS_IAM",
        ("GET", "/.well-known/agent.json"): "NONE",
        ("ANY", "/.well-known/agent.json"): "AWS_IAM",
        ("GET", "/.well-known/agent-card.json"): "NONE",
        ("ANY", "/.well-known/agent-card.json"): "AWS_IAM",
        ("ANY", "/mcp"): "AWS_IAM",
        ("ANY", "/a2a"): "AWS_IAM",
        # the stream routes' own resources (GW-SSE (R3)), and the resources on the way to them
        ("GET", "/api/v1/mesh/{task_id}/events"): "AWS_IAM",
        ("ANY", "/api/v1/mesh/{task_id}/events"): "AWS_IAM",
        ("GET", "/api/v1/mesh/events"): "AWS_IAM",
        ("ANY", "/api/v1/mesh/events"): "AWS_IAM",
        ("ANY", "/api/v1/mesh/{task_id}"): "AWS_IAM",
        ("ANY", "/api/v1/mesh"): "AWS_IAM",
        ("ANY", "/api/v1"): "AWS_IAM",
        ("ANY", "/api"): "AWS_IAM",
    }


def test_rest_api_is_regional_with_logged_throttled_stage(example_synth: SynthesizedMesh) -> None:
    example_synth.template.has_resource_properties(
        "AWS::ApiGateway::RestApi", {"EndpointConfiguration": {"Types": ["REGIONAL"]}}
    )
    example_synth.template.has_resource_properties(
        "AWS::ApiGateway::Stage",
        {
            "AccessLogSetting": {"DestinationArn": Match.any_value(), "Format": Match.string_like_regexp("requestId")},
            "MethodSettings": [
                Match.object_like({"LoggingLevel": "ERROR", "ThrottlingRateLimit": 100, "ThrottlingBurstLimit": 200})
            ],
        },
    )


def _gateway_function(synth: SynthesizedMesh) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [
        res["Properties"]
        for res in synth.of_type("AWS::Lambda::Function").values()
        if res["Properties"]["Handler"] == "run.sh" and not res["Properties"]["Description"].endswith(", streams")
    ]
    (fn,) = matches
    return fn


def test_gateway_function_runs_the_web_adapter(example_synth: SynthesizedMesh) -> None:
    fn = _gateway_function(example_synth)
    assert fn["Architectures"] == ["arm64"]
    assert fn["Runtime"] == "python3.14"
    assert fn["Timeout"] == 900
    env = fn["Environment"]["Variables"]
    assert env["AWS_LAMBDA_EXEC_WRAPPER"] == "/opt/bootstrap"
    assert env["AWS_LWA_INVOKE_MODE"] == "response_stream"
    assert env["PORT"] == "8080"
    assert env["ASYA_MANIFEST"] == "/var/task/manifest.json"
    assert "arn:aws:lambda:us-east-1:753240598075:layer:LambdaAdapterLayerArm64:25" in fn["Layers"]
    layers = _layer_ids(example_synth)
    refs = {_ref_id(layer) for layer in fn["Layers"] if isinstance(layer, dict)}
    assert refs == {layers["asya sidecar library"], layers["asya gateway dependencies"]}


def test_gateway_asset_holds_package_manifest_and_run_script(
    example_synth: SynthesizedMesh, example_manifest: Manifest
) -> None:
    fn = _gateway_function(example_synth)
    asset_dir = example_synth.outdir / f"asset.{fn['Code']['S3Key'].removesuffix('.zip')}"
    assert (asset_dir / "asya_gateway").is_dir()
    assert not list(asset_dir.rglob("__pycache__"))
    run_sh = asset_dir / "run.sh"
    assert run_sh.stat().st_mode & stat.S_IXUSR
    assert "uvicorn asya_gateway.app:create_app --factory --host 0.0.0.0 --port" in run_sh.read_text()
    data = json.loads((asset_dir / "manifest.json").read_text())
    assert parse_manifest(data, base_dir=example_manifest.base_dir) == example_manifest


def test_gw_back_1_backstop_runs_every_minute(example_synth: SynthesizedMesh) -> None:
    (rule,) = example_synth.of_type("AWS::Events::Rule").values()
    props = rule["Properties"]
    assert props["ScheduleExpression"] == "rate(1 minute)"
    (target,) = props["Targets"]
    functions = example_synth.of_type("AWS::Lambda::Function")
    backstop = functions[_ref_id(target["Arn"])]["Properties"]
    assert backstop["Handler"] == "asya_gateway.backstop.lambda_handler"
    assert backstop["Architectures"] == ["arm64"]


def test_outputs(example_synth: SynthesizedMesh, example_manifest: Manifest) -> None:
    outputs = example_synth.outputs
    assert {"GatewayUrl", "TableName", "BucketName"} <= set(outputs)
    queues = _queues_by_name(example_synth)
    queue_outputs = {
        key: _ref_id(o["Value"]) for key, o in outputs.items() if "QueueUrl" in key and key != "QueueUrlPrefix"
    }
    expected = {queue_output_key(n): queues[naming.queue_name(NS, n)][0] for n in _actor_names(example_manifest)}
    assert queue_outputs == expected
    assert {"QueueUrlNormalize", "QueueUrlXSink", "QueueUrlXSump"} <= set(queue_outputs), "readable, unhashed keys"
    prefix = json.dumps(outputs["QueueUrlPrefix"]["Value"])
    assert "AWS::AccountId" in prefix and f"/asya-{NS}-" in prefix


def test_cdk_nag_aws_solutions_passes(example_synth: SynthesizedMesh) -> None:
    """The fixture's synthesis ran AwsSolutionsChecks (it raises on a finding); the report lists no failure."""
    report = example_synth.validation_report()
    assert [p for p in report["pluginReports"] if p.get("conclusion") != "success"] == []


def test_cdk_nag_is_enforced_by_the_app(tmp_path: Path) -> None:
    """Control for the test above: a non-compliant resource added to the same app fails synthesis."""
    from aws_cdk import aws_sqs as sqs

    built = build_mesh_app(REPO / "asya.yaml", repo_root=REPO, outdir=tmp_path)
    sqs.Queue(built.stack, "PlainQueue")
    with pytest.raises(RuntimeError, match="ValidationFailed"):
        built.app.synth()
    report = json.loads((tmp_path / "validation-report.json").read_text())
    rules = {v["ruleName"] for p in report["pluginReports"] for v in p["violations"]}
    paths = {
        c["constructPath"] for p in report["pluginReports"] for v in p["violations"] for c in v["violatingConstructs"]
    }
    assert {"AwsSolutions-SQS3", "AwsSolutions-SQS4"} <= rules
    assert paths == {"asya-demo/PlainQueue/Resource"}


def test_console_routes_go_through_the_api_with_its_auth(example_synth: SynthesizedMesh) -> None:
    """Issue 21: ``/console/`` has no API resource of its own: ``ANY /{proxy+}`` carries it to the app with the same
    authorization as every API route (AWS_IAM in the example, so under ``iam`` the console is not opened to the
    public), and the staged gateway asset ships the console's three files."""
    routes = _methods_by_route(example_synth)
    assert not [route for route in routes if route[1].startswith("/console")]
    assert routes[("ANY", "/{proxy+}")] == "AWS_IAM"
    fn = _gateway_function(example_synth)
    console = example_synth.outdir / f"asset.{fn['Code']['S3Key'].removesuffix('.zip')}" / "asya_gateway" / "console"
    shipped = sorted(path.name for path in console.iterdir())
    assert shipped == ["console.css", "console.js", "flowgraph.js", "index.html"]
