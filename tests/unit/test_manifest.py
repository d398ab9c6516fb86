"""Manifest validation (PROTOCOL section 2.2): every error names the field path and the bad value (P-MAN-1)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from asya import naming
from asya.exceptions import ManifestError
from asya.manifest import lambda_timeout, load_manifest, parse_manifest, visibility_timeout

pytestmark = pytest.mark.unit


def _manifest(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "namespace": "demo",
        "actors": {"prep": {"handler": "mod.prep"}, "infer": {"handler": "mod.Model.run"}},
        "flows": {"main": {"route": ["prep", "infer"]}},
    }
    base.update(overrides)
    return base


def _error(data: dict[str, Any]) -> str:
    with pytest.raises(ManifestError) as info:
        parse_manifest(data)
    return str(info.value)


def test_p_man_1_defaults_are_applied() -> None:
    manifest = parse_manifest(_manifest())
    prep = manifest.actors["prep"]
    assert (prep.memory, prep.timeout, prep.batch_size, prep.max_receive_count) == (512, 60.0, 1, 5)
    assert prep.max_concurrency is None
    assert prep.code == "functions/"
    flow = manifest.flows["main"]
    assert (flow.timeout, flow.progress, flow.mcp, flow.description) == (300.0, "hops", False, "")
    assert manifest.storage.offload_threshold_kb == 240
    assert manifest.gateway.auth.mode == "iam"


def test_p_man_2_defaults_replaced_by_actor_fields_and_env_merged() -> None:
    data = _manifest(defaults={"memory": 1024, "timeout": "2m", "env": {"A": "1", "B": "2"}})
    data["actors"]["prep"]["env"] = {"B": "actor", "C": "3"}
    data["actors"]["infer"]["memory"] = 2048
    manifest = parse_manifest(data)
    assert manifest.actors["prep"].memory == 1024
    assert manifest.actors["infer"].memory == 2048
    assert manifest.actors["prep"].timeout == 120.0
    assert manifest.actors["prep"].env == {"A": "1", "B": "actor", "C": "3"}
    assert manifest.actors["infer"].env == {"A": "1", "B": "2"}


@pytest.mark.parametrize(
    ("value", "seconds"), [(5, 5.0), (2.5, 2.5), ("250ms", 0.25), ("90s", 90.0), ("2m", 120.0), ("1h", 3600.0)]
)
def test_p_gen_4_durations(value: object, seconds: float) -> None:
    data = _manifest()
    data["flows"]["main"]["timeout"] = value if seconds >= 1 else 1
    data["actors"]["prep"]["resiliency"] = {"policies": {"default": {"initial_delay": value}}}
    manifest = parse_manifest(data)
    resiliency = manifest.actors["prep"].resiliency
    assert resiliency is not None
    assert resiliency.policies["default"].initial_delay == seconds


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["actors"]["prep"].update(memory=64), "actors.prep.memory"),
        (lambda d: d["actors"]["prep"].update(timeout=891), "actors.prep.timeout"),
        (lambda d: d["actors"]["prep"].update(timeout="ten"), "actors.prep.timeout: invalid duration 'ten'"),
        (lambda d: d["actors"]["prep"].update(batch_size=11), "actors.prep.batch_size"),
        (lambda d: d["actors"]["prep"].update(max_concurrency=1), "actors.prep.max_concurrency"),
        (lambda d: d["actors"]["prep"].update(max_receive_count=0), "actors.prep.max_receive_count"),
        (lambda d: d["actors"]["prep"].update(handler="prep"), "actors.prep.handler: must be 'module.function'"),
        (lambda d: d["actors"]["prep"].update(colour="red"), "actors.prep.colour"),
        (lambda d: d["actors"].update({"x-mine": {"handler": "m.f"}}), "reserved for crew"),
        (lambda d: d["actors"].update({"Bad": {"handler": "m.f"}}), "invalid actor name 'Bad'"),
        (lambda d: d.update(namespace="Demo"), "invalid namespace 'Demo'"),
        (lambda d: d["flows"]["main"].update(route=[]), "flows.main.route"),
        (lambda d: d["flows"]["main"].update(route=["prep", "nope"]), "flows.main.route[1]: unknown actor 'nope'"),
        (lambda d: d["flows"]["main"].update(route=["prep", "x-sink"]), "flows.main.route[1]: 'x-sink' cannot be"),
        (lambda d: d["flows"]["main"].update(timeout=0), "flows.main.timeout"),
        (lambda d: d["flows"]["main"].update(progress="all"), "flows.main.progress"),
        (lambda d: d["flows"].update({"Main": {"route": ["prep"]}}), "invalid flow name 'Main'"),
        (lambda d: d["flows"]["main"].update(input_schema={"type": 5}), "flows.main.input_schema: invalid JSON Schema"),
        (
            lambda d: d["flows"]["main"].update(mcp=True, input_schema={"type": "string"}),
            "an MCP flow needs an object schema",
        ),
        (
            lambda d: d["actors"]["prep"].update(resiliency={"policies": {"default": {"max_attempts": 0}}}),
            "actors.prep.resiliency.policies.default.max_attempts",
        ),
        (
            lambda d: d["actors"]["prep"].update(
                resiliency={"policies": {}, "rules": [{"errors": ["ValueError"], "policy": "fast"}]}
            ),
            "actors.prep.resiliency.rules[0].policy: names undeclared policy 'fast'; declared: none",
        ),
        (
            lambda d: d["actors"]["prep"].update(resiliency={"policies": {"default": {"on_exhausted": ["ghost"]}}}),
            "actors.prep.resiliency.policies.default.on_exhausted[0]: unknown actor 'ghost'",
        ),
        (lambda d: d.update(crew={"sink_hooks": ["ghost"]}), "crew.sink_hooks[0]: unknown actor 'ghost'"),
        (lambda d: d["storage"].update(offload_threshold_kb=2048), "storage.offload_threshold_kb"),
        (
            lambda d: d["actors"]["prep"].update(fan_in={"key": "/items"}),
            "fan-in actor 'prep' must be followed by its aggregator 'x-fanin-prep'",
        ),
        (
            lambda d: d["actors"]["prep"].update(fan_in={"key": "items"}),
            "actors.prep.fan_in.key: must be a JSON Pointer starting with '/' (got 'items')",
        ),
        (
            lambda d: d["actors"]["prep"].update(fan_in={"key": "/items", "aggregator": "x-sink"}),
            "actors.prep.fan_in.aggregator: must not be a fixed crew name",
        ),
        (
            lambda d: d["gateway"].update(auth={"mode": "api_key"}),
            "gateway.auth.api_key_secret: required when mode is 'api_key'",
        ),
        (
            lambda d: d["gateway"].update(auth={"mode": "jwt", "jwks_url": "https://idp.example/jwks", "issuer": "i"}),
            "gateway.auth.audience: required when mode is 'jwt'",
        ),
    ],
)
def test_p_man_1_invalid_manifests_name_field_and_value(mutate: Any, expected: str) -> None:
    """Among them P-RES-2: a resiliency rule naming an undeclared policy is a manifest error."""
    data = _manifest(storage={}, gateway={})
    mutate(data)
    assert expected in _error(data)


def test_p_name_5_long_names_rejected_with_queue_name_and_length() -> None:
    data = _manifest(namespace="n" * 40)
    data["actors"] = {"a" * 36: {"handler": "m.f"}}
    data["flows"] = {}
    message = _error(data)
    assert "over the SQS limit of 80" in message
    assert "asya-" + "n" * 40 in message


def test_p_name_5_crew_queue_names_are_checked_too() -> None:
    message = _error({"namespace": "n" * 68, "actors": {}})
    assert "x-sink" in message


def test_p_man_3_aggregators_and_x_pause_are_routable() -> None:
    data = _manifest()
    data["actors"]["prep"]["fan_in"] = {"key": "/items"}
    data["flows"]["main"]["route"] = ["prep", "infer", "x-fanin-prep", "x-pause"]
    manifest = parse_manifest(data)
    assert manifest.aggregator_of("prep") == "x-fanin-prep"


def test_p_fanin_1_the_fan_in_declaration_deploys_its_aggregator_as_crew() -> None:
    """P-FANIN-1: the aggregator (default ``x-fanin-{actor}``, or the declared name, once when shared) is a crew actor
    of the deployment, and the fan-in actor carries its resolved declaration (``ASYA_FAN_IN``)."""
    data = _manifest()
    data["actors"]["prep"]["fan_in"] = {"key": "/items"}
    data["actors"]["infer"]["fan_in"] = {"key": "/more", "aggregator": "x-merge"}
    data["flows"]["main"]["route"] = ["prep", "infer", "x-fanin-prep", "x-merge"]
    deployed = {a.name: a for a in parse_manifest(data).deployed_actors()}
    assert list(deployed) == ["prep", "infer", naming.SINK, naming.SUMP, "x-fanin-prep", "x-merge"]
    assert deployed["x-fanin-prep"].crew and deployed["x-merge"].crew
    assert deployed["prep"].fan_in is not None and deployed["prep"].fan_in.aggregator == "x-fanin-prep"
    assert naming.entry_point("x-merge") == naming.AGGREGATOR_ENTRY_POINT


def test_p_man_4_lambda_and_visibility_timeouts() -> None:
    assert lambda_timeout(1, 60) == 70
    assert lambda_timeout(10, 30) == 310
    assert lambda_timeout(10, 890) == 900
    assert lambda_timeout(2, 0.5) == 11
    assert visibility_timeout(70) == 420
    assert visibility_timeout(900) == 5400


def test_deployed_actors_include_crew_and_resolve_code_dir(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "asya.yaml"
    path.write_text("namespace: t\nactors:\n  prep:\n    handler: mod.prep\n    code: ../actors\n", encoding="utf-8")
    manifest = load_manifest(path)
    deployed = {actor.name: actor for actor in manifest.deployed_actors()}
    assert list(deployed) == ["prep", "x-sink", "x-sump"]
    assert deployed["prep"].code_dir == (tmp_path / "actors").resolve()
    assert deployed["x-sink"].crew and deployed["x-sink"].handler is None


def test_load_manifest_errors_are_readable(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="manifest not found"):
        load_manifest(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("namespace: [unclosed\n", encoding="utf-8")
    with pytest.raises(ManifestError, match="invalid YAML"):
        load_manifest(bad)
    bad.write_text("- just a list\n", encoding="utf-8")
    with pytest.raises(ManifestError, match="must be a mapping"):
        load_manifest(bad)


def test_crew_targets_lists_every_place_that_names_crew() -> None:
    data = _manifest(crew={"sink_hooks": ["infer", "x-pause"]})
    data["actors"]["prep"]["fan_in"] = {"key": "/items"}
    data["actors"]["infer"]["resiliency"] = {
        "policies": {"default": {"max_attempts": 2, "on_exhausted": ["x-pause"]}},
    }
    data["flows"]["main"]["route"] = ["prep", "infer", "x-fanin-prep", "x-pause"]
    manifest = parse_manifest(data)
    assert manifest.crew_targets() == [
        ("flows.main.route[2]", "x-fanin-prep"),
        ("flows.main.route[3]", "x-pause"),
        ("actors.infer.resiliency.policies.default.on_exhausted[0]", "x-pause"),
        ("crew.sink_hooks[1]", "x-pause"),
    ]
    # fan-in aggregators (P-FANIN-1) and x-pause (P-PAUSE-1) are deployable
    assert naming.undeployed_crew(manifest.crew_targets()) is None
    assert naming.undeployed_crew([("crew.sink_hooks[0]", "x-deadline")]) == (
        "crew.sink_hooks[0]: crew actor 'x-deadline' is not available in this release "
        "(deployable crew: x-pause, x-resume, x-sink, x-sump)"
    )
    assert naming.undeployed_crew([]) is None
    assert parse_manifest(_manifest()).crew_targets() == []


def test_p_pause_1_a_manifest_naming_x_pause_deploys_x_pause_and_x_resume() -> None:
    plain = parse_manifest(_manifest())
    assert [a.name for a in plain.deployed_actors() if a.crew] == ["x-sink", "x-sump"]
    data = _manifest()
    data["flows"]["main"]["route"] = ["prep", "x-pause", "infer"]
    pausing = parse_manifest(data)
    assert [a.name for a in pausing.deployed_actors() if a.crew] == ["x-sink", "x-sump", "x-pause", "x-resume"]


def test_a_key_repeated_in_the_yaml_is_an_error_not_the_last_one_winning(tmp_path: Path) -> None:
    path = tmp_path / "asya.yaml"
    path.write_text(
        "namespace: demo\nactors:\n  prep:\n    handler: m.a\n  prep:\n    handler: m.b\n", encoding="utf-8"
    )
    with pytest.raises(ManifestError, match=r"asya\.yaml: invalid YAML: duplicate key 'prep' \(line 5, column 3\)"):
        load_manifest(path)


def test_a_manifest_that_is_not_utf8_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "asya.yaml"
    path.write_bytes(b"namespace: d\xe9mo\n")
    with pytest.raises(ManifestError, match=r"asya\.yaml: not UTF-8 text \(byte 0xe9 at offset 12\)"):
        load_manifest(path)


def test_missing_code_directory_is_named(tmp_path: Path) -> None:
    manifest = parse_manifest(_manifest(), base_dir=tmp_path)
    problem = manifest.missing_code_dir()
    assert problem is not None and problem.startswith("actors.") and "does not exist" in problem
    (tmp_path / "functions").mkdir()
    assert parse_manifest(_manifest(), base_dir=tmp_path).missing_code_dir() is None


def test_an_unknown_key_is_named_with_the_closest_known_one() -> None:
    data = _manifest()
    data["actor"] = data.pop("actors")
    assert "actor: unknown key (did you mean 'actors'?)" in _error(data)
    data = _manifest(actors={"prep": {"handler": "mod.prep", "batchsize": 3}})
    assert "actors.prep.batchsize: unknown key (did you mean 'batch_size'?)" in _error(data)
    # keys of ActorSpec, a subclass of ActorSettings, are known too
    data = _manifest(actors={"prep": {"handlr": "mod.prep"}})
    assert "actors.prep.handlr: unknown key (did you mean 'handler'?)" in _error(data)


@pytest.mark.parametrize("field", ["callback_url", "auth.jwks_url"])
def test_gw_gen_9_gateway_urls_must_be_absolute_http_urls(field: str) -> None:
    gateway: dict[str, Any] = {"callback_url": "not a url"}
    if field == "auth.jwks_url":
        gateway = {"auth": {"mode": "jwt", "jwks_url": "keys.json", "issuer": "i", "audience": "a"}}
    assert f"gateway.{field}: must be an absolute http(s) URL" in _error(_manifest(gateway=gateway))


def test_an_empty_manifest_says_so(tmp_path: Path) -> None:
    path = tmp_path / "asya.yaml"
    path.write_text("# nothing yet\n", encoding="utf-8")
    with pytest.raises(ManifestError, match=r"asya\.yaml: the manifest is empty"):
        load_manifest(path)


@pytest.mark.parametrize(
    ("defaults", "line"),
    [
        ({"batch_size": 50}, "defaults.batch_size: Input should be less than or equal to 10 (got 50)"),
        ({"memroy": 256}, "defaults.memroy: unknown key (did you mean 'memory'?)"),
    ],
)
def test_p_man_1_a_bad_default_is_reported_once_under_defaults(defaults: dict[str, Any], line: str) -> None:
    lines = _error(_manifest(defaults=defaults)).splitlines()[1:]
    assert [entry.strip() for entry in lines] == [line]


def test_p_gen_4_a_duration_out_of_range_says_what_it_came_to() -> None:
    data = _manifest(actors={"prep": {"handler": "mod.prep", "timeout": "20m"}})
    assert "actors.prep.timeout: Input should be less than or equal to 890 seconds (got '20m' = 1200 s)" in _error(data)
    data = _manifest(actors={"prep": {"handler": "mod.prep", "max_receive_count": 5000}})
    assert "actors.prep.max_receive_count: Input should be less than or equal to 1000 (got 5000)" in _error(data)


@pytest.mark.parametrize(
    ("actor", "line"),
    [
        ({"batch_size": True}, "actors.prep.batch_size: Input should be a valid integer (got True)"),
        ({"batch_size": "10"}, "actors.prep.batch_size: Input should be a valid integer (got '10')"),
        ({"memory": 512.5}, "actors.prep.memory: Input should be a valid integer (got 512.5)"),
    ],
)
def test_p_man_1_numbers_are_not_coerced_from_booleans_or_text(actor: dict[str, Any], line: str) -> None:
    assert line in _error(_manifest(actors={"prep": {"handler": "mod.prep", **actor}}))


def test_flags_are_not_coerced_from_text() -> None:
    data = _manifest(flows={"main": {"route": ["prep"], "mcp": "yes"}})
    assert "flows.main.mcp: Input should be a valid boolean (got 'yes')" in _error(data)


def test_p_name_4_a_namespace_too_long_for_the_crew_queues_is_blamed_on_the_namespace() -> None:
    message = _error(_manifest(namespace="n" * 70))
    assert f"namespace: {'n' * 70!r} is too long: the crew queue 'asya-{'n' * 70}-x-sink-dlq' would be 86" in message
    assert "actors.x-sink" not in message


def test_a_check_of_a_whole_object_does_not_dump_it() -> None:
    message = _error(_manifest(actors={"prep": {"handler": "main", "env": {"A": "b"}}}))
    line = next(entry for entry in message.splitlines() if "handler" in entry)
    assert line.strip() == "actors.prep.handler: must be 'module.function' or 'module.Class.method' (got 'main')"
    assert "'env'" not in line


def test_p_trace_3_tracing_is_off_by_default_for_actors_and_crew() -> None:
    manifest = parse_manifest(_manifest())
    assert {a.name: a.tracing for a in manifest.deployed_actors()} == {
        "prep": False,
        "infer": False,
        naming.SINK: False,
        naming.SUMP: False,
    }


def test_p_trace_3_defaults_tracing_covers_every_actor_and_the_crew_unless_an_actor_opts_out() -> None:
    data = _manifest(defaults={"tracing": True})
    data["actors"]["infer"]["tracing"] = False
    manifest = parse_manifest(data)
    assert {a.name: a.tracing for a in manifest.deployed_actors()} == {
        "prep": True,
        "infer": False,
        naming.SINK: True,
        naming.SUMP: True,
    }


def test_p_trace_3_an_actor_may_trace_alone_without_the_crew() -> None:
    data = _manifest()
    data["actors"]["prep"]["tracing"] = True
    traced = {a.name for a in parse_manifest(data).deployed_actors() if a.tracing}
    assert traced == {"prep"}


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            _manifest(actors={"prep": {"handler": "mod.prep", "tracing": "yes"}}, flows={}),
            "actors.prep.tracing: Input should be a valid boolean (got 'yes')",
        ),
        (
            _manifest(defaults={"tracing": 1}),
            "defaults.tracing: Input should be a valid boolean (got 1)",
        ),
    ],
)
def test_p_man_1_tracing_must_be_a_boolean(data: dict[str, Any], line: str) -> None:
    error = _error(data)
    assert line in error
    assert error.count("tracing") == 1  # a bad default is reported once, not once per actor


def test_p_trace_3_tracing_sets_asya_tracing_in_the_actor_environment() -> None:
    from asya.config import ActorConfig
    from asya_deploy.environment import actor_environment

    data = _manifest()
    data["actors"]["prep"]["tracing"] = True
    actors = {a.name: a for a in parse_manifest(data).deployed_actors()}
    manifest = parse_manifest(data)
    traced = actor_environment(manifest, actors["prep"], table="t", bucket="b")
    untraced = actor_environment(manifest, actors["infer"], table="t", bucket="b")
    assert traced["ASYA_TRACING"] == "true"
    assert ActorConfig.from_env(traced).tracing is True
    assert "ASYA_TRACING" not in untraced
    assert ActorConfig.from_env(untraced).tracing is False
