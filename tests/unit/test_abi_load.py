"""Loading handlers (PROTOCOL 3.1: P-ABI-1 .. P-ABI-3) and error details (P-ERR-3)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from asya.abi import AbiState, Frame, Handler, HandlerError, error_details, load_handler
from asya.exceptions import HandlerLoadError

pytestmark = pytest.mark.unit

HANDLERS_DIR = str(Path(__file__).resolve().parents[1] / "handlers")


@pytest.fixture
def code_dir(monkeypatch: pytest.MonkeyPatch) -> str:
    """The test handler directory; sys.path is restored after the test (load_handler prepends code_dir)."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != HANDLERS_DIR])
    return HANDLERS_DIR


@pytest.fixture
def loaded() -> Iterator[list[Handler]]:
    handlers: list[Handler] = []
    yield handlers
    for handler in handlers:
        handler.close()


def _call(handler: Handler, payload: Any) -> list[Frame]:
    frames: list[Frame] = []
    handler.run(payload, AbiState(id="t1", curr="me"), on_frame=frames.append, on_fly=lambda _: None)
    return frames


def _load(spec: str, code_dir: str, loaded: list[Handler]) -> Handler:
    handler = load_handler(spec, code_dir=code_dir)
    loaded.append(handler)
    return handler


def test_p_abi_1_code_dir_is_prepended_once(code_dir: str) -> None:
    load_handler("abi_sample.echo", code_dir=code_dir)
    load_handler("abi_sample.echo", code_dir=code_dir)
    assert sys.path[0] == code_dir
    assert sys.path.count(code_dir) == 1


@pytest.mark.parametrize(
    ("spec", "kind"),
    [
        ("abi_sample.echo", "function"),
        ("abi_sample.with_default", "function"),
        ("abi_sample.async_echo", "async"),
        ("abi_sample.gen_echo", "generator"),
        ("abi_sample.agen_echo", "async_generator"),
        ("abi_sample.Counter.process", "function"),
        ("abi_sample.Counter.process_async", "async"),
        ("abi_sample.Counter.stream", "generator"),
        ("abi_sample.Counter.static", "function"),
        ("abi_pkg.handlers.hello", "function"),
        ("abi_pkg.handlers.Greeter.greet", "function"),
    ],
)
def test_p_abi_1_p_abi_4_loads_every_handler_kind(spec: str, kind: str, code_dir: str, loaded: list[Handler]) -> None:
    handler = _load(spec, code_dir, loaded)
    assert handler.kind == kind
    assert handler.spec == spec
    frames = _call(handler, "x")
    assert len(frames) == 1


def test_p_abi_1_longest_importable_prefix_is_the_module(code_dir: str, loaded: list[Handler]) -> None:
    assert _call(_load("abi_pkg.handlers.hello", code_dir, loaded), "w")[0].payload == {"hello": "w"}
    assert _call(_load("abi_pkg.handlers.Greeter.greet", code_dir, loaded), "w")[0].payload == {"greeting": "hi w"}


def test_p_abi_3_class_instantiated_once_and_shared_across_calls(code_dir: str, loaded: list[Handler]) -> None:
    load_handler("abi_sample.echo", code_dir=code_dir)  # imports the module
    sample = sys.modules["abi_sample"]
    before = sample.Counter.instances
    handler = _load("abi_sample.Counter.process", code_dir, loaded)
    first = _call(handler, {})[0].payload
    second = _call(handler, {})[0].payload
    assert sample.Counter.instances == before + 1
    assert (first["calls"], second["calls"]) == (1, 2)
    assert first["instance"] == second["instance"]


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "echo",
        "abi_sample.",
        ".abi_sample.echo",
        "abi_sample..echo",
        "abi-sample.echo",
        "1mod.f",
        "abi_sample.echo\n",
    ],
)
def test_p_abi_1_spec_must_match_the_grammar(spec: str, code_dir: str) -> None:
    with pytest.raises(HandlerLoadError, match=r"is not 'module\.function' or 'module\.Class\.method'"):
        load_handler(spec, code_dir=code_dir)


@pytest.mark.parametrize(
    ("spec", "needles"),
    [
        ("abi_missing_module.process", ["no module could be imported", "No module named 'abi_missing_module'"]),
        ("abi_missing_pkg.mod.Cls.method", ["abi_missing_pkg.mod.Cls", "abi_missing_pkg.mod ("]),
        ("abi_import_error.process", ["importing module 'abi_import_error'", "abi_definitely_not_installed"]),
        ("abi_raises_on_import.process", ["RuntimeError: configuration missing at import"]),
        ("abi_sample.missing", ["abi_sample has no attribute 'missing'"]),
        ("abi_sample.Counter.missing", ["instance of Counter has no attribute 'missing'"]),
        ("abi_sample.Missing.process", ["abi_sample has no attribute 'Missing'"]),
        ("abi_sample.echo.method", ["abi_sample.echo is a function, not a class"]),
        ("abi_sample.NeedsArgs.process", ["cannot be instantiated without arguments", "model_path"]),
        ("abi_sample.BrokenInit.process", ["instantiating abi_sample.BrokenInit() failed", "model file missing"]),
        ("abi_sample.NOT_CALLABLE", ["is not callable", "int"]),
        ("abi_sample.Counter.label", ["is not callable", "str"]),
        ("abi_sample.two_args", ["exactly one positional argument", "other"]),
        ("abi_sample.no_args", ["exactly one positional argument", "()"]),
        ("abi_sample.keyword_only", ["exactly one positional argument", "*, payload"]),
        ("abi_sample.Counter", ["names the class abi_sample.Counter", "module.Class.method"]),
        ("abi_sample.Counter.Inner", ["names the class abi_sample.Counter.Inner"]),
    ],
)
def test_p_abi_2_every_load_failure_is_a_handler_load_error(spec: str, needles: list[str], code_dir: str) -> None:
    with pytest.raises(HandlerLoadError) as info:
        load_handler(spec, code_dir=code_dir)
    message = str(info.value)
    assert spec in message
    for needle in needles:
        assert needle in message


def test_p_abi_2_a_failed_load_can_be_retried(code_dir: str, loaded: list[Handler]) -> None:
    for _ in range(2):
        with pytest.raises(HandlerLoadError, match="configuration missing"):
            load_handler("abi_raises_on_import.process", code_dir=code_dir)
    assert _call(_load("abi_sample.echo", code_dir, loaded), 1)[0].payload == 1


def test_p_err_3_custom_exception_in_a_module(code_dir: str, loaded: list[Handler]) -> None:
    handler = _load("abi_errors_mod.explode", code_dir, loaded)
    with pytest.raises(HandlerError) as info:
        _call(handler, "p")
    details = error_details(info.value.exc)
    assert details["message"] == "cannot handle 'p'"
    assert details["type"] == "abi_errors_mod.Boom"
    assert details["mro"] == ["ValueError", "Exception"]
    assert "in explode" in details["traceback"]
    assert details["traceback"].rstrip().endswith("abi_errors_mod.Boom: cannot handle 'p'")
    # a HandlerError is described by the exception it wraps
    assert error_details(info.value) == details


@pytest.mark.parametrize(
    ("exc", "type_name", "mro"),
    [
        (ValueError("v"), "ValueError", ["Exception"]),
        (KeyError("k"), "KeyError", ["LookupError", "Exception"]),
        (HandlerLoadError("h"), "asya.exceptions.HandlerLoadError", ["asya.exceptions.AsyaError", "Exception"]),
        (KeyboardInterrupt(), "KeyboardInterrupt", []),
    ],
)
def test_p_err_3_type_and_mro_leave_out_the_class_object_and_base_exception(
    exc: BaseException, type_name: str, mro: list[str]
) -> None:
    details = error_details(exc)
    assert details["type"] == type_name
    assert details["mro"] == mro
    assert details["message"] == str(exc)


def test_p_err_3_traceback_keeps_its_last_32_kib() -> None:
    try:
        raise RuntimeError("é" * 40_000 + "END")
    except RuntimeError as exc:
        details = error_details(exc)
    encoded = details["traceback"].encode("utf-8")
    assert 32 * 1024 - 3 <= len(encoded) <= 32 * 1024
    assert details["traceback"].endswith("END\n")
    assert "Traceback (most recent call last)" not in details["traceback"]


def test_p_err_3_short_traceback_is_complete() -> None:
    try:
        raise ValueError("short")
    except ValueError as exc:
        details = error_details(exc)
    assert details["traceback"].startswith("Traceback (most recent call last)")
    assert details["traceback"].endswith("ValueError: short\n")


def test_p_err_3_unprintable_exception_still_has_details() -> None:
    class Unprintable(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no str")

    details = error_details(Unprintable())
    assert details["message"] == "<unprintable Unprintable>"
    assert details["type"].endswith("Unprintable")


@pytest.mark.parametrize(
    ("spec", "hint"),
    [
        ("abi_sample.ecoh", " (did you mean 'echo'?)"),
        ("abi_sample.Counter.proces", " (did you mean 'process'?)"),
        ("abi_sample.zzzzzz", ""),
    ],
)
def test_p_abi_2_a_handler_attribute_typo_gets_the_manifests_did_you_mean(spec: str, hint: str, code_dir: str) -> None:
    """issue 28: ``orders.totl`` names the closest attribute, with the same helper as a manifest key typo."""
    with pytest.raises(HandlerLoadError) as info:
        load_handler(spec, code_dir=code_dir)
    name = spec.rsplit(".", 1)[1]
    assert str(info.value).endswith(f"has no attribute {name!r}{hint}")


def test_did_you_mean_is_the_one_helper_of_manifest_and_handler_errors() -> None:
    from asya.manifest import loader, model
    from asya.suggest import did_you_mean

    assert did_you_mean("totl", ["total", "count"]) == " (did you mean 'total'?)"
    assert did_you_mean("totl", []) == ""
    assert loader.did_you_mean is did_you_mean and model.did_you_mean is did_you_mean
