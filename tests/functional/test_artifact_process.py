"""The artifact mesh's function process (issue 24): one interpreter per function, isolated from the source tree,
invoked over its stdin/stdout like Lambda's runtime API, with Lambda's timeout and error reporting."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from asya_local.artifact.functions import FunctionPool
from asya_local.artifact.process import Credentials, FunctionError, FunctionProcess, lambda_environment
from asya_local.lambda_event import LambdaContext

pytestmark = pytest.mark.functional

_HANDLERS = """
import json, os, sys, time

def echo(event, context):
    print("this print goes to the log, not the channel")
    return {"event": event, "remaining": context.get_remaining_time_in_millis() > 0,
            "name": os.environ["AWS_LAMBDA_FUNCTION_NAME"], "path": sys.path[:2]}

def boom(event, context):
    raise ValueError("bad input")

def slow(event, context):
    time.sleep(30)

def imports_asya(event, context):
    import asya  # the source tree's package: not on this function's path
"""


def _context(timeout: float) -> LambdaContext:
    return LambdaContext(
        function_name="fn",
        invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:fn",
        memory_limit_in_mb=128,
        timeout_seconds=timeout,
        log_stream_name="s",
        monotonic=time.monotonic,
    )


def _process(tmp_path: Path, handler: str, *, timeout: float = 10) -> FunctionProcess:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "handlers.py").write_text(_HANDLERS)
    env = lambda_environment(
        variables={"MANIFEST": "/var/task/manifest.json"},
        function_name="fn",
        handler=handler,
        memory=128,
        region="us-east-1",
        code_dir=code,
        runtime_dir=tmp_path / "runtime",
        credentials=Credentials.new("fn"),
        endpoint_url="http://127.0.0.1:1",
    )
    process = FunctionProcess("fn", handler=handler, sys_path=[code, tmp_path / "runtime"], env=env, timeout=timeout)
    process.start()
    return process


def test_an_invocation_returns_the_handlers_result_and_prints_stay_off_the_channel(tmp_path: Path) -> None:
    process = _process(tmp_path, "handlers.echo")
    try:
        result = process.invoke({"a": 1}, _context(10))
        assert result["event"] == {"a": 1} and result["remaining"] is True
        assert result["name"] == "fn"
        assert result["path"][0] == str(tmp_path / "code")
        assert process.invoke({"b": 2}, _context(10))["event"] == {"b": 2}  # the same environment, warm
    finally:
        process.stop()


def test_a_handler_error_is_reported_as_lambda_reports_it(tmp_path: Path) -> None:
    process = _process(tmp_path, "handlers.boom")
    try:
        with pytest.raises(FunctionError) as raised:
            process.invoke({}, _context(10))
        assert (raised.value.error_type, raised.value.error_message) == ("ValueError", "bad input")
    finally:
        process.stop()


def test_past_its_timeout_the_process_is_replaced(tmp_path: Path) -> None:
    process = _process(tmp_path, "handlers.slow")
    try:
        first = process.pid
        with pytest.raises(FunctionError) as raised:
            process.invoke({}, _context(0.5))
        assert raised.value.error_type == "Sandbox.Timedout"
        with pytest.raises(FunctionError):
            process.invoke({}, _context(0.5))
        assert process.restarts == 1 and process.pid != first
    finally:
        process.stop()


def test_the_source_tree_is_not_importable_from_a_function(tmp_path: Path) -> None:
    process = _process(tmp_path, "handlers.imports_asya")
    try:
        with pytest.raises(FunctionError) as raised:
            process.invoke({}, _context(10))
        assert raised.value.error_type == "ModuleNotFoundError"
    finally:
        process.stop()


def test_an_import_error_is_reported_on_every_invocation(tmp_path: Path) -> None:
    process = _process(tmp_path, "missing_module.handler")
    try:
        assert process.init_error is not None
        with pytest.raises(FunctionError) as raised:
            process.invoke({}, _context(10))
        assert raised.value.error_type == "Runtime.ImportModuleError"
    finally:
        process.stop()


def test_lambda_environment_points_var_task_at_the_staged_code() -> None:
    env = lambda_environment(
        variables={"ASYA_MANIFEST": "/var/task/manifest.json", "AWS_LAMBDA_EXEC_WRAPPER": "/opt/bootstrap"},
        function_name="fn",
        handler="run.sh",
        memory=1024,
        region="eu-west-1",
        code_dir=Path("/x/asset.1"),
        runtime_dir=Path("/r"),
        credentials=Credentials("AKID", "s", "t"),
        endpoint_url="http://127.0.0.1:9",
    )
    assert env["ASYA_MANIFEST"] == "/x/asset.1/manifest.json"
    assert "AWS_LAMBDA_EXEC_WRAPPER" not in env
    assert env["AWS_REGION"] == env["AWS_DEFAULT_REGION"] == "eu-west-1"
    assert env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] == "1024" and env["_HANDLER"] == "run.sh"
    assert env["AWS_ACCESS_KEY_ID"] == "AKID" and env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"


def test_a_redeployed_pool_runs_the_new_code_and_retires_the_old_environments(tmp_path: Path) -> None:
    """``FunctionPool.redeploy`` (``ArtifactMesh.deploy_code``, as ``UpdateFunctionCode``): later invocations run the
    new code; an idle environment of the old code is stopped at once."""

    def factory(version: str) -> Callable[[], FunctionProcess]:
        code = tmp_path / version
        code.mkdir(exist_ok=True)
        (code / "handlers.py").write_text(f"def version(event, context):\n    return {version!r}\n")
        env = lambda_environment(
            variables={},
            function_name="fn",
            handler="handlers.version",
            memory=128,
            region="us-east-1",
            code_dir=code,
            runtime_dir=tmp_path / "runtime",
            credentials=Credentials.new("fn"),
            endpoint_url="http://127.0.0.1:1",
        )
        return lambda: FunctionProcess(
            "fn", handler="handlers.version", sys_path=[code, tmp_path / "runtime"], env=env, timeout=10
        )

    pool = FunctionPool("fn", factory("v1"))
    try:
        old = pool.start()
        assert pool.invoke({}, _context(10)) == "v1"
        pool.redeploy(factory("v2"))
        assert old.pid is None and pool.processes == []  # the idle v1 environment is gone
        assert pool.invoke({}, _context(10)) == "v2"
        assert len(pool.processes) == 1
    finally:
        pool.stop()
