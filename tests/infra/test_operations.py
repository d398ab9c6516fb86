"""The operator's view and concurrency of a deployed mesh (issue 26 items 6 and 7), on one small mesh synthesized with
cdk-nag (traced, an alarm topic, reserved concurrency, a hop ceiling); the defaults are the repository's example mesh.

- X-Ray tracing from the manifest (P-TRACE-3): ``tracing: true`` turns on Lambda active tracing, the X-Ray write
  permissions and ``ASYA_TRACING=true``; off, the function has neither. ``defaults.tracing`` reaches the gateway's
  functions, the backstop and the API stage.
- Alarms (:mod:`asya_cdk.operator_alarms`): errors and throttles of every function, the API's 5xx rate, the table's
  throttles, the timer queue's age, all notifying the manifest's topic.
- Concurrency: ``max_concurrency`` on the event source, ``reserved_concurrency`` on the function,
  ``gateway.stream_reserved_concurrency`` on the stream function, impossible sums refused at synthesis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
import pytest
import yaml

from asya.capacity import backstop_reservation
from asya.manifest import parse_manifest
from asya_cdk import AsyaMesh, DeploymentError
from asya_cdk.concurrency import concurrency_problems
from asya_cdk.operator_alarms import API_5XX_RATE, EVALUATION_MINUTES, FUNCTION_ALARM_MINUTES, TIMER_AGE_ALARM_SECONDS
from asya_cdk.testing import SynthesizedMesh, synthesize_mesh
from tests.templates import function_ids

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]
XRAY_ACTIONS = {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}

TOPIC = "arn:aws:sns:us-east-1:123456789012:ops"
MANIFEST: dict[str, Any] = {
    "namespace": "traced",
    "defaults": {"tracing": True},
    "actors": {
        "pay": {
            "handler": "text.normalize",
            "code": str(REPO / "functions"),
            "max_concurrency": 5,
            "reserved_concurrency": 10,
        },
        "ship": {"handler": "text.normalize", "code": str(REPO / "functions"), "tracing": False},
    },
    "flows": {"order": {"route": ["pay", "ship"]}},
    "gateway": {"stream_reserved_concurrency": 50},
    "observability": {"alarm_topic_arn": TOPIC},
    "max_hops": 50,
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> SynthesizedMesh:
    directory = tmp_path_factory.mktemp("cdk-traced")
    manifest = directory / "asya.yaml"
    manifest.write_text(yaml.safe_dump(MANIFEST), encoding="utf-8")
    return synthesize_mesh(manifest, repo_root=REPO, outdir=directory / "cdk.out")


def _function(synth: SynthesizedMesh, actor: str) -> dict[str, Any]:
    (fn,) = [
        res["Properties"]
        for res in synth.of_type("AWS::Lambda::Function").values()
        if res["Properties"].get("Environment", {}).get("Variables", {}).get("ASYA_ACTOR") == actor
    ]
    return fn


def _role_actions(synth: SynthesizedMesh, actor: str) -> set[str]:
    role = _function(synth, actor)["Role"]["Fn::GetAtt"][0]
    actions: set[str] = set()
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if role in {r["Ref"] for r in policy["Properties"]["Roles"]}:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                found = statement["Action"]
                actions.update([found] if isinstance(found, str) else found)
    return actions


@pytest.mark.parametrize("actor", ["pay", "x-sink", "x-sump"])
def test_p_trace_3_traced_actor_gets_active_tracing_xray_permissions_and_asya_tracing(
    traced: SynthesizedMesh, actor: str
) -> None:
    fn = _function(traced, actor)
    assert fn["TracingConfig"] == {"Mode": "Active"}
    assert fn["Environment"]["Variables"]["ASYA_TRACING"] == "true"
    assert _role_actions(traced, actor) >= XRAY_ACTIONS


def test_p_trace_3_an_actor_opting_out_of_defaults_tracing_is_not_traced(traced: SynthesizedMesh) -> None:
    fn = _function(traced, "ship")
    assert "TracingConfig" not in fn
    assert "ASYA_TRACING" not in fn["Environment"]["Variables"]
    assert not XRAY_ACTIONS & _role_actions(traced, "ship")


@pytest.mark.parametrize("actor", ["normalize", "analyze", "summarize", "x-sink", "x-sump"])
def test_p_trace_3_tracing_is_off_by_default(example_synth: SynthesizedMesh, actor: str) -> None:
    fn = _function(example_synth, actor)
    assert "TracingConfig" not in fn
    assert "ASYA_TRACING" not in fn["Environment"]["Variables"]
    assert not XRAY_ACTIONS & _role_actions(example_synth, actor)


def test_p_trace_3_no_function_of_an_untraced_mesh_may_write_to_x_ray(example_synth: SynthesizedMesh) -> None:
    for fn in example_synth.of_type("AWS::Lambda::Function").values():
        assert "TracingConfig" not in fn["Properties"]
    for policy in example_synth.of_type("AWS::IAM::Policy").values():
        assert "xray:" not in str(policy["Properties"]["PolicyDocument"])


def test_cdk_nag_passes_for_a_traced_mesh(traced: SynthesizedMesh) -> None:
    report = traced.validation_report()
    assert [p for p in report["pluginReports"] if p.get("conclusion") != "success"] == []


def _templates(synth: SynthesizedMesh) -> dict[str, dict[str, Any]]:
    """The stack's template and every nested one, by file name."""
    out = {"main": {"Resources": dict(synth.resources)}}
    for path in synth.outdir.glob("*.nested.template.json"):
        out[path.name] = json.loads(path.read_text(encoding="utf-8"))
    return out


def _alarm_stack(synth: SynthesizedMesh) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``OperatorAlarms`` nested template and the parameters the stack passes it."""
    (nested,) = [
        res["Properties"] for key, res in synth.of_type("AWS::CloudFormation::Stack").items() if "OperatorAlarms" in key
    ]
    (path,) = [p for p in synth.outdir.glob("*.nested.template.json") if "OperatorAlarms" in p.name]
    return json.loads(path.read_text(encoding="utf-8")), nested.get("Parameters", {})


def _watched_function(alarm: dict[str, Any], parameters: dict[str, Any]) -> tuple[str, set[str]]:
    """The function (its logical id in the stack) a ``FunctionAlarm`` watches, and the metric names it sums."""
    functions: set[str] = set()
    names: set[str] = set()
    for query in alarm["Metrics"]:
        stat = query.get("MetricStat")
        if stat is None:
            continue
        metric = stat["Metric"]
        assert metric["Namespace"] == "AWS/Lambda" and stat["Stat"] == "Sum" and stat["Period"] == 60
        names.add(metric["MetricName"])
        (dimension,) = metric["Dimensions"]
        value = dimension["Value"]
        functions.add(parameters[value["Ref"]]["Ref"] if "Ref" in value else value)
    (function,) = functions
    return function, names


def test_every_function_has_an_errors_and_throttles_alarm(traced: SynthesizedMesh) -> None:
    """Issue 26 item 7: every actor (crew included), both gateway functions and the backstop; under placement
    'stack' they live in the OperatorAlarms nested stack (the stack keeps its room for actors)."""
    template, parameters = _alarm_stack(traced)
    watched: dict[str, dict[str, Any]] = {}
    for key, res in template["Resources"].items():
        if res["Type"] == "AWS::CloudWatch::Alarm" and "FunctionAlarm" in key:
            props = res["Properties"]
            function, names = _watched_function(props, parameters)
            assert names == {"Errors", "Throttles"}
            watched[function] = props
    ids = function_ids(traced)
    assert set(watched) == set(ids.values())
    for props in watched.values():
        assert (props["ComparisonOperator"], props["Threshold"]) == ("GreaterThanThreshold", 0)
        assert (props["DatapointsToAlarm"], props["EvaluationPeriods"]) == (FUNCTION_ALARM_MINUTES, EVALUATION_MINUTES)
        assert props["TreatMissingData"] == "notBreaching"


def _alarm(synth: SynthesizedMesh, fragment: str) -> dict[str, Any]:
    template, _ = _alarm_stack(synth)
    (props,) = [res["Properties"] for key, res in template["Resources"].items() if fragment in key]
    return props


def test_api_5xx_rate_alarm(traced: SynthesizedMesh) -> None:
    alarm = _alarm(traced, "ApiServerErrors")
    assert (alarm["Namespace"], alarm["MetricName"], alarm["Statistic"]) == ("AWS/ApiGateway", "5XXError", "Average")
    assert alarm["Dimensions"] == [{"Name": "ApiName", "Value": "asya-traced"}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", API_5XX_RATE)


def test_table_throttles_alarm(traced: SynthesizedMesh) -> None:
    alarm = _alarm(traced, "TableThrottles")
    metrics = {
        q["MetricStat"]["Metric"]["MetricName"]: q["MetricStat"]["Metric"]
        for q in alarm["Metrics"]
        if "MetricStat" in q
    }
    assert set(metrics) == {"ReadThrottleEvents", "WriteThrottleEvents"}
    for metric in metrics.values():
        assert metric["Namespace"] == "AWS/DynamoDB"
        assert metric["Dimensions"] == [{"Name": "TableName", "Value": "asya-traced-tasks"}]
    assert (alarm["ComparisonOperator"], alarm["Threshold"]) == ("GreaterThanThreshold", 0)


def test_timer_queue_age_alarm(traced: SynthesizedMesh) -> None:
    """The backstop's event source is alarmed on its oldest message like every actor queue (test_alarms.py)."""
    alarm = _alarm(traced, "TimerAgeAlarm")
    assert (alarm["Namespace"], alarm["MetricName"]) == ("AWS/SQS", "ApproximateAgeOfOldestMessage")
    assert alarm["Dimensions"] == [{"Name": "QueueName", "Value": "asya-traced-x-deadline"}]
    assert alarm["Threshold"] == TIMER_AGE_ALARM_SECONDS


def test_every_alarm_notifies_the_topic_on_alarm_and_ok(traced: SynthesizedMesh) -> None:
    alarms = [
        res["Properties"]
        for template in _templates(traced).values()
        for res in template["Resources"].values()
        if res["Type"] == "AWS::CloudWatch::Alarm"
    ]
    # per actor: DLQ, age, function; mesh: x-sump, backstop errors, timer DLQ, 3 functions, API, table, timer age,
    # and the five limit alarms (429/503 answers, index throttles, timed-out tasks, failed records, account pool)
    assert len(alarms) == 3 * len(traced.built.stack.actors) + 14
    for alarm in alarms:
        assert alarm["AlarmActions"] == alarm["OKActions"] == [TOPIC]


def test_the_example_alarms_have_no_action(example_synth: SynthesizedMesh) -> None:
    for template in _templates(example_synth).values():
        for res in template["Resources"].values():
            if res["Type"] == "AWS::CloudWatch::Alarm":
                assert "AlarmActions" not in res["Properties"]


def test_defaults_tracing_reaches_the_gateway_the_backstop_and_the_stage(traced: SynthesizedMesh) -> None:
    """Issue 26 item 7: the manifest's tracing reaches every function, and the API stage."""
    functions = traced.of_type("AWS::Lambda::Function")
    for name in ("gateway", "gateway-stream", "backstop"):
        props = functions[function_ids(traced)[name]]["Properties"]
        assert props["TracingConfig"] == {"Mode": "Active"}, name
        assert _role_actions_of(traced, props) >= XRAY_ACTIONS, name
    (stage,) = traced.of_type("AWS::ApiGateway::Stage").values()
    assert stage["Properties"]["TracingEnabled"] is True


def test_an_untraced_stage_has_no_tracing(example_synth: SynthesizedMesh) -> None:
    (stage,) = example_synth.of_type("AWS::ApiGateway::Stage").values()
    assert not stage["Properties"].get("TracingEnabled", False)


def _role_actions_of(synth: SynthesizedMesh, props: dict[str, Any]) -> set[str]:
    role = props["Role"]["Fn::GetAtt"][0]
    actions: set[str] = set()
    for policy in synth.of_type("AWS::IAM::Policy").values():
        if role in {r["Ref"] for r in policy["Properties"]["Roles"]}:
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                found = statement["Action"]
                actions.update([found] if isinstance(found, str) else found)
    return actions


def test_powertools_service_name_is_the_actor_name(traced: SynthesizedMesh) -> None:
    for actor, key in function_ids(traced).items():
        env = traced.resources[key]["Properties"]["Environment"]["Variables"]
        expected = {"gateway": "gateway", "gateway-stream": "gateway", "backstop": "backstop"}.get(actor, actor)
        assert env["POWERTOOLS_SERVICE_NAME"] == expected


def test_max_concurrency_and_reserved_concurrency_from_the_manifest(traced: SynthesizedMesh) -> None:
    """Issue 26 item 6: the event source's ScalingConfig.MaximumConcurrency and the function's reservation."""
    ids = function_ids(traced)
    functions = traced.of_type("AWS::Lambda::Function")
    mappings = {
        res["Properties"]["FunctionName"]["Ref"]: res["Properties"]
        for res in traced.of_type("AWS::Lambda::EventSourceMapping").values()
    }
    assert mappings[ids["pay"]]["ScalingConfig"] == {"MaximumConcurrency": 5}
    assert functions[ids["pay"]]["Properties"]["ReservedConcurrentExecutions"] == 10
    assert "ScalingConfig" not in mappings[ids["ship"]]
    assert "ReservedConcurrentExecutions" not in functions[ids["ship"]]["Properties"]
    assert functions[ids["gateway-stream"]]["Properties"]["ReservedConcurrentExecutions"] == 50
    assert "ReservedConcurrentExecutions" not in functions[ids["gateway"]]["Properties"]


def test_no_reservation_by_default_but_the_backstops(example_synth: SynthesizedMesh) -> None:
    """A reservation can fail a deploy in a small account, so the example reserves nothing of its own; the backstop
    reserves its 3 executions, for which AWS's default quota of 1,000 has room (GW-BACK-7)."""
    reserved = {
        res["Properties"].get("Description", ""): res["Properties"]["ReservedConcurrentExecutions"]
        for res in example_synth.of_type("AWS::Lambda::Function").values()
        if "ReservedConcurrentExecutions" in res["Properties"]
    }
    assert list(reserved.values()) == [3] and "backstop" in next(iter(reserved))


def test_p_hop_1_the_hop_ceiling_reaches_every_actor(traced: SynthesizedMesh) -> None:
    for actor, key in function_ids(traced).items():
        env = traced.resources[key]["Properties"]["Environment"]["Variables"]
        if "ASYA_ACTOR" in env:
            assert env["ASYA_MAX_HOPS"] == "50", actor


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            {"gateway": {"stream_reserved_concurrency": 950}},
            r"reserved concurrency 950 \(gateway\.stream_reserved_concurrency: 950\) would leave less than the 100 "
            r"AWS keeps unreserved of deployment\.account_concurrency: 1000; lower them to 900 together",
        ),
        (
            {"defaults": {"reserved_concurrency": 500}, "deployment": {"account_concurrency": 1000}},
            r"reserved concurrency 1000 \(actors\.a\.reserved_concurrency: 500, actors\.b\.reserved_concurrency: "
            r"500\) would leave",
        ),
        (
            {"gateway": {"stream_reserved_concurrency": 5}, "deployment": {"account_concurrency": 10}},
            r"deployment\.account_concurrency: 10; an account whose quota is 10 cannot reserve any concurrency",
        ),
    ],
)
def test_an_impossible_reservation_is_refused_before_cloudformation(
    tmp_path: Path, settings: dict[str, Any], expected: str
) -> None:
    manifest = {
        "namespace": "small",
        "actors": {name: {"handler": "text.normalize", "code": str(REPO / "functions")} for name in ("a", "b")},
        "flows": {"f": {"route": ["a", "b"]}},
        **settings,
    }
    path = tmp_path / "asya.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    stack = cdk.Stack(cdk.App(), "S", env=cdk.Environment(region="us-east-1"))
    with pytest.raises(DeploymentError, match=expected):
        AsyaMesh(stack, "Default", manifest=path)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({}, 3),  # AWS's default quota of 1,000 has room
        ({"deployment": {"account_concurrency": 10}}, None),  # a new account's quota: nothing can be reserved
        ({"gateway": {"stream_reserved_concurrency": 898}}, None),  # 1,000 - 100 - 898 leaves 2
        ({"gateway": {"stream_reserved_concurrency": 897}}, 3),
        # a declared target's timers: 1,000 tasks/s x 1.25 x 0.01 s = 13 batches, plus one for the sweep
        ({"capacity": {"target_rate": 1000}}, 14),
        ({"capacity": {"target_rate": 1000}, "gateway": {"stream_reserved_concurrency": 890}}, 3),
    ],
)
def test_gw_back_7_the_backstop_reserves_only_what_the_account_has_room_for(
    settings: dict[str, Any], expected: int | None
) -> None:
    manifest = parse_manifest(
        {
            "namespace": "small",
            "actors": {"a": {"handler": "text.normalize", "code": str(REPO / "functions")}},
            "flows": {"f": {"route": ["a"]}},
            **settings,
        },
        base_dir=REPO,
        source="test",
    )
    assert backstop_reservation(manifest) == expected
    assert concurrency_problems(manifest) == []
