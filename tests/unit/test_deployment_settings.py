"""The manifest's ``deployment`` block (issue 26 items 1 and 4): placement, retained data, reuse of retained storage,
each bad value refused naming the field; and ``asya destroy --delete-data``: its arguments, its confirmation and the
CDK CLI commands it runs (a deploy with ``asya:deleteData=true``, then a forced destroy), without running them.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from asya.exceptions import ManifestError
from asya.manifest import parse_manifest
from asya.manifest.blocks import DEFAULT_ACTOR_STACKS
from asya_local.cli import main
from asya_local.project_cli import CDK_CLI, DELETE_DATA_CONTEXT, confirm_deletion, destroy_plan
from asya_local.scaffold import scaffold

BASE: dict[str, Any] = {"namespace": "shop", "actors": {"pay": {"handler": "m.f"}}, "flows": {"f": {"route": ["pay"]}}}


def _deployment(**fields: Any) -> Any:
    return parse_manifest({**BASE, "deployment": fields}, base_dir=Path()).deployment


def test_defaults_keep_actors_in_the_stack_and_retain_data() -> None:
    deployment = _deployment()
    assert (deployment.placement, deployment.actor_stacks) == ("stack", DEFAULT_ACTOR_STACKS)
    assert deployment.retain_data is True
    assert (deployment.existing_table, deployment.existing_bucket) == (False, None)
    assert _deployment(placement="nested", actor_stacks=20).actor_stacks == 20


def test_the_rendered_deployment_block_parses_again() -> None:
    """The gateway reads the manifest back from its JSON rendering, which carries every field (defaults included)."""
    manifest = parse_manifest({**BASE, "deployment": {"retain_data": False}}, base_dir=Path())
    again = parse_manifest(manifest.model_dump(mode="json"), base_dir=Path())
    assert again.deployment == manifest.deployment


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"placement": "hashed"}, "deployment.placement"),
        ({"placement": "nested", "actor_stacks": 0}, "deployment.actor_stacks"),
        ({"placement": "nested", "actor_stacks": 101}, "deployment.actor_stacks"),
        ({"retain_data": "yes"}, "deployment.retain_data"),
        ({"existing_bucket": "Not_A_Bucket"}, "'Not_A_Bucket' is not an S3 bucket name"),
    ],
)
def test_bad_deployment_settings_name_the_field(fields: dict[str, Any], expected: str) -> None:
    with pytest.raises(ManifestError) as info:
        _deployment(**fields)
    assert expected in str(info.value)


def test_destroy_plan_deploys_deletable_data_then_destroys() -> None:
    deploy, destroy = destroy_plan(
        context=["asya:region=eu-west-1"], extra=["--", "-v"], python="/x/py", which=lambda _: "/bin/npx"
    )
    head = ["/bin/npx", "--yes", CDK_CLI]
    app = ["--app", "/x/py app.py", "--output", "cdk.out"]
    context = ["-c", "asya:region=eu-west-1", "-c", DELETE_DATA_CONTEXT]
    assert deploy == [*head, "deploy", *app, *context, "--require-approval", "never"]
    assert destroy == [*head, "destroy", *app, *context, "--force", "-v"]
    assert DELETE_DATA_CONTEXT == "asya:deleteData=true"


@pytest.mark.parametrize(
    ("answer", "confirmed"), [("shop\n", True), ("  shop  \n", True), ("yes\n", False), ("", False)]
)
def test_confirmation_is_the_namespace_typed(answer: str, confirmed: bool) -> None:
    err = io.StringIO()
    assert confirm_deletion("shop", stdin=io.StringIO(answer), err=err) is confirmed
    assert "asya-shop-tasks" in err.getvalue() and "cannot be undone" in err.getvalue()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "shop"
    scaffold(directory, namespace="shop")
    return directory


def test_destroy_delete_data_unconfirmed_changes_nothing(project: Path) -> None:
    err = io.StringIO()
    code = main(
        ["destroy", "--dir", str(project), "--delete-data"], stdin=io.StringIO("no\n"), stderr=err, stdout=io.StringIO()
    )
    assert code == 1
    assert "asya: destroy --delete-data: not confirmed; nothing was changed" in err.getvalue()


def test_yes_without_delete_data_is_refused(project: Path) -> None:
    err = io.StringIO()
    assert main(["destroy", "--dir", str(project), "--yes"], stderr=err, stdout=io.StringIO()) == 2
    assert "--yes only confirms --delete-data" in err.getvalue()


def test_only_destroy_takes_delete_data(project: Path) -> None:
    err = io.StringIO()
    assert main(["deploy", "--dir", str(project), "--delete-data"], stderr=err, stdout=io.StringIO()) == 2
    assert "unrecognized arguments: --delete-data" in err.getvalue()
