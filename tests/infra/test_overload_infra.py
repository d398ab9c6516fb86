"""Overload in the synthesized example mesh: API Gateway's own refusals under load (docs/http.md GW-OVL-6; its stage
throttle answers 429, a gateway function it could not invoke and any other 5xx of its own answer 503, each with
``Retry-After`` and the ``{"error": ...}`` shape of GW-GEN-2), and one mesh-level alarm per limit (docs/deploy.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from asya import tableschema
from asya.overload import DEFAULT_RETRY_AFTER_SECONDS
from asya_cdk.testing import SynthesizedMesh

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.infra


def test_gw_ovl_6_gateway_responses_answer_overload_with_retry_after(example_synth: SynthesizedMesh) -> None:
    responses = {
        res["Properties"]["ResponseType"]: res["Properties"]
        for res in example_synth.of_type("AWS::ApiGateway::GatewayResponse").values()
    }
    expected = {"THROTTLED": "429", "INTEGRATION_FAILURE": "503", "DEFAULT_5XX": "503"}
    assert {kind: responses[kind]["StatusCode"] for kind in expected} == expected
    for kind in expected:
        props = responses[kind]
        assert props["ResponseParameters"] == {
            "gatewayresponse.header.Retry-After": f"'{DEFAULT_RETRY_AFTER_SECONDS}'"
        }, kind
        body = json.loads(props["ResponseTemplates"]["application/json"])
        assert list(body) == ["error"] and "overloaded" in body["error"], kind


def _resources(synth: SynthesizedMesh, cfn_type: str) -> list[dict[str, Any]]:
    """Resources of ``cfn_type`` in the stack and its nested stacks (the operator's alarms are nested)."""
    found = list(synth.of_type(cfn_type).values())
    for path in synth.outdir.glob("*.nested.template.json"):
        template = json.loads(path.read_text(encoding="utf-8"))
        found += [res for res in template["Resources"].values() if res["Type"] == cfn_type]
    return found


def _metric_names(alarm: dict[str, Any]) -> set[str]:
    props = alarm["Properties"]
    if "MetricName" in props:
        return {props["MetricName"]}
    return {m["MetricStat"]["Metric"]["MetricName"] for m in props.get("Metrics", []) if "MetricStat" in m}


def test_every_limit_has_one_mesh_level_alarm(example_synth: SynthesizedMesh) -> None:
    """429/503 answers, index throttles, timed-out tasks and failed records of partial batch responses: one alarm
    each for the whole mesh, none per actor."""
    alarms = _resources(example_synth, "AWS::CloudWatch::Alarm")
    by_metric = {
        name: [a for a in alarms if name in _metric_names(a)]
        for name in ("OverloadAnswers-demo", "TasksTimedOut", "FailedRecords")
    }
    assert {name: len(found) for name, found in by_metric.items()} == {
        "OverloadAnswers-demo": 1,
        "TasksTimedOut": 1,
        "FailedRecords": 1,
    }
    for name in ("TasksTimedOut", "FailedRecords"):
        (alarm,) = by_metric[name]
        assert alarm["Properties"]["Dimensions"] == [{"Name": "Namespace", "Value": "demo"}]
    (index,) = [
        a
        for a in alarms
        if "ReadThrottleEvents" in _metric_names(a)
        and any(
            d["Name"] == "GlobalSecondaryIndexName"
            for m in a["Properties"]["Metrics"]
            if "MetricStat" in m
            for d in m["MetricStat"]["Metric"]["Dimensions"]
        )
    ]
    indexes = {
        d["Value"]
        for m in index["Properties"]["Metrics"]
        if "MetricStat" in m
        for d in m["MetricStat"]["Metric"]["Dimensions"]
        if d["Name"] == "GlobalSecondaryIndexName"
    }
    assert indexes == {gsi.name for gsi in tableschema.GSIS}
    (flt,) = _resources(example_synth, "AWS::Logs::MetricFilter")
    assert flt["Properties"]["MetricTransformations"][0]["MetricName"] == "OverloadAnswers-demo"
    assert "429" in flt["Properties"]["FilterPattern"] and "503" in flt["Properties"]["FilterPattern"]


def _templates(synth: SynthesizedMesh) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = [{"Resources": dict(synth.resources)}]
    found += [json.loads(p.read_text(encoding="utf-8")) for p in synth.outdir.glob("*.nested.template.json")]
    return found


def test_p_man_4_no_batch_stays_invisible_longer_than_its_function_timeout_plus_a_minute(
    example_synth: SynthesizedMesh,
) -> None:
    """A batch whose invocation Lambda throttled waits out its queue's visibility timeout before SQS delivers it
    again: every queue an event source reads (the actors' and the backstop's timer queue) holds a batch at most its
    function's timeout plus the 60 s in which Lambda retries a throttled invocation, never 6 x the timeout."""
    checked = 0
    for template in _templates(example_synth):
        resources = template["Resources"]
        for mapping in (r for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"):
            props = mapping["Properties"]
            queue_ref, function_ref = props["EventSourceArn"], props["FunctionName"]
            if "Fn::GetAtt" not in queue_ref or "Ref" not in function_ref:
                continue
            queue = resources[queue_ref["Fn::GetAtt"][0]]["Properties"]
            timeout = resources[function_ref["Ref"]]["Properties"]["Timeout"]
            assert timeout <= queue["VisibilityTimeout"] <= timeout + 60, (queue.get("QueueName"), timeout)
            checked += 1
    assert checked >= 5  # the example's actors, the crew and the backstop


def test_gw_back_7_the_backstop_reserves_concurrency_so_a_saturated_account_cannot_starve_it(
    example_synth: SynthesizedMesh,
) -> None:
    """The backstop function reserves executions of its own (its timers' event source never runs more than the
    reservation leaves after the sweep), so actors that take the account's whole unreserved pool cannot throttle it."""
    functions = example_synth.of_type("AWS::Lambda::Function")
    (backstop_id,) = [key for key, res in functions.items() if "backstop" in res["Properties"].get("Description", "")]
    reserved = functions[backstop_id]["Properties"].get("ReservedConcurrentExecutions")
    assert isinstance(reserved, int) and reserved >= 3
    (mapping,) = [
        res
        for res in example_synth.of_type("AWS::Lambda::EventSourceMapping").values()
        if res["Properties"]["FunctionName"] == {"Ref": backstop_id}
    ]
    assert mapping["Properties"]["ScalingConfig"]["MaximumConcurrency"] < reserved  # one left for the sweep


def _every_kind_of_limit() -> set[str]:
    """The kinds of limit the model names for the example mesh at 1,000 tasks/s, with a reservation and a
    customer-managed key so that every kind appears."""
    import dataclasses

    from asya.capacity import evaluate, plan
    from asya.manifest import load_manifest

    manifest = load_manifest(REPO / "asya.yaml")
    manifest = manifest.model_copy(
        update={"capacity": manifest.capacity.model_copy(update={"target_rate": 1000, "mix": {"text-pipeline": 1.0}})}
    )
    result = plan(manifest)
    settings = dataclasses.replace(
        result.settings, reserved_concurrency={"normalize": 10}, stream_reserved=5, customer_key=True
    )
    return {limit.kind for limit in evaluate(result.demand, settings, result.quotas)}


def test_every_limit_of_the_model_has_an_alarm_or_is_listed_as_having_no_metric(
    example_synth: SynthesizedMesh,
) -> None:
    """Each kind of limit the model names maps to the alarm that fires when the mesh reaches it, or to an explicit
    statement that AWS publishes no metric for it; every mapped alarm is in the synthesized mesh."""
    from asya.capacity import LIMIT_KINDS
    from asya_cdk.limit_alarms import LIMIT_WATCH

    kinds = _every_kind_of_limit()
    assert kinds == set(LIMIT_KINDS)
    assert set(LIMIT_WATCH) == kinds
    alarm_ids = [
        key
        for template in _templates(example_synth)
        for key, res in template["Resources"].items()
        if res["Type"] == "AWS::CloudWatch::Alarm"
    ]
    for kind, watch in LIMIT_WATCH.items():
        if watch.alarm is None:
            assert "no metric" in watch.meaning, kind
        else:
            assert any(watch.alarm in key for key in alarm_ids), (kind, watch.alarm)
