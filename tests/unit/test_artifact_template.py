"""The artifact mesh's template reading (issue 24): intrinsics, nested stacks, the resource allow-list, the API's
routing and SigV4 (pure: small assemblies written to a temporary directory)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from asya_local.artifact.apifront import ApiFront
from asya_local.artifact.model import ApiMethod, read_mesh
from asya_local.artifact.restage import RestageError, Restager
from asya_local.artifact.sigv4 import sign, verify
from asya_local.artifact.template import TemplateError, load_assembly

pytestmark = pytest.mark.unit


def _assembly(tmp_path: Path, template: dict[str, Any], nested: dict[str, Any] | None = None) -> Path:
    (tmp_path / "manifest.json").write_text(
        json.dumps({"artifacts": {"s": {"type": "aws:cloudformation:stack", "properties": {"templateFile": "s.json"}}}})
    )
    (tmp_path / "s.json").write_text(json.dumps(template))
    if nested is not None:
        (tmp_path / "child.nested.template.json").write_text(json.dumps(nested))
    return tmp_path


def test_intrinsics_resolve_to_cloudformations_values(tmp_path: Path) -> None:
    template = {
        "Parameters": {"Env": {"Type": "String", "Default": "dev"}},
        "Conditions": {"IsDev": {"Fn::Equals": [{"Ref": "Env"}, "dev"]}},
        "Resources": {
            "Dlq": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::Sub": "q-${Env}-dlq"}}},
            "Q": {
                "Type": "AWS::SQS::Queue",
                "Properties": {
                    "QueueName": {"Fn::Join": ["-", ["q", {"Ref": "Env"}]]},
                    "VisibilityTimeout": {"Fn::If": ["IsDev", 30, 60]},
                    "DelaySeconds": {"Fn::Select": [1, {"Fn::Split": [",", "0,5"]}]},
                    "RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": ["Dlq", "Arn"]}, "maxReceiveCount": 3},
                },
            },
            "Never": {"Type": "AWS::SQS::Queue", "Condition": "IsNotDev", "Properties": {}},
        },
    }
    template["Conditions"]["IsNotDev"] = {"Fn::Not": [{"Condition": "IsDev"}]}
    spec = read_mesh(load_assembly(_assembly(tmp_path, template), account_id="111122223333", endpoint_url="http://e"))
    queue = spec.queues["arn:aws:sqs:us-east-1:111122223333:q-dev"]
    assert queue.attributes["VisibilityTimeout"] == "30"
    assert queue.attributes["DelaySeconds"] == "5"
    assert json.loads(queue.attributes["RedrivePolicy"]) == {
        "deadLetterTargetArn": "arn:aws:sqs:us-east-1:111122223333:q-dev-dlq",
        "maxReceiveCount": "3",
    }
    assert len(spec.queues) == 2  # the conditional queue is not created


def test_nested_stack_parameters_and_outputs(tmp_path: Path) -> None:
    nested = {
        "Parameters": {"Prefix": {"Type": "String"}},
        "Resources": {"T": {"Type": "AWS::SNS::Topic", "Properties": {"TopicName": {"Fn::Sub": "${Prefix}-t"}}}},
        "Outputs": {"TopicName": {"Value": {"Fn::GetAtt": ["T", "TopicName"]}}},
    }
    template = {
        "Resources": {
            "Child": {
                "Type": "AWS::CloudFormation::Stack",
                "Properties": {"TemplateURL": "https://x/child.nested.template.json", "Parameters": {"Prefix": "p"}},
            },
            "Q": {
                "Type": "AWS::SQS::Queue",
                "Properties": {"QueueName": {"Fn::GetAtt": ["Child", "Outputs.TopicName"]}},
            },
        }
    }
    spec = read_mesh(load_assembly(_assembly(tmp_path, template, nested), endpoint_url="http://e"))
    assert [q.name for q in spec.queues.values()] == ["p-t"]


def test_a_resource_type_neither_emulated_nor_inert_is_an_error_naming_it(tmp_path: Path) -> None:
    template = {"Resources": {"Fn": {"Type": "AWS::StepFunctions::StateMachine", "Properties": {}}}}
    with pytest.raises(TemplateError, match=r"AWS::StepFunctions::StateMachine \(logical id Fn\)"):
        read_mesh(load_assembly(_assembly(tmp_path, template), endpoint_url="http://e"))


def test_an_unknown_intrinsic_is_an_error(tmp_path: Path) -> None:
    template = {"Resources": {"Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": {"Fn::Transform": {}}}}}}
    with pytest.raises(TemplateError, match="Fn::Transform"):
        read_mesh(load_assembly(_assembly(tmp_path, template), endpoint_url="http://e"))


def _front() -> ApiFront:
    fn = "arn:aws:lambda:us-east-1:1:function:g"
    methods = [
        ApiMethod("/", "ANY", "AWS_IAM", None, fn),
        ApiMethod("/{proxy+}", "ANY", "AWS_IAM", None, fn),
        ApiMethod("/health", "GET", "NONE", None, fn),
        ApiMethod("/health", "ANY", "AWS_IAM", None, fn),
    ]
    return ApiFront(methods, upstreams={fn: "http://u"}, principals={}, stage="prod", api_arn="arn:a")


def test_api_routing_prefers_the_exact_resource_and_method() -> None:
    front = _front()
    assert front.match("/health", "GET") == ApiMethod(
        "/health", "GET", "NONE", None, "arn:aws:lambda:us-east-1:1:function:g"
    )
    assert front.match("/health", "POST").authorization == "AWS_IAM"  # type: ignore[union-attr]
    assert front.match("/api/v1/mesh/x", "GET").path == "/{proxy+}"  # type: ignore[union-attr]
    assert front.match("/", "GET").path == "/"  # type: ignore[union-attr]


def test_sigv4_signature_round_trip_and_tampering() -> None:
    headers = sign(
        method="POST",
        host="h:1",
        path="/prod/api",
        query="b=2&a=1",
        headers={"content-type": "application/json"},
        body=b"{}",
        access_key_id="AKID",
        secret="s3cret",
        region="us-east-1",
    )
    request_headers = {"content-type": "application/json", **headers}
    ok = verify(
        method="POST",
        path="/prod/api",
        query="b=2&a=1",
        headers=request_headers,
        body=b"{}",
        secret_of={"AKID": "s3cret"}.get,
    )
    assert ok == ("AKID", None)
    tampered = verify(
        method="POST",
        path="/prod/api",
        query="b=2&a=1",
        headers=request_headers,
        body=b"{ }",
        secret_of={"AKID": "s3cret"}.get,
    )
    assert tampered[1] is not None and "signature" in tampered[1]
    unknown = verify(method="POST", path="/prod/api", query="", headers=request_headers, body=b"{}", secret_of={}.get)
    assert unknown[1] == "The security token included in the request is invalid."
    assert verify(method="GET", path="/", query="", headers={}, body=b"", secret_of={}.get)[1] == (
        "Missing Authentication Token"
    )


def test_a_restaged_layer_that_differs_from_the_synthesized_one_is_refused(tmp_path: Path) -> None:
    layer = tmp_path / "layer"
    (layer / "python" / "yaml").mkdir(parents=True)
    site = tmp_path / "site"
    (site / "yaml").mkdir(parents=True)
    (site / "extra_module.py").write_text("")
    with pytest.raises(RestageError, match=r"extra \['extra_module'\]"):
        Restager(tmp_path / "cache").check(layer, site)
