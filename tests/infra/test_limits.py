"""Limits checked at synthesis, all at once (issue 26 item 2): every limit a deployment would hit is reported in one
error. Each limit is crossed by a crafted template (the mesh's own rules keep a real manifest from crossing most of
them first); the Lambda environment limit is crossed by a crafted manifest, through the whole synthesis.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from asya_cdk.limits import (
    MAX_ENVIRONMENT_BYTES,
    LimitError,
    LimitReport,
    SynthTemplate,
    check_templates,
    enforce,
)
from asya_cdk.testing import synthesize_mesh

pytestmark = pytest.mark.infra

REPO = Path(__file__).resolve().parents[2]


def _template(name: str, resources: dict[str, Any], **sections: Any) -> SynthTemplate:
    body = {"Resources": resources, **sections}
    return SynthTemplate(name=name, body=body, size=len(json.dumps(body)))


def _dashboard(widgets: int, metrics: int) -> dict[str, Any]:
    body = {"widgets": [{"type": "metric", "properties": {"metrics": [["A", "B"]] * metrics}}] * widgets}
    text = json.dumps(body)
    # as CDK writes it: a Fn::Join around the region token
    head, tail = text.split("B", 1)  # inside the quotes, as CDK renders a token within a string
    return {
        "Type": "AWS::CloudWatch::Dashboard",
        "Properties": {"DashboardBody": {"Fn::Join": ["", [head, {"Ref": "AWS::Region"}, tail]]}},
    }


def _policy(role: str, chars: int) -> dict[str, Any]:
    statement = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "x" * chars}
    return {
        "Type": "AWS::IAM::Policy",
        "Properties": {"PolicyDocument": {"Statement": [statement]}, "Roles": [{"Ref": role}]},
    }


def test_every_limit_is_reported_at_once() -> None:
    big_env = {"Variables": {"ASYA_ACTOR": "fat", "BLOB": "x" * MAX_ENVIRONMENT_BYTES}}
    crowded = _template(
        "Crowded",
        {f"Topic{i}": {"Type": "AWS::SNS::Topic"} for i in range(501)},
        Outputs={f"O{i}": {"Value": "v"} for i in range(201)},
        Parameters={f"P{i}": {"Type": "String"} for i in range(201)},
    )
    named = _template(
        "Named",
        {
            "Fat": {"Type": "AWS::Lambda::Function", "Properties": {"Environment": big_env}},
            "LongFunction": {"Type": "AWS::Lambda::Function", "Properties": {"FunctionName": "f" * 65}},
            "LongQueue": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "q" * 81}},
            "LongRole": {"Type": "AWS::IAM::Role", "Properties": {"RoleName": "r" * 65}},
            "Board": _dashboard(widgets=501, metrics=1),
            "Graph": _dashboard(widgets=1, metrics=501),
            "Policy1": _policy("LongRole", 6_000),
            "Policy2": _policy("LongRole", 5_000),
        },
    )
    huge = SynthTemplate(name="Huge", body={"Resources": {}}, size=1_048_577)
    inline = SynthTemplate(name="Inline", body={"Resources": {}}, size=51_201, uploaded=False)
    roles = _template("Roles", {f"R{i}": {"Type": "AWS::IAM::Role", "Properties": {}} for i in range(3)})
    report = check_templates([crowded, named, huge, inline, roles], role_warning=2)
    expected = [
        "Crowded: 501 resources, over CloudFormation's 500 per stack",
        "Crowded: 201 outputs, over CloudFormation's 200 per stack",
        "Crowded: 201 parameters, over CloudFormation's 200 per stack",
        "Named: Fat (actor fat): environment of about 4,113 bytes, over Lambda's 4,096",
        "Named: LongFunction: FunctionName of 65 characters, over the limit of 64",
        "Named: LongQueue: QueueName of 81 characters, over the limit of 80",
        "Named: LongRole: RoleName of 65 characters, over the limit of 64",
        "Named: Board: 501 widgets, over CloudWatch's 500 per dashboard",
        "Named: Graph: widget 0 has 501 metrics, over CloudWatch's 500 per graph",
        "Named: role LongRole: inline policies of 11,",
        "Huge: template of 1,048,577 bytes, over CloudFormation's 1,048,576 for a template uploaded to S3",
        "Inline: template of 51,201 bytes, over CloudFormation's 51,200 for a template sent inline",
    ]
    for line in expected:
        assert sum(error.startswith(line) for error in report.errors) == 1, line
    assert len(report.errors) == len(expected)
    (warning,) = report.warnings
    assert warning.startswith("the mesh creates 4 IAM roles; IAM allows 1,000 per account by default")
    with pytest.raises(LimitError) as info:
        enforce(report)
    assert all(line in str(info.value) for line in expected)


def test_limits_exactly_at_the_edge_pass() -> None:
    env = {"Variables": {"K": "x" * (MAX_ENVIRONMENT_BYTES - 1)}}
    edge = _template(
        "Edge",
        {
            "Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Environment": env, "FunctionName": "f" * 64}},
            "Q": {"Type": "AWS::SQS::Queue", "Properties": {"QueueName": "q" * 80}},
            **{f"T{i}": {"Type": "AWS::SNS::Topic"} for i in range(498)},
        },
    )
    assert check_templates([edge]) == LimitReport()


def test_a_token_in_the_environment_counts_its_estimate() -> None:
    """The account id counts 12 characters; any other unresolved value 64."""
    env = {
        "Variables": {"A": {"Ref": "AWS::AccountId"}, "T": {"Ref": "Table"}, "B": "x" * (MAX_ENVIRONMENT_BYTES - 78)}
    }
    over = _template("T", {"Fn": {"Type": "AWS::Lambda::Function", "Properties": {"Environment": env}}})
    (error,) = check_templates([over]).errors
    assert "environment of about 4,097 bytes" in error


def test_an_environment_over_4kb_fails_the_synthesis(tmp_path: Path) -> None:
    """The issue's 5,195-byte environment: refused after synthesis, naming the actor (both actors in one error)."""
    blob = "v" * 2_500
    manifest = {
        "namespace": "fat",
        "actors": {
            name: {
                "handler": "text.normalize",
                "code": str(REPO / "functions"),
                "env": {"BLOB_A": blob, "BLOB_B": blob},
            }
            for name in ("left", "right")
        },
        "flows": {"both": {"route": ["left", "right"]}},
    }
    path = tmp_path / "asya.yaml"
    path.write_text(yaml.safe_dump(manifest), encoding="utf-8")
    with pytest.raises(LimitError) as info:
        synthesize_mesh(path, repo_root=REPO, outdir=tmp_path / "out")
    message = str(info.value)
    assert "(actor left): environment of about" in message and "(actor right): environment of about" in message
    assert "largest: BLOB_A, BLOB_B" in message
