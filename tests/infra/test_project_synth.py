"""``asya synth`` of a project made by ``asya init`` (issue 20, point 1): the pinned CDK CLI runs the project's own
app.py, which builds the mesh with the CDK construct from the installed runtime code, into the project's own
cdk.out/, with readable output."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from asya_local.cli import main

pytestmark = pytest.mark.infra


@pytest.mark.skipif(shutil.which("npx") is None, reason="the CDK CLI needs Node.js")
def test_asya_synth_writes_the_projects_template_into_its_own_cdk_out(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    assert main(["init", str(project)], env={}, stdout=io.StringIO(), stderr=io.StringIO()) == 0
    out, err = io.StringIO(), io.StringIO()
    code = main(["synth", "--dir", str(project)], env={}, stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    template_path = project / "cdk.out" / "asya-shop.template.json"
    assert "synthesized asya-shop -> cdk.out/asya-shop.template.json" in err.getvalue()
    assert "b'" not in err.getvalue() and "Resources:" not in err.getvalue()  # no bytes repr, no template dump
    template = json.loads(template_path.read_text())
    queues = [r for r in template["Resources"].values() if r["Type"] == "AWS::SQS::Queue"]
    assert len(queues) == 8  # greet, x-sink, x-sump, the deadline timers (x-deadline) and their DLQs
    functions = [r for r in template["Resources"].values() if r["Type"] == "AWS::Lambda::Function"]
    assert any(f["Properties"]["Environment"]["Variables"].get("ASYA_HANDLER") == "hello.greet" for f in functions)
