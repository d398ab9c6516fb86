"""The IAM proxy in front of moto's server: two principals with their own policies, boto3 clients for each.

Allowed calls reach moto and answer as usual; denied calls never reach it and fail with the ClientError AWS gives
(S3: 403 ``AccessDenied``, HEAD: ``403``; DynamoDB: ``AccessDeniedException``; SQS: ``AccessDenied``); S3's rule for
missing keys (GetObject/HeadObject "Permissions": 404 only with ``s3:ListBucket``, else 403); unknown keys pass
through unrecorded (issue 24, "IAM is enforced per function").
"""

from __future__ import annotations

import io
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EndpointConnectionError

from asya_local.iam import MISSING_KEY, UNMODELLED, AccessRecord, Decision, PolicyProxy, PolicySet, ProxyError
from asya_local.moto_server import FAKE_CREDENTIALS, MOTO_ACCOUNT_ID, MotoServer

REGION = "us-east-1"
BUCKET = "asya-iam-bucket"
BUCKET_ARN = f"arn:aws:s3:::{BUCKET}"
TABLE = "asya-iam-tasks"
OTHER_TABLE = "asya-iam-other"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{MOTO_ACCOUNT_ID}:table/{TABLE}"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{MOTO_ACCOUNT_ID}:asya-iam-a"

READER_POLICY: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [
        {"Sid": "ReadTasks", "Effect": "Allow", "Action": "s3:GetObject", "Resource": f"{BUCKET_ARN}/tasks/*"},
        {
            # The shape the templates synthesize: ListBucket only for listings under tasks/.
            "Sid": "ListTasks",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": BUCKET_ARN,
            "Condition": {"StringLike": {"s3:prefix": ["tasks/*"]}},
        },
        {"Sid": "NoDelete", "Effect": "Deny", "Action": "s3:DeleteObject", "Resource": "*"},
        {"Sid": "AllDeletes", "Effect": "Allow", "Action": "s3:DeleteObject", "Resource": "*"},
        {
            "Sid": "ReadTable",
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:BatchGetItem"],
            "Resource": [TABLE_ARN, f"{TABLE_ARN}/index/by-status"],
        },
        {"Sid": "SendA", "Effect": "Allow", "Action": "sqs:SendMessage", "Resource": QUEUE_ARN},
        {
            # CDK's grant_read of Secret.from_secret_name_v2: the name, then the suffix AWS appends
            "Sid": "Keys",
            "Effect": "Allow",
            "Action": "secretsmanager:GetSecretValue",
            "Resource": f"arn:aws:secretsmanager:{REGION}:{MOTO_ACCOUNT_ID}:secret:asya-iam-keys-??????",
        },
    ],
}
WRITER_POLICY: dict[str, Any] = {
    "Version": "2012-10-17",
    "Statement": [
        {"Sid": "Objects", "Effect": "Allow", "Action": "s3:*Object", "Resource": f"{BUCKET_ARN}/*"},
        {"Sid": "List", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": BUCKET_ARN},
        {"Sid": "Tables", "Effect": "Allow", "Action": "dynamodb:*", "Resource": "*"},
        {"Sid": "Queues", "Effect": "Allow", "Action": "sqs:*", "Resource": "*"},
    ],
}


class Mesh:
    def __init__(self, proxy: PolicyProxy, url: str) -> None:
        self.proxy = proxy
        self.url = url
        # one session for every client: it loads each service's model once (clients carry their own credentials)
        self._session: Any = boto3.session.Session()

    def client(self, service: str, key: str | None = None) -> Any:
        credentials = FAKE_CREDENTIALS if key is None else {"aws_access_key_id": key, "aws_secret_access_key": "secret"}
        return self._session.client(
            service,
            region_name=REGION,
            endpoint_url=self.url,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 0}),
            **credentials,
        )


@pytest.fixture(scope="module")
def mesh() -> Iterator[Mesh]:
    principals = {
        "AKIDREADER": ("Reader", PolicySet.from_documents([READER_POLICY])),
        "AKIDWRITER": ("Writer", PolicySet.from_documents([WRITER_POLICY])),
    }
    with (
        MotoServer() as server,
        PolicyProxy(server.endpoint_url, principals, region=REGION, account_id=MOTO_ACCOUNT_ID) as proxy,
    ):
        world = Mesh(proxy, proxy.url)
        s3, ddb, sqs = world.client("s3"), world.client("dynamodb"), world.client("sqs")
        s3.create_bucket(Bucket=BUCKET)
        s3.put_object(Bucket=BUCKET, Key="tasks/a.json", Body=b'{"a": 1}')
        s3.put_object(Bucket=BUCKET, Key="paused/p.json", Body=b"{}")
        for name in (TABLE, OTHER_TABLE):
            ddb.create_table(
                TableName=name,
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[
                    {"AttributeName": "pk", "AttributeType": "S"},
                    {"AttributeName": "status", "AttributeType": "S"},
                ],
                GlobalSecondaryIndexes=[
                    {
                        "IndexName": index,
                        "KeySchema": [{"AttributeName": "status", "KeyType": "HASH"}],
                        "Projection": {"ProjectionType": "ALL"},
                    }
                    for index in ("by-status", "by-other")
                ],
                BillingMode="PAY_PER_REQUEST",
            )
            ddb.put_item(TableName=name, Item={"pk": {"S": "t1"}, "status": {"S": "running"}})
        sqs.create_queue(QueueName="asya-iam-a")
        secrets = world.client("secretsmanager")
        for name in ("asya-iam-keys", "asya-iam-other"):
            secrets.create_secret(Name=name, SecretString=f"{name}-value")
        sqs.create_queue(QueueName="asya-iam-b")
        yield world


@pytest.fixture(autouse=True)
def _fresh_records(mesh: Mesh) -> None:
    mesh.proxy.clear()


def _code(error: pytest.ExceptionInfo[ClientError]) -> str:
    return str(error.value.response["Error"]["Code"])


def _queue_url(mesh: Mesh, name: str) -> str:
    return str(mesh.client("sqs").get_queue_url(QueueName=name)["QueueUrl"])


# --- S3 ---


def test_an_allowed_get_reaches_moto_and_is_recorded(mesh: Mesh) -> None:
    body = mesh.client("s3", "AKIDREADER").get_object(Bucket=BUCKET, Key="tasks/a.json")["Body"].read()
    assert body == b'{"a": 1}'
    assert mesh.proxy.records() == [
        AccessRecord(
            "Reader", "s3", "s3:GetObject", f"{BUCKET_ARN}/tasks/a.json", Decision.ALLOW, "ReadTasks", "GetObject"
        )
    ]
    assert mesh.proxy.denied() == []


def test_a_denied_put_is_403_access_denied_naming_principal_action_and_resource(mesh: Mesh) -> None:
    with pytest.raises(ClientError) as error:
        mesh.client("s3", "AKIDREADER").put_object(Bucket=BUCKET, Key="tasks/new.json", Body=b"x")
    assert _code(error) == "AccessDenied"
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    message = error.value.response["Error"]["Message"]
    assert "assumed-role/Reader/Reader" in message
    assert f"s3:PutObject on resource: {BUCKET_ARN}/tasks/new.json" in message
    # moto never saw it: the object does not exist
    with pytest.raises(ClientError) as missing:
        mesh.client("s3").head_object(Bucket=BUCKET, Key="tasks/new.json")
    assert _code(missing) == "404"
    [record] = mesh.proxy.denied()
    assert (record.action, record.decision, record.statement) == ("s3:PutObject", Decision.IMPLICIT_DENY, None)


def test_a_denied_head_is_a_bare_403(mesh: Mesh) -> None:
    """S3 answers a HEAD with no body: botocore reports the status as the code."""
    with pytest.raises(ClientError) as error:
        mesh.client("s3", "AKIDREADER").head_object(Bucket=BUCKET, Key="paused/p.json")
    assert _code(error) == "403"


def test_an_explicit_deny_beats_an_allow(mesh: Mesh) -> None:
    with pytest.raises(ClientError) as error:
        mesh.client("s3", "AKIDREADER").delete_object(Bucket=BUCKET, Key="tasks/a.json")
    assert _code(error) == "AccessDenied"
    assert "explicit deny" in error.value.response["Error"]["Message"]
    [record] = mesh.proxy.denied()
    assert (record.decision, record.statement) == (Decision.EXPLICIT_DENY, "NoDelete")


def test_listing_is_held_to_the_prefix_condition(mesh: Mesh) -> None:
    reader = mesh.client("s3", "AKIDREADER")
    listed = reader.list_objects_v2(Bucket=BUCKET, Prefix="tasks/")
    assert [item["Key"] for item in listed["Contents"]] == ["tasks/a.json"]
    with pytest.raises(ClientError) as error:
        reader.list_objects_v2(Bucket=BUCKET, Prefix="paused/")
    assert _code(error) == "AccessDenied"
    with pytest.raises(ClientError):
        reader.list_objects_v2(Bucket=BUCKET)  # no prefix at all: the condition's key is missing


@pytest.mark.parametrize("call", ["get_object", "head_object"])
def test_a_missing_key_is_403_without_an_unconditioned_list_bucket(mesh: Mesh, call: str) -> None:
    """S3 GetObject/HeadObject permissions: without s3:ListBucket a missing key answers 403. The reader's
    ListBucket is conditioned on s3:prefix, which a GetObject does not carry, so it does not apply."""
    with pytest.raises(ClientError) as error:
        getattr(mesh.client("s3", "AKIDREADER"), call)(Bucket=BUCKET, Key="tasks/missing.json")
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403
    assert _code(error) == ("AccessDenied" if call == "get_object" else "403")
    records = mesh.proxy.records()
    assert [(r.action, r.decision) for r in records] == [
        ("s3:GetObject", Decision.ALLOW),
        ("s3:ListBucket", Decision.IMPLICIT_DENY),
    ]
    assert records[1].resource == BUCKET_ARN and records[1].note == MISSING_KEY


@pytest.mark.parametrize("call", ["get_object", "head_object"])
def test_a_missing_key_is_404_with_list_bucket(mesh: Mesh, call: str) -> None:
    """S3 GetObject/HeadObject permissions: with s3:ListBucket on the bucket a missing key answers 404."""
    with pytest.raises(ClientError) as error:
        getattr(mesh.client("s3", "AKIDWRITER"), call)(Bucket=BUCKET, Key="tasks/missing.json")
    assert error.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    assert _code(error) == ("NoSuchKey" if call == "get_object" else "404")
    listed = [r for r in mesh.proxy.records() if r.action == "s3:ListBucket"]
    assert [(r.decision, r.statement, r.note) for r in listed] == [(Decision.ALLOW, "List", MISSING_KEY)]


def test_copy_checks_the_source_read_and_the_destination_write(mesh: Mesh) -> None:
    writer = mesh.client("s3", "AKIDWRITER")
    writer.copy_object(Bucket=BUCKET, Key="done/a.json", CopySource={"Bucket": BUCKET, "Key": "tasks/a.json"})
    assert [(r.action, r.resource) for r in mesh.proxy.records()] == [
        ("s3:GetObject", f"{BUCKET_ARN}/tasks/a.json"),
        ("s3:PutObject", f"{BUCKET_ARN}/done/a.json"),
    ]
    assert mesh.client("s3").get_object(Bucket=BUCKET, Key="done/a.json")["Body"].read() == b'{"a": 1}'


def test_a_large_body_goes_through_unchanged(mesh: Mesh) -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    writer = mesh.client("s3", "AKIDWRITER")
    writer.put_object(Bucket=BUCKET, Key="big/blob", Body=payload, Metadata={"task": "t-1"})
    assert mesh.client("s3").get_object(Bucket=BUCKET, Key="big/blob")["Body"].read() == payload
    head = writer.head_object(Bucket=BUCKET, Key="big/blob")  # a HEAD keeps moto's Content-Length and headers
    assert (head["ContentLength"], head["Metadata"]) == (len(payload), {"task": "t-1"})


# --- DynamoDB ---


def test_dynamodb_item_and_index_arns(mesh: Mesh) -> None:
    reader = mesh.client("dynamodb", "AKIDREADER")
    assert reader.get_item(TableName=TABLE, Key={"pk": {"S": "t1"}})["Item"]["status"] == {"S": "running"}
    found = reader.query(
        TableName=TABLE,
        IndexName="by-status",
        KeyConditionExpression="#s = :s",
        ExpressionAttributeNames={"#s": "status"},
        ExpressionAttributeValues={":s": {"S": "running"}},
    )
    assert found["Count"] == 1
    with pytest.raises(ClientError) as error:
        reader.query(
            TableName=TABLE,
            IndexName="by-other",
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames={"#s": "status"},
            ExpressionAttributeValues={":s": {"S": "running"}},
        )
    assert _code(error) == "AccessDeniedException"
    assert f"{TABLE_ARN}/index/by-other" in error.value.response["Error"]["Message"]
    with pytest.raises(ClientError) as write:
        reader.put_item(TableName=TABLE, Item={"pk": {"S": "t2"}})
    assert _code(write) == "AccessDeniedException"


def test_dynamodb_batch_get_checks_every_table(mesh: Mesh) -> None:
    reader = mesh.client("dynamodb", "AKIDREADER")
    key = {"Keys": [{"pk": {"S": "t1"}}]}
    assert len(reader.batch_get_item(RequestItems={TABLE: key})["Responses"][TABLE]) == 1
    with pytest.raises(ClientError) as error:
        reader.batch_get_item(RequestItems={TABLE: key, OTHER_TABLE: key})
    assert _code(error) == "AccessDeniedException"
    assert [r.resource for r in mesh.proxy.denied()] == [TABLE_ARN.replace(TABLE, OTHER_TABLE)]


# --- SQS ---


def test_sqs_send_is_held_to_the_queue_arn(mesh: Mesh) -> None:
    reader = mesh.client("sqs", "AKIDREADER")
    reader.send_message(QueueUrl=_queue_url(mesh, "asya-iam-a"), MessageBody="hello")
    with pytest.raises(ClientError) as error:
        reader.send_message(QueueUrl=_queue_url(mesh, "asya-iam-b"), MessageBody="hello")
    assert _code(error) == "AccessDenied"  # SQS's JSON protocol maps it through x-amzn-query-error
    with pytest.raises(ClientError) as receive:
        reader.receive_message(QueueUrl=_queue_url(mesh, "asya-iam-a"))
    assert _code(receive) == "AccessDenied"
    writer = mesh.client("sqs", "AKIDWRITER")
    got = writer.receive_message(QueueUrl=_queue_url(mesh, "asya-iam-a"), WaitTimeSeconds=1)
    assert [m["Body"] for m in got["Messages"]] == ["hello"]
    assert [(r.principal, r.action, r.decision.allowed) for r in mesh.proxy.records()] == [
        ("Reader", "sqs:SendMessage", True),
        ("Reader", "sqs:SendMessage", False),
        ("Reader", "sqs:ReceiveMessage", False),
        ("Writer", "sqs:ReceiveMessage", True),
    ]


# --- pass-through, unmodelled, always allowed, concurrency ---


def test_unknown_keys_pass_through_unrecorded(mesh: Mesh) -> None:
    anyone = mesh.client("s3", "AKIDSTRANGER")
    anyone.put_object(Bucket=BUCKET, Key="elsewhere/x", Body=b"x")
    mesh.client("s3").get_object(Bucket=BUCKET, Key="elsewhere/x")
    assert mesh.proxy.records() == []


def test_an_unmodelled_request_of_a_checked_principal_is_denied_and_recorded(mesh: Mesh) -> None:
    with pytest.raises(ClientError) as error:
        mesh.client("s3", "AKIDWRITER").get_bucket_website(Bucket=BUCKET)
    assert _code(error) == "AccessDenied"
    [record] = mesh.proxy.denied()
    assert (record.principal, record.statement, record.decision) == ("Writer", UNMODELLED, Decision.IMPLICIT_DENY)


def test_get_caller_identity_is_always_allowed(mesh: Mesh) -> None:
    assert mesh.client("sts", "AKIDREADER").get_caller_identity()["Account"] == MOTO_ACCOUNT_ID
    [record] = mesh.proxy.records()
    assert (record.action, record.decision, record.statement) == (
        "sts:GetCallerIdentity",
        Decision.ALLOW,
        "always-allowed",
    )


def test_concurrent_calls_are_all_recorded(mesh: Mesh) -> None:
    errors: list[BaseException] = []

    def work() -> None:
        client = mesh.client("dynamodb", "AKIDREADER")
        try:
            for _ in range(5):
                client.get_item(TableName=TABLE, Key={"pk": {"S": "t1"}})
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert len(mesh.proxy.records()) == 30
    assert all(record.decision is Decision.ALLOW for record in mesh.proxy.records())


@pytest.mark.parametrize(
    ("service", "call", "code"),
    [
        ("kms", lambda c: c.generate_data_key(KeyId="alias/asya", KeySpec="AES_256"), "AccessDeniedException"),
        (
            "secretsmanager",
            lambda c: c.get_secret_value(SecretId=f"arn:aws:secretsmanager:{REGION}:{MOTO_ACCOUNT_ID}:secret:s-AbCdEf"),
            "AccessDeniedException",
        ),
        (
            "cloudwatch",
            lambda c: c.get_metric_statistics(
                Namespace="Asya", MetricName="m", StartTime=0, EndTime=1, Period=60, Statistics=["Sum"]
            ),
            "AccessDenied",
        ),
    ],
)
def test_other_services_deny_with_their_own_code(mesh: Mesh, service: str, call: Any, code: str) -> None:
    """KMS and Secrets Manager (JSON) say AccessDeniedException; CloudWatch, a former query service, AccessDenied."""
    with pytest.raises(ClientError) as error:
        call(mesh.client(service, "AKIDREADER"))
    assert _code(error) == code
    [record] = mesh.proxy.denied()
    assert record.principal == "Reader" and record.statement is None


def test_sqs_query_protocol_denial_is_query_xml(mesh: Mesh) -> None:
    """A query-protocol SQS call (form body, ``Action=``) is denied with the query protocol's ErrorResponse."""
    body = f"Action=SendMessage&QueueUrl={_queue_url(mesh, 'asya-iam-b')}&MessageBody=x".encode()
    request = urllib.request.Request(
        mesh.url + "/",
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDREADER/20260101/us-east-1/sqs/aws4_request, "
            "SignedHeaders=host, Signature=0",
        },
    )
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=30)
    assert error.value.code == 403
    answer = error.value.read().decode()
    assert "<Code>AccessDenied</Code>" in answer and "<Type>Sender</Type>" in answer


def test_delete_objects_and_transactions_check_every_item(mesh: Mesh) -> None:
    writer = mesh.client("s3", "AKIDWRITER")
    writer.put_object(Bucket=BUCKET, Key="tmp/1", Body=io.BytesIO(b"streamed body"))
    assert mesh.client("s3").get_object(Bucket=BUCKET, Key="tmp/1")["Body"].read() == b"streamed body"
    writer.delete_objects(Bucket=BUCKET, Delete={"Objects": [{"Key": "tmp/1"}, {"Key": "tmp/2"}]})
    deletes = [r.resource for r in mesh.proxy.records() if r.action == "s3:DeleteObject"]
    assert deletes == [f"{BUCKET_ARN}/tmp/1", f"{BUCKET_ARN}/tmp/2"]
    with pytest.raises(ClientError) as error:
        mesh.client("dynamodb", "AKIDREADER").transact_get_items(
            TransactItems=[
                {"Get": {"TableName": TABLE, "Key": {"pk": {"S": "t1"}}}},
                {"Get": {"TableName": OTHER_TABLE, "Key": {"pk": {"S": "t1"}}}},
            ]
        )
    assert _code(error) == "AccessDeniedException"
    assert [(r.action, r.resource) for r in mesh.proxy.denied()] == [
        ("dynamodb:GetItem", TABLE_ARN.replace(TABLE, OTHER_TABLE))
    ]


def test_an_unreachable_upstream_answers_502() -> None:
    """moto gone: the caller gets a 502 naming the upstream, not a dropped connection."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with PolicyProxy(f"http://127.0.0.1:{port}", {}, region=REGION, account_id=MOTO_ACCOUNT_ID) as proxy:
        with pytest.raises(urllib.error.HTTPError) as error:
            urllib.request.urlopen(proxy.url + "/", timeout=30)
        assert error.value.code == 502
        assert f"127.0.0.1:{port}" in error.value.read().decode()


def test_a_bad_upstream_url_is_refused() -> None:
    with pytest.raises(ProxyError, match="upstream_url must be"):
        PolicyProxy("moto:5000", {}, region=REGION, account_id=MOTO_ACCOUNT_ID)


def test_an_unmodelled_cloudwatch_call_is_recorded_under_its_iam_prefix(mesh: Mesh) -> None:
    """CloudWatch signs as ``monitoring``; its actions are ``cloudwatch:*``, and the record says so."""
    with pytest.raises(ClientError) as error:
        mesh.client("cloudwatch", "AKIDWRITER").describe_alarms()
    assert _code(error) == "AccessDenied"
    [record] = mesh.proxy.denied()
    assert (record.service, record.action, record.statement) == ("cloudwatch", "cloudwatch:DescribeAlarms", UNMODELLED)


def test_nothing_is_served_after_stop() -> None:
    """A kept-alive connection does not outlive ``stop()``: its next request fails instead of being forwarded."""
    with MotoServer() as server:
        proxy = PolicyProxy(server.endpoint_url, {}, region=REGION, account_id=MOTO_ACCOUNT_ID)
        world = Mesh(proxy, proxy.start())
        client = world.client("sqs")
        client.list_queues()  # opens the kept-alive connection
        proxy.stop()
        with pytest.raises(EndpointConnectionError):
            client.list_queues()


def test_set_principal_changes_a_keys_policies_from_the_next_request(mesh: Mesh) -> None:
    """``set_principal``: a new key is checked from its next request; a known key's policies can be replaced and
    restored (the artifact suite's dropped-grant test uses it, never the proxy's private map)."""
    fresh = mesh.client("s3", "AKIDLATER")
    fresh.put_object(Bucket=BUCKET, Key="tasks/later.json", Body=b"x")  # unknown key: unchecked
    assert mesh.proxy.records() == []
    mesh.proxy.set_principal("AKIDLATER", "Later", PolicySet.from_documents([READER_POLICY]))
    with pytest.raises(ClientError) as error:
        fresh.put_object(Bucket=BUCKET, Key="tasks/later.json", Body=b"y")
    assert _code(error) == "AccessDenied"
    assert [(r.principal, r.action) for r in mesh.proxy.denied()] == [("Later", "s3:PutObject")]
    mesh.proxy.set_principal("AKIDLATER", "Later", PolicySet.from_documents([WRITER_POLICY]))
    fresh.put_object(Bucket=BUCKET, Key="tasks/later.json", Body=b"z")
    assert mesh.proxy.records()[-1].decision is Decision.ALLOW


def test_a_secret_named_by_name_is_judged_on_its_full_arn(mesh: Mesh) -> None:
    """Secrets Manager authorizes the secret's full ARN, suffix included: a grant on ``secret:asya-iam-keys-??????``
    allows a read by name and by full ARN, and another secret's name is denied on its own full ARN (the record names
    it); a name no secret has is judged as ``secret:<name>``."""
    reader = mesh.client("secretsmanager", "AKIDREADER")
    owner = mesh.client("secretsmanager")
    arn = owner.describe_secret(SecretId="asya-iam-keys")["ARN"]
    other_arn = owner.describe_secret(SecretId="asya-iam-other")["ARN"]
    mesh.proxy.clear()
    assert reader.get_secret_value(SecretId="asya-iam-keys")["SecretString"] == "asya-iam-keys-value"
    assert reader.get_secret_value(SecretId=arn)["SecretString"] == "asya-iam-keys-value"
    with pytest.raises(ClientError) as other:
        reader.get_secret_value(SecretId="asya-iam-other")
    assert _code(other) == "AccessDeniedException"
    with pytest.raises(ClientError) as missing:
        reader.get_secret_value(SecretId="asya-iam-none")
    assert _code(missing) == "AccessDeniedException"
    missing_arn = f"arn:aws:secretsmanager:{REGION}:{MOTO_ACCOUNT_ID}:secret:asya-iam-none"
    assert [(r.resource, r.decision) for r in mesh.proxy.records()] == [
        (arn, Decision.ALLOW),
        (arn, Decision.ALLOW),
        (other_arn, Decision.IMPLICIT_DENY),
        (missing_arn, Decision.IMPLICIT_DENY),
    ]


@pytest.mark.parametrize(
    ("service", "rule", "call"),
    [
        (
            "dynamodb",
            "dynamodb:PutItem:ProvisionedThroughputExceededException:400",
            lambda c: c.put_item(TableName=TABLE, Item={"pk": {"S": "t9"}}),
        ),
        (
            "sqs",
            "sqs:SendMessage:RequestThrottled:400",
            lambda c: c.send_message(QueueUrl=_queue_a_url(c), MessageBody="x"),
        ),
        ("s3", "s3:PutObject:SlowDown:503", lambda c: c.put_object(Bucket=BUCKET, Key="tasks/t9.json", Body=b"{}")),
    ],
)
def test_a_fault_rule_answers_allowed_calls_with_the_aws_throttling_error(
    mesh: Mesh, service: str, rule: str, call: Any
) -> None:
    """GW-OVL on the artifact mesh: the rule's calls fail with the throttling code botocore sees from AWS, then the
    next call reaches moto again; a call of another principal or action is not touched."""
    from asya_local.iam import FaultRule

    action, code, status = rule.rsplit(":", 2)
    client = mesh.client(service, "AKIDWRITER")
    mesh.proxy.faults.add(FaultRule(action=action, code=code, status=int(status), principal="Writer", times=1))
    try:
        with pytest.raises(ClientError) as error:
            call(client)
        assert _code(error) == code
        call(client)  # the rule is used up: the call goes through
        assert mesh.proxy.faults.played == [("Writer", action, code)]
    finally:
        mesh.proxy.faults.clear()
        mesh.proxy.faults.played.clear()


def _queue_a_url(client: Any) -> str:
    return str(client.get_queue_url(QueueName="asya-iam-a")["QueueUrl"])
