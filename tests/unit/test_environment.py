"""The function environments of ``asya_deploy.environment``: the one definition the CDK app and the local mode share."""

from __future__ import annotations

from typing import Any

import pytest

from asya.config import ActorConfig, ConfigError
from asya.manifest import Manifest, parse_manifest
from asya_deploy.environment import ReservedVariableError, actor_environment, check_env_map, gateway_environment

pytestmark = pytest.mark.unit


def _manifest(**actor: Any) -> Manifest:
    return parse_manifest(
        {
            "namespace": "shop",
            "defaults": {"env": {"LOG_LEVEL": "DEBUG"}},
            "actors": {"pay": {"handler": "billing.pay", "timeout": 2.5, **actor}},
            "crew": {"sink_hooks": ["pay"]},
            "flows": {"main": {"route": ["pay"]}},
        },
        base_dir="/srv/mesh",
    )


def _actors(manifest: Manifest) -> dict[str, Any]:
    return {actor.name: actor for actor in manifest.deployed_actors()}


def test_user_actor_environment_round_trips_through_actor_config() -> None:
    manifest = _manifest()
    env = actor_environment(manifest, _actors(manifest)["pay"], table="t", bucket="b")
    assert env == {
        "LOG_LEVEL": "DEBUG",
        "ASYA_NAMESPACE": "shop",
        "ASYA_ACTOR": "pay",
        "ASYA_HANDLER": "billing.pay",
        "ASYA_TABLE": "t",
        "ASYA_BUCKET": "b",
        "ASYA_ACTOR_TIMEOUT": "2.5",
        "ASYA_OFFLOAD_THRESHOLD_KB": "240",
        "ASYA_MAX_HOPS": "1000",
        "POWERTOOLS_SERVICE_NAME": "pay",  # the actor's own name (issue 26 item 7)
        "POWERTOOLS_METRICS_NAMESPACE": "Asya",
    }
    config = ActorConfig.from_env(env)
    assert (config.actor, config.handler, config.table, config.bucket) == ("pay", "billing.pay", "t", "b")
    assert (config.actor_timeout, config.code_dir, config.log_level) == (2.5, "", "DEBUG")


def test_code_dir_only_when_given_and_crew_without_handler() -> None:
    manifest = _manifest()
    actors = _actors(manifest)
    local = actor_environment(manifest, actors["pay"], table="t", bucket="b", code_dir=manifest.code_dir("pay"))
    assert local["ASYA_CODE_DIR"] == str(manifest.code_dir("pay"))
    sink = actor_environment(manifest, actors["x-sink"], table="t", bucket="b")
    assert "ASYA_HANDLER" not in sink
    assert sink["ASYA_SINK_HOOKS"] == "pay"  # P-SINK-6
    assert "ASYA_SINK_HOOKS" not in actor_environment(manifest, actors["x-sump"], table="t", bucket="b")


def test_p_man_2_resiliency_section_is_passed_as_compact_json() -> None:
    manifest = _manifest(resiliency={"policies": {"default": {"max_attempts": 3}}})
    env = actor_environment(manifest, _actors(manifest)["pay"], table="t", bucket="b")
    assert env["ASYA_RESILIENCY"].startswith('{"policies":{"default":{')


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("ASYA_TABLE", "is set by the deployment"),
        ("ASYA_MANIFEST", "is set by the deployment"),
        ("POWERTOOLS_SERVICE_NAME", "is set by the deployment"),
        ("POWERTOOLS_METRICS_NAMESPACE", "is set by the deployment"),
        ("AWS_REGION", "is reserved by AWS Lambda"),
        ("_HANDLER", "is reserved by AWS Lambda"),
    ],
)
def test_env_map_may_not_redefine_deployment_variables(key: str, reason: str) -> None:
    manifest = _manifest(env={key: "x"})
    actor = _actors(manifest)["pay"]
    with pytest.raises(ReservedVariableError, match=f"actors.pay.env.{key}: {key} {reason}"):
        check_env_map(actor)
    with pytest.raises(ReservedVariableError):
        actor_environment(manifest, actor, table="t", bucket="b")


@pytest.mark.parametrize("key", ["my-var", "1X", "A", "SPACE X"])
def test_env_names_lambda_would_refuse_are_refused_at_synthesis(key: str) -> None:
    actor = _actors(_manifest(env={key: "x"}))["pay"]
    with pytest.raises(ReservedVariableError, match=f"actors.pay.env.{key}: '{key}' is not a variable name"):
        check_env_map(actor)


def test_log_level_variables_are_the_users_and_powertools_log_level_wins() -> None:
    manifest = _manifest(env={"POWERTOOLS_LOG_LEVEL": "error"})
    env = actor_environment(manifest, _actors(manifest)["pay"], table="t", bucket="b")
    assert env["LOG_LEVEL"] == "DEBUG"
    assert ActorConfig.from_env(env).log_level == "ERROR"


def test_gateway_and_backstop_environment() -> None:
    assert gateway_environment(table="t", bucket="b", manifest_path="/var/task/manifest.json") == {
        "ASYA_TABLE": "t",
        "ASYA_BUCKET": "b",
        "ASYA_MANIFEST": "/var/task/manifest.json",
        "POWERTOOLS_SERVICE_NAME": "gateway",
        "POWERTOOLS_METRICS_NAMESPACE": "Asya",
    }
    backstop = gateway_environment(table="t", bucket="b", service="backstop")
    assert "ASYA_MANIFEST" not in backstop
    assert backstop["POWERTOOLS_SERVICE_NAME"] == "backstop"


def test_an_unknown_log_level_is_refused_naming_the_variable() -> None:
    manifest = _manifest(env={"POWERTOOLS_LOG_LEVEL": "verbose"})
    env = actor_environment(manifest, _actors(manifest)["pay"], table="t", bucket="b")
    with pytest.raises(
        ConfigError, match="POWERTOOLS_LOG_LEVEL must be DEBUG, INFO, WARNING, ERROR or CRITICAL, got 'verbose'"
    ):
        ActorConfig.from_env(env)


@pytest.mark.parametrize(
    ("checkpoints", "in_checkpoint"),
    [
        ({}, True),
        ({"expire_days": 400}, True),
        ({"expire_days": 30}, True),
        ({"transition_days": 1, "transition_class": "GLACIER_IR"}, True),
        ({"transition_days": 90, "transition_class": "DEEP_ARCHIVE"}, True),
        ({"expire_days": 7}, False),
        ({"transition_days": 10, "transition_class": "GLACIER"}, False),
    ],
)
def test_gw_data_10_x_sink_reads_results_from_checkpoints_only_when_they_outlive_the_task(
    checkpoints: dict[str, Any], in_checkpoint: bool
) -> None:
    """A checkpoint that may expire, or need a restore, before its task record does (30 days) cannot hold the task's
    result: x-sink is told to write the result item instead."""
    raw = {"namespace": "shop", "actors": {"pay": {"handler": "billing.pay"}}, "flows": {"main": {"route": ["pay"]}}}
    manifest = parse_manifest({**raw, "storage": {"checkpoints": checkpoints}}, base_dir="/srv/mesh")
    env = actor_environment(manifest, _actors(manifest)["x-sink"], table="t", bucket="b")
    assert ActorConfig.from_env(env).result_in_checkpoint is in_checkpoint
    assert ("ASYA_RESULT_IN_CHECKPOINT" in env) is not in_checkpoint


def test_p_proc_1_record_concurrency_reaches_the_config_and_sizes_the_lambda_timeout() -> None:
    manifest = _manifest(batch_size=10, record_concurrency=4, timeout=20)
    pay = _actors(manifest)["pay"]
    assert pay.lambda_timeout == 3 * 20 + 10  # 10 records, 4 at a time: three rounds
    assert pay.visibility_timeout == 70 + 60  # P-MAN-4: the timeout plus the throttle retry window
    env = actor_environment(manifest, pay, table="t", bucket="b")
    assert env["ASYA_RECORD_CONCURRENCY"] == "4"
    assert ActorConfig.from_env(env).record_concurrency == 4
    assert _actors(manifest)["x-sink"].record_concurrency == 1  # the crew runs its records one at a time
    assert "ASYA_RECORD_CONCURRENCY" not in actor_environment(
        manifest, _actors(manifest)["x-sink"], table="t", bucket="b"
    )
    for bad in ("0", "11", "2.5", "many"):
        with pytest.raises(ConfigError, match="ASYA_RECORD_CONCURRENCY"):
            ActorConfig.from_env({**env, "ASYA_RECORD_CONCURRENCY": bad})
