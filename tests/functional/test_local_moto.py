"""moto's server in its child process, clients pointed at it by endpoint only, the ESM emulator over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from asya.config import ActorConfig
from asya.manifest import Manifest
from asya_deploy.environment import actor_environment
from asya_local._moto_child import (
    dynamodb_one_request_at_a_time,
    lex_condition_expressions_once,
    list_handler_methods_once,
    list_moto_modules_once,
    parse_update_expressions_once,
    pick_serialized_keys_once,
    query_reads_one_partition,
    retention_from_the_queue,
)
from asya_local.esm import EsmConfig, EventSourceMapping
from asya_local.exceptions import LocalModeError
from asya_local.lambda_event import LambdaContext
from asya_local.mesh import LocalMesh, runtime_entry_point, runtime_environment
from asya_local.moto_server import AwsClients, MotoServer
from asya_local.provision import provision

pytestmark = pytest.mark.functional


@pytest.fixture
def server() -> Iterator[MotoServer]:
    with MotoServer() as running:
        yield running


def test_server_binds_loopback_on_a_free_port(server: MotoServer) -> None:
    assert server.endpoint_url.startswith("http://127.0.0.1:")
    assert server.port > 0
    assert httpx.get(f"{server.endpoint_url}/moto-api/").status_code == 200


def test_clients_talk_to_the_server_by_endpoint_only(server: MotoServer) -> None:
    clients = server.clients()
    assert clients.endpoint_url == server.endpoint_url
    bucket = f"b-{uuid.uuid4().hex[:12]}"
    clients.s3.create_bucket(Bucket=bucket)
    clients.s3.put_object(Bucket=bucket, Key="k/one.json", Body=b"{}")
    assert clients.s3.head_object(Bucket=bucket, Key="k/one.json")["ContentLength"] == 2
    # a second, independent set of clients sees the same state: the server is the shared store
    other = server.clients()
    assert other.s3.get_object(Bucket=bucket, Key="k/one.json")["Body"].read() == b"{}"


def test_moto_s_package_listing_is_taken_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server child applies this at start-up; here it is applied to this process's moto (same answer)."""
    from moto import backends

    list_moto_modules_once()
    listings: list[str] = []
    real_listdir = os.listdir

    def counting_listdir(path: Any = ".") -> list[str]:
        if sys._getframe(1).f_code.co_filename == backends.__file__:  # moto's own listing, not botocore's loader
            listings.append(os.fspath(path))
        return real_listdir(path)

    monkeypatch.setattr(os, "listdir", counting_listdir)
    first = list(backends.list_of_moto_modules())
    list_moto_modules_once()  # idempotent: still the one listing
    assert list(backends.list_of_moto_modules()) == first
    assert listings == []
    # the same answer as moto's own listing: every service package, nothing else
    package = os.path.dirname(backends.__file__)
    expected = sorted(e for e in real_listdir(package) if os.path.isdir(os.path.join(package, e)) and e[:2] != "__")
    assert first == expected
    assert {"sqs", "dynamodb", "s3"} <= set(expected)


def test_receive_checks_retention_from_the_queue_with_moto_s_answers(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server child's replacement gives moto's answer on both sides of the retention period, without computing
    the queue's attributes (which walk every message in the queue)."""
    from moto.sqs.models import SQSBackend, sqs_backends

    original = SQSBackend.is_message_valid_based_on_retention_period
    monkeypatch.setattr(SQSBackend, "is_message_valid_based_on_retention_period", original)  # restored afterwards
    url = aws.sqs.create_queue(QueueName="retained", Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
    aws.sqs.send_message(QueueUrl=url, MessageBody="fresh")
    aws.sqs.send_message(QueueUrl=url, MessageBody="stale")
    backend = sqs_backends["123456789012"]["us-east-1"]
    fresh, stale = backend.get_queue("retained")._messages
    stale.sent_timestamp -= 61_000
    expected = [original(backend, "retained", m) for m in (fresh, stale)]
    assert expected == [True, False]

    retention_from_the_queue()
    attributes_read: list[str] = []
    monkeypatch.setattr(SQSBackend, "get_queue_attributes", lambda *a, **k: attributes_read.append("x"))
    assert [backend.is_message_valid_based_on_retention_period("retained", m) for m in (fresh, stale)] == expected
    assert attributes_read == []


def test_dynamodb_requests_are_served_one_at_a_time(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server child's lock: while an ``UpdateItem`` is being applied, a read of the item waits for it, so it sees
    the whole update or none of it (DynamoDB's single-item atomicity), never a half-applied one."""
    from moto.dynamodb.parsing.executors import UpdateExpressionExecutor
    from moto.dynamodb.responses import DynamoHandler

    monkeypatch.setattr(DynamoHandler, "call_action", DynamoHandler.call_action)  # restored afterwards
    dynamodb_one_request_at_a_time()
    dynamodb_one_request_at_a_time()  # idempotent: one lock, not two
    applying, release = threading.Event(), threading.Event()
    execute = UpdateExpressionExecutor.execute

    def paused_execute(self: Any, *args: Any, **kwargs: Any) -> None:
        if not applying.is_set():  # the outermost call, before any clause is applied
            applying.set()
            assert release.wait(10)
        execute(self, *args, **kwargs)

    monkeypatch.setattr(UpdateExpressionExecutor, "execute", paused_execute)
    aws.dynamodb.create_table(
        TableName="atomic",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    key = {"pk": {"S": "k"}}
    aws.dynamodb.put_item(TableName="atomic", Item={**key, "a": {"N": "0"}, "b": {"N": "0"}})
    update = threading.Thread(
        target=aws.dynamodb.update_item,
        kwargs={
            "TableName": "atomic",
            "Key": key,
            "UpdateExpression": "SET a = :v, b = :v",
            "ExpressionAttributeValues": {":v": {"N": "1"}},
        },
    )
    update.start()
    assert applying.wait(10)
    seen: list[dict[str, Any]] = []
    read = threading.Thread(target=lambda: seen.append(aws.dynamodb.get_item(TableName="atomic", Key=key)["Item"]))
    read.start()
    read.join(0.5)
    assert read.is_alive() and seen == []  # waiting for the update, not reading around it
    release.set()
    update.join(10)
    read.join(10)
    assert (seen[0]["a"], seen[0]["b"]) == ({"N": "1"}, {"N": "1"})


def _task_table(aws: Any, name: str) -> None:
    aws.dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
            {"AttributeName": "gpk", "AttributeType": "S"},
            {"AttributeName": "gsk", "AttributeType": "S"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_g",
                "KeySchema": [
                    {"AttributeName": "gpk", "KeyType": "HASH"},
                    {"AttributeName": "gsk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )


def _answers(call: Any, **kwargs: Any) -> Any:
    """A response without its metadata, or the error it raised (in-process moto lets its own bugs through too)."""
    from botocore.exceptions import ClientError

    try:
        response: dict[str, Any] = call(**kwargs)
    except ClientError as error:
        return ("error", error.response["Error"]["Code"], error.response["Error"]["Message"])
    except Exception as error:
        return ("raised", type(error).__name__, str(error))
    response.pop("ResponseMetadata", None)
    return response


_NESTED = {
    "M": {
        "s": {"S": "text"},
        "n": {"N": "1.50"},
        "l": {"L": [{"S": "a"}, {"N": "2"}, {"BOOL": False}, {"NULL": True}, {"M": {"x": {"SS": ["p", "q"]}}}]},
        "b": {"B": b"\x00\x01"},
        "ns": {"NS": ["1", "2"]},
    }
}


def _update_scenario(aws: Any, table: str) -> str:
    """The mesh's kind of conditional updates, accepted and refused, with placeholders, and some moto refuses."""
    _task_table(aws, table)
    key = {"pk": {"S": "TASK#1"}, "sk": {"S": "TASK"}}
    put = {**key, "status": {"S": "pending"}, "last_seq": {"N": "1"}, "data": _NESTED}
    answers = [
        _answers(aws.dynamodb.put_item, TableName=table, Item=put, ConditionExpression="attribute_not_exists(pk)")
    ]
    update: dict[str, Any] = {
        "TableName": table,
        "Key": key,
        "UpdateExpression": "SET #status = :status, last_seq = last_seq + :one REMOVE #data",
        "ConditionExpression": "(#status IN (:pending, :running)) AND (begins_with(sk, :t))",
        "ExpressionAttributeNames": {"#status": "status", "#data": "data"},
        "ExpressionAttributeValues": {
            ":status": {"S": "running"},
            ":one": {"N": "1"},
            ":pending": {"S": "pending"},
            ":running": {"S": "running"},
            ":t": {"S": "TA"},
        },
        "ReturnValues": "ALL_NEW",
        "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
    }
    answers.append(_answers(aws.dynamodb.update_item, **update))
    answers.append(_answers(aws.dynamodb.update_item, **update))  # the same texts again, the item changed
    refused = {**update, "ExpressionAttributeValues": {**update["ExpressionAttributeValues"], ":t": {"S": "X"}}}
    answers.append(_answers(aws.dynamodb.update_item, **refused))
    answers.append(_answers(aws.dynamodb.update_item, **{**update, "UpdateExpression": "SET #status = :status SET"}))
    for _ in range(2):
        answers.append(_answers(aws.dynamodb.update_item, **{**update, "ConditionExpression": "#status = :status ?"}))
    answers.append(_answers(aws.dynamodb.update_item, **{**update, "UpdateExpression": "SET pk = :status"}))
    answers.append(_answers(aws.dynamodb.get_item, TableName=table, Key=key, ConsistentRead=True))
    return repr(answers).replace(table, "<table>")


def _tree(node: Any) -> Any:
    """A parsed update expression as nested tuples, to compare trees by value."""
    children = getattr(node, "children", None)
    if children is None:
        return repr(node)
    return (type(node).__name__, tuple(_tree(child) for child in children))


def test_update_and_condition_expressions_are_parsed_once_with_moto_s_answers(
    aws: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same answers, errors included, as moto parsing every time; the tree shared between requests is left as
    parsed (moto's handler only reads it, its validator works on a copy)."""
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.dynamodb.parsing import expressions
    from moto.dynamodb.parsing.tokens import ExpressionTokenizer

    parser: Any = vars(expressions)["UpdateExpressionParser"]
    monkeypatch.setattr(parser, "make", vars(parser)["make"])  # restored afterwards
    lex = ConditionExpressionParser._lex_condition_expression
    monkeypatch.setattr(ConditionExpressionParser, "_lex_condition_expression", lex)
    expected = _update_scenario(aws, "moto-s-own")

    parse_update_expressions_once()
    parse_update_expressions_once()  # idempotent
    lex_condition_expressions_once()
    lex_condition_expressions_once()
    tokenized: list[str] = []
    make_list = ExpressionTokenizer.make_list

    def counted_make_list(text: str) -> Any:
        tokenized.append(text)
        return make_list(text)

    monkeypatch.setattr(ExpressionTokenizer, "make_list", counted_make_list)
    lexed: list[str] = []

    def counted_lex(self: ConditionExpressionParser) -> Any:
        lexed.append(str(self.condition_expression))
        return lex(self)

    monkeypatch.setattr(ConditionExpressionParser, "_lex_condition_expression", counted_lex)
    lex_condition_expressions_once()  # over the counting one, to count what reaches moto's lexer
    assert _update_scenario(aws, "adjusted") == expected
    text = "SET #status = :status, last_seq = last_seq + :one REMOVE #data"
    assert tokenized.count(text) == 1
    assert lexed.count("(#status IN (:pending, :running)) AND (begins_with(sk, :t))") == 1
    assert lexed.count("#status = :status ?") == 2  # a text that does not lex is lexed (and refused) each time
    # the shared tree is still the tree moto's make builds afresh (its own body: tokenize, then parse)
    assert _tree(parser.make(text)) == _tree(parser(make_list(text)).parse())


def _query_scenario(aws: Any, table: str) -> str:
    _task_table(aws, table)
    for task in range(6):
        for seq in (3, 1, 2, 10):
            item = {"pk": {"S": f"TASK#{task}"}, "sk": {"S": f"EV#{seq:03d}"}, "n": {"N": str(seq)}}
            if seq != 2:  # not every item is in the index
                item |= {"gpk": {"S": f"SHARD#{task % 2}"}, "gsk": {"S": f"2026-01-0{seq % 9}"}}
            aws.dynamodb.put_item(TableName=table, Item=item)
    values = {":pk": {"S": "TASK#3"}, ":from": {"S": "EV#002"}, ":to": {"S": "EV#999"}}
    answers = [
        _answers(
            aws.dynamodb.query, TableName=table, KeyConditionExpression="pk = :pk", ExpressionAttributeValues=values
        )
        for values in ({":pk": {"S": "TASK#3"}}, {":pk": {"S": "TASK#none"}})
    ]
    ranged = "pk = :pk AND sk BETWEEN :from AND :to"
    for extra in ({}, {"ScanIndexForward": False}, {"Limit": 2}, {"FilterExpression": "n > :from2"}):
        request = {"TableName": table, "KeyConditionExpression": ranged, "ExpressionAttributeValues": values, **extra}
        if "FilterExpression" in extra:
            request["ExpressionAttributeValues"] = {**values, ":from2": {"N": "2"}}
        page = _answers(aws.dynamodb.query, **request)
        answers.append(page)
        if "LastEvaluatedKey" in page:
            answers.append(_answers(aws.dynamodb.query, **request, ExclusiveStartKey=page["LastEvaluatedKey"]))
    index = {
        "TableName": table,
        "IndexName": "by_g",
        "KeyConditionExpression": "gpk = :g AND gsk <= :due",
        "ExpressionAttributeValues": {":g": {"S": "SHARD#1"}, ":due": {"S": "2026-01-05"}},
    }
    answers.append(_answers(aws.dynamodb.query, **index))
    answers.append(_answers(aws.dynamodb.query, **index, Limit=2, ScanIndexForward=False))
    answers.append(_answers(aws.dynamodb.scan, TableName=table))  # scans still take every item, sorted
    return repr(answers).replace(table, "<table>")


def test_query_reads_one_partition_with_moto_s_answers(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Queries on the table's key and on an index, paged, reversed and filtered, answer as moto's own full walk."""
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.table import Table

    monkeypatch.setattr(Table, "query", Table.query)  # restored afterwards
    monkeypatch.setattr(Table, "all_items", Table.all_items)
    expected = _query_scenario(aws, "moto-s-own")
    walks: list[str] = []
    every_item = Table.all_items

    def counted_walk(self: Table) -> Any:
        walks.append(self.name)
        return every_item(self)

    monkeypatch.setattr(Table, "all_items", counted_walk)  # the adjustment wraps this one
    query_reads_one_partition()
    query_reads_one_partition()  # idempotent
    aws.dynamodb.query(
        TableName="moto-s-own", KeyConditionExpression="pk = :pk", ExpressionAttributeValues={":pk": {"S": "TASK#3"}}
    )
    assert walks == []  # a query on the table's key took its partition, not the whole table
    aws.dynamodb.scan(TableName="moto-s-own")
    assert walks == ["moto-s-own"]  # a scan still walks every item (so the count above could have failed)
    assert _query_scenario(aws, "adjusted") == expected
    stored = dynamodb_backends["123456789012"]["us-east-1"].get_table("adjusted").items
    assert len(stored) == 6  # querying an absent partition added no key to the defaultdict


def test_serialized_keys_are_picked_once_with_moto_s_answers(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every response shape the mesh sees (nested items, lists, errors, SQS, S3) serializes as with moto's picker."""
    from moto.core.serialize import AttributePicker, ResponseSerializer

    monkeypatch.setattr(ResponseSerializer, "get_value", ResponseSerializer.get_value)  # restored afterwards

    def scenario(suffix: str) -> list[Any]:
        answers: list[Any] = [_update_scenario(aws, f"table-{suffix}"), _query_scenario(aws, f"query-{suffix}")]
        answers.append(_answers(aws.dynamodb.describe_table, TableName=f"query-{suffix}")["Table"]["KeySchema"])
        url = aws.sqs.create_queue(QueueName=f"q-{suffix}", Attributes={"VisibilityTimeout": "5"})["QueueUrl"]
        aws.sqs.send_message_batch(
            QueueUrl=url,
            Entries=[
                {"Id": "a", "MessageBody": "x", "MessageAttributes": {"k": {"DataType": "String", "StringValue": "v"}}}
            ],
        )
        got = aws.sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"], AttributeNames=["All"])["Messages"]
        answers.append([(m["Body"], m["MessageAttributes"], sorted(m["Attributes"])) for m in got])
        answers.append(_answers(aws.sqs.get_queue_attributes, QueueUrl=url, AttributeNames=["VisibilityTimeout"]))
        return answers

    expected = scenario("own")
    pick_serialized_keys_once()
    pick_serialized_keys_once()  # idempotent
    picked: list[str] = []
    keys_of = AttributePicker.get_possible_keys

    def counted_keys(self: AttributePicker, context: Any) -> Any:
        picked.append(context.key)
        return keys_of(self, context)

    monkeypatch.setattr(AttributePicker, "get_possible_keys", counted_keys)
    assert scenario("adjusted") == expected
    again = len(picked)
    assert again > 0  # the first pass went through moto's picker
    scenario("again")
    assert len(picked) == again  # every name found the first time


def test_handler_methods_are_listed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    import inspect

    from moto.core import responses, utils
    from moto.dynamodb.responses import DynamoHandler
    from moto.sqs.responses import SQSResponse

    monkeypatch.setattr(responses, "method_names_from_class", utils.method_names_from_class)  # restored afterwards
    list_handler_methods_once()
    list_handler_methods_once()  # idempotent
    listed = vars(responses)["method_names_from_class"]
    for handler in (DynamoHandler, SQSResponse):
        assert listed(handler) == utils.method_names_from_class(handler)
    monkeypatch.setattr(inspect, "getmembers", lambda *a, **k: pytest.fail("listed again"))  # moto's own listing
    assert "update_item" in listed(DynamoHandler)


def test_each_server_has_its_own_state_and_loses_it_on_stop() -> None:
    with MotoServer() as one, MotoServer() as two:
        one.clients().sqs.create_queue(QueueName="only-in-one")
        assert one.pid != two.pid
        assert two.clients().sqs.list_queues().get("QueueUrls", []) == []
        assert len(one.clients().sqs.list_queues()["QueueUrls"]) == 1
    with MotoServer() as again:
        assert again.clients().sqs.list_queues().get("QueueUrls", []) == []


def test_ctrl_c_reaching_the_server_leaves_it_serving(server: MotoServer) -> None:
    """A terminal's Ctrl-C signals the whole process group; the mesh drains its pollers against moto, then stops it."""
    os.kill(server.pid, signal.SIGINT)
    time.sleep(0.3)
    assert httpx.get(f"{server.endpoint_url}/moto-api/").status_code == 200


def test_the_server_exits_with_the_process_that_started_it() -> None:
    """Even on SIGKILL, where no stop() runs: no moto is left behind holding its port."""
    with subprocess.Popen(
        [sys.executable, "-c", _OWNER_SCRIPT], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    ) as owner:
        try:
            assert owner.stdout is not None
            url, pid = owner.stdout.readline().split()
            assert httpx.get(f"{url}/moto-api/").status_code == 200
        finally:
            owner.kill()
    deadline = time.monotonic() + 20
    while _alive(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(int(pid))
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/moto-api/")


_OWNER_SCRIPT = """
import time
from asya_local.moto_server import MotoServer
server = MotoServer()
server.start()
print(server.endpoint_url, server.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped by its dead parent's reaper) counts as gone
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        return stat.read().split(") ", 1)[1][0] != "Z"
    return True


def test_stop_closes_the_endpoint() -> None:
    server = MotoServer()
    server.start()
    url = server.endpoint_url
    server.stop()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{url}/moto-api/")
    with pytest.raises(LocalModeError, match="not running"):
        _ = server.endpoint_url


def test_a_taken_port_is_a_clear_error(server: MotoServer) -> None:
    with pytest.raises(LocalModeError, match=rf"cannot start moto on 127.0.0.1:{server.port}"):
        MotoServer(port=server.port).start()


def test_a_server_that_cannot_start_is_a_clear_error() -> None:
    """203.0.113.1 (TEST-NET-3) is no address of this machine: the child cannot bind it and exits; nothing is sent."""
    server = MotoServer(host="203.0.113.1")
    with pytest.raises(LocalModeError, match=r"moto server exited with code [1-9]\d* before it was ready"):
        server.start()
    with pytest.raises(LocalModeError, match="not running"):
        _ = server.pid


def test_esm_over_http_long_polls_and_acks(server: MotoServer) -> None:
    clients: AwsClients = server.clients()
    queue = clients.sqs.create_queue(QueueName=f"q-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    got: list[str] = []
    done = threading.Event()

    def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        got.extend(record["body"] for record in event["Records"])
        if len(got) >= 3:
            done.set()
        return {"batchItemFailures": []}

    esm = EventSourceMapping(EsmConfig(function_name="fn", queue_url=queue, batch_size=10), handler, sqs=clients.sqs)
    esm.start()
    try:
        for body in ("a", "b", "c"):
            clients.sqs.send_message(QueueUrl=queue, MessageBody=body)
        assert done.wait(20)
    finally:
        esm.stop(timeout=10)
    assert sorted(got) == ["a", "b", "c"]
    attrs = clients.sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["All"])["Attributes"]
    assert attrs["ApproximateNumberOfMessages"] == "0"
    assert attrs["ApproximateNumberOfMessagesNotVisible"] == "0"


def test_runtime_entry_points_by_actor_name() -> None:
    assert runtime_entry_point("x-sink") == ("asya_crew.sink", "SinkRuntime")
    assert runtime_entry_point("x-sump") == ("asya_crew.sump", "SumpRuntime")
    assert runtime_entry_point("analyze") == ("asya.sidecar", "ActorRuntime")
    assert runtime_entry_point("x-fanin-chunk") == ("asya_crew.aggregator", "AggregatorRuntime")  # P-FANIN-1


def test_runtime_environment_is_the_deployed_lambda_environment(server: MotoServer, example_manifest: Manifest) -> None:
    """The local runtimes are built from ``asya_deploy.environment.actor_environment``, the function the CDK app sets
    on the Lambdas, plus only the code directory (and the demo's log level)."""
    clients = server.clients()
    resources = provision(example_manifest, sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3)
    actors = {actor.name: actor for actor in example_manifest.deployed_actors()}
    env = runtime_environment(example_manifest, actors["analyze"], resources)
    # analyze is called by the example's flow written as Python: it carries the compiled programs (P-FLOW-1)
    assert json.loads(env.pop("ASYA_FLOWS"))["triage"]["flow"] == "triage"
    assert env == {
        "ASYA_NAMESPACE": "demo",
        "ASYA_ACTOR": "analyze",
        "ASYA_HANDLER": "text.Analyzer.process",
        "ASYA_CODE_DIR": str(example_manifest.code_dir("analyze")),
        "ASYA_TABLE": "asya-demo-tasks",
        "ASYA_BUCKET": "asya-demo-storage",
        "ASYA_ACTOR_TIMEOUT": "30",
        "ASYA_OFFLOAD_THRESHOLD_KB": "240",
        "ASYA_MAX_HOPS": "1000",
        "POWERTOOLS_SERVICE_NAME": "analyze",
        "POWERTOOLS_METRICS_NAMESPACE": "Asya",
    }
    deployed = actor_environment(example_manifest, actors["analyze"], table=resources.table, bucket=resources.bucket)
    deployed.pop("ASYA_FLOWS")
    assert {key: value for key, value in env.items() if key != "ASYA_CODE_DIR"} == deployed
    assert ActorConfig.from_env(env).log_level == ""  # Powertools' default
    sink = runtime_environment(example_manifest, actors["x-sink"], resources, log_level="WARNING")
    assert "ASYA_HANDLER" not in sink
    assert "ASYA_CODE_DIR" not in sink
    assert sink["ASYA_SINK_HOOKS"] == ""
    assert ActorConfig.from_env(sink).log_level == "WARNING"


def test_p_man_3_a_route_through_x_pause_deploys_the_pause_crew(example_manifest: Manifest) -> None:
    """A flow through x-pause (P-MAN-3) deploys x-pause and x-resume with the mesh (issue 16: no longer refused)."""
    flows = dict(example_manifest.flows)
    flows["review"] = flows["text-pipeline"].model_copy(update={"route": ["normalize", "x-pause", "summarize"]})
    manifest = example_manifest.model_copy(update={"flows": flows})
    LocalMesh(manifest, port=0)  # builds without starting: nothing is refused
    assert {"x-pause", "x-resume"} <= {actor.name for actor in manifest.deployed_actors()}
