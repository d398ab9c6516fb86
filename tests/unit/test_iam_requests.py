"""From one raw HTTP request to the IAM checks AWS would make: requests built by the installed botocore itself.

Each request is built and signed by a real botocore client against a fake endpoint and captured at ``before-send``
(nothing is sent). The expected actions and resources follow AWS's "Actions, resources, and condition keys" pages
for each service (SAR below). Every boto3 call the runtime makes (layers/, crew/, gateway/, local/) is covered.
"""

from __future__ import annotations

import functools
import io
from collections.abc import Callable, Iterator
from typing import Any

import botocore.session
import pytest
from botocore.awsrequest import AWSPreparedRequest
from botocore.config import Config

from asya_local.iam import RequestContext, authorize_request
from asya_local.iam.sigv4 import credential_of

REGION = "us-east-1"
ACCOUNT = "123456789012"
ENDPOINT = "http://127.0.0.1:9"
QUEUE_URL = f"{ENDPOINT}/{ACCOUNT}/asya-demo-q"
QUEUE_ARN = f"arn:aws:sqs:{REGION}:{ACCOUNT}:asya-demo-q"
TABLE_ARN = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/asya-tasks"
BUCKET_ARN = "arn:aws:s3:::asya-bucket"


class _Sent(Exception):
    pass


@functools.cache
def _session() -> botocore.session.Session:
    """One botocore session for the module: it loads each service's model once (a new session per request loaded
    the S3 model, the largest, again for every S3 case). Clients stay one per request: hooks are registered on them."""
    return botocore.session.get_session()


Captured = tuple[str, str, dict[str, str], bytes]


def _capture(service: str, call: Callable[[Any], object], **config: Any) -> Captured:
    """The request one botocore call would send, signed with access key ``AKIDTEST``."""
    session = _session()
    client = session.create_client(
        service,
        region_name=REGION,
        endpoint_url=config.pop("endpoint_url", ENDPOINT),
        aws_access_key_id="AKIDTEST",
        aws_secret_access_key="secret",
        config=Config(retries={"max_attempts": 0}, **config),
    )

    def hook(request: AWSPreparedRequest, **_: object) -> None:
        raise _Sent(request)

    client.meta.events.register("before-send", hook)
    with pytest.raises(_Sent) as sent:
        call(client)
    request: AWSPreparedRequest = sent.value.args[0]
    raw: Any = request.body
    if hasattr(raw, "read"):
        raw = raw.read()
    body = raw.encode() if isinstance(raw, str) else bytes(raw or b"")
    headers = {k: v.decode() if isinstance(v, bytes) else str(v) for k, v in dict[str, Any](request.headers).items()}
    return request.method, request.url, headers, body


def _checks(captured: Captured) -> list[RequestContext] | None:
    method, url, headers, body = captured
    return authorize_request(method, url, headers, body, region=REGION, account_id=ACCOUNT)


def _summary(checks: list[RequestContext] | None) -> list[tuple[str, tuple[str, ...], str]] | None:
    return None if checks is None else [(c.action, c.resources, c.operation) for c in checks]


def _path_s3(call: Callable[[Any], object]) -> Captured:
    return _capture("s3", call, s3={"addressing_style": "path"})


# --- who signed ---


def test_the_access_key_comes_from_the_authorization_header() -> None:
    _, url, headers, _ = _capture("sqs", lambda c: c.get_queue_url(QueueName="q"))
    credential = credential_of({k.lower(): v for k, v in headers.items()}, url)
    assert credential is not None
    assert (credential.access_key_id, credential.region, credential.service, credential.presigned) == (
        "AKIDTEST",
        REGION,
        "sqs",
        False,
    )


@pytest.mark.parametrize("signature_version", ["s3v4", None])
def test_a_presigned_url_names_its_access_key_in_the_query(signature_version: str | None) -> None:
    """SigV4 (``X-Amz-Credential``) and botocore's default SigV2 presigning (``AWSAccessKeyId``) for S3."""
    session = _session()
    client: Any = session.create_client(
        "s3",
        region_name=REGION,
        endpoint_url=ENDPOINT,
        aws_access_key_id="AKIDURL",
        aws_secret_access_key="s",
        config=Config(signature_version=signature_version, s3={"addressing_style": "path"}),
    )
    url = client.generate_presigned_url("get_object", Params={"Bucket": "asya-bucket", "Key": "tasks/a.json"})
    credential = credential_of({}, url)
    assert credential is not None and credential.access_key_id == "AKIDURL" and credential.presigned
    checks = authorize_request("GET", url, {}, b"", region=REGION, account_id=ACCOUNT)
    assert _summary(checks) == [("s3:GetObject", (f"{BUCKET_ARN}/tasks/a.json",), "GetObject")]
    assert checks is not None and checks[0].context["s3:authType"] == "REST-QUERY-STRING"


def test_an_unsigned_request_has_no_credential() -> None:
    assert credential_of({"authorization": "Basic abc"}, "http://x/?a=b") is None


# --- SQS (SAR: Amazon SQS) ---

SQS_CASES: list[tuple[str, Callable[[Any], object], str, str]] = [
    ("SendMessage", lambda c: c.send_message(QueueUrl=QUEUE_URL, MessageBody="x"), "sqs:SendMessage", QUEUE_ARN),
    (
        "SendMessageBatch",
        lambda c: c.send_message_batch(QueueUrl=QUEUE_URL, Entries=[{"Id": "1", "MessageBody": "x"}]),
        "sqs:SendMessage",
        QUEUE_ARN,
    ),
    ("ReceiveMessage", lambda c: c.receive_message(QueueUrl=QUEUE_URL), "sqs:ReceiveMessage", QUEUE_ARN),
    (
        "DeleteMessageBatch",
        lambda c: c.delete_message_batch(QueueUrl=QUEUE_URL, Entries=[{"Id": "1", "ReceiptHandle": "r"}]),
        "sqs:DeleteMessage",
        QUEUE_ARN,
    ),
    (
        "ChangeMessageVisibilityBatch",
        lambda c: c.change_message_visibility_batch(
            QueueUrl=QUEUE_URL, Entries=[{"Id": "1", "ReceiptHandle": "r", "VisibilityTimeout": 1}]
        ),
        "sqs:ChangeMessageVisibility",
        QUEUE_ARN,
    ),
    ("GetQueueAttributes", lambda c: c.get_queue_attributes(QueueUrl=QUEUE_URL), "sqs:GetQueueAttributes", QUEUE_ARN),
    ("GetQueueUrl", lambda c: c.get_queue_url(QueueName="asya-demo-q"), "sqs:GetQueueUrl", QUEUE_ARN),
    ("CreateQueue", lambda c: c.create_queue(QueueName="asya-demo-q"), "sqs:CreateQueue", QUEUE_ARN),
    ("ListQueues", lambda c: c.list_queues(), "sqs:ListQueues", "*"),
]


@pytest.mark.parametrize(("operation", "call", "action", "resource"), SQS_CASES, ids=[c[0] for c in SQS_CASES])
def test_sqs_json_protocol(operation: str, call: Callable[[Any], object], action: str, resource: str) -> None:
    """SAR SQS: resource is the queue ARN from QueueUrl (or QueueName); batch calls need the single action."""
    captured = _capture("sqs", call)
    assert captured[2]["X-Amz-Target"] == f"AmazonSQS.{operation}"  # this botocore speaks SQS's JSON protocol
    checks = _checks(captured)
    assert _summary(checks) == [(action, (resource,), operation)]
    assert checks is not None and checks[0].context["aws:SecureTransport"] == "true"


def test_sqs_query_protocol() -> None:
    """The older query protocol (form-encoded Action=...), as other SDKs still send it."""
    body = f"Action=SendMessage&Version=2012-11-05&QueueUrl={QUEUE_URL}&MessageBody=x".encode()
    headers = {
        "Content-Type": "application/x-www-form-urlencoded; charset=utf-8",
        "Authorization": "AWS4-HMAC-SHA256 Credential=AKIDTEST/20260101/us-east-1/sqs/aws4_request, Signature=0",
    }
    checks = authorize_request("POST", ENDPOINT + "/", headers, body, region=REGION, account_id=ACCOUNT)
    assert _summary(checks) == [("sqs:SendMessage", (QUEUE_ARN,), "SendMessage")]


def test_an_unknown_sqs_operation_is_unmodelled() -> None:
    assert _checks(_capture("sqs", lambda c: c.list_message_move_tasks(SourceArn=QUEUE_ARN))) is None


# --- DynamoDB (SAR: Amazon DynamoDB) ---

KEY = {"pk": {"S": "a"}}
DDB_CASES: list[tuple[str, Callable[[Any], object], list[tuple[str, tuple[str, ...], str]]]] = [
    ("GetItem", lambda c: c.get_item(TableName="asya-tasks", Key=KEY), [("dynamodb:GetItem", (TABLE_ARN,), "GetItem")]),
    (
        "PutItem",
        lambda c: c.put_item(TableName="asya-tasks", Item=KEY),
        [("dynamodb:PutItem", (TABLE_ARN,), "PutItem")],
    ),
    (
        "UpdateItem",
        lambda c: c.update_item(TableName="asya-tasks", Key=KEY, UpdateExpression="SET a = :a"),
        [("dynamodb:UpdateItem", (TABLE_ARN,), "UpdateItem")],
    ),
    (
        "DeleteItem",
        lambda c: c.delete_item(TableName="asya-tasks", Key=KEY),
        [("dynamodb:DeleteItem", (TABLE_ARN,), "DeleteItem")],
    ),
    (
        "Query",
        lambda c: c.query(TableName="asya-tasks", KeyConditionExpression="pk = :p"),
        [("dynamodb:Query", (TABLE_ARN,), "Query")],
    ),
    (
        "QueryIndex",
        lambda c: c.query(TableName="asya-tasks", IndexName="by-status", KeyConditionExpression="s = :s"),
        [("dynamodb:Query", (f"{TABLE_ARN}/index/by-status",), "Query")],
    ),
    (
        "ScanIndex",
        lambda c: c.scan(TableName="asya-tasks", IndexName="by-status"),
        [("dynamodb:Scan", (f"{TABLE_ARN}/index/by-status",), "Scan")],
    ),
    (
        "BatchGetItem",
        lambda c: c.batch_get_item(
            RequestItems={"asya-tasks": {"Keys": [KEY]}, "asya-fanin": {"Keys": [KEY]}},
        ),
        [("dynamodb:BatchGetItem", (TABLE_ARN, TABLE_ARN.replace("asya-tasks", "asya-fanin")), "BatchGetItem")],
    ),
    (
        "BatchWriteItem",
        lambda c: c.batch_write_item(RequestItems={"asya-tasks": [{"PutRequest": {"Item": KEY}}]}),
        [("dynamodb:BatchWriteItem", (TABLE_ARN,), "BatchWriteItem")],
    ),
    (
        "TransactWriteItems",
        lambda c: c.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "asya-tasks", "Item": KEY}},
                {"Update": {"TableName": "asya-fanin", "Key": KEY, "UpdateExpression": "SET a = :a"}},
                {"ConditionCheck": {"TableName": "asya-tasks", "Key": KEY, "ConditionExpression": "a = :a"}},
            ]
        ),
        [
            ("dynamodb:PutItem", (TABLE_ARN,), "TransactWriteItems"),
            ("dynamodb:UpdateItem", (TABLE_ARN.replace("asya-tasks", "asya-fanin"),), "TransactWriteItems"),
            ("dynamodb:ConditionCheckItem", (TABLE_ARN,), "TransactWriteItems"),
        ],
    ),
    (
        "TransactGetItems",
        lambda c: c.transact_get_items(TransactItems=[{"Get": {"TableName": "asya-tasks", "Key": KEY}}]),
        [("dynamodb:GetItem", (TABLE_ARN,), "TransactGetItems")],
    ),
    (
        "CreateTable",
        lambda c: c.create_table(
            TableName="asya-tasks",
            KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        ),
        [("dynamodb:CreateTable", (TABLE_ARN,), "CreateTable")],
    ),
    (
        "UpdateTimeToLive",
        lambda c: c.update_time_to_live(
            TableName="asya-tasks", TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"}
        ),
        [("dynamodb:UpdateTimeToLive", (TABLE_ARN,), "UpdateTimeToLive")],
    ),
]


@pytest.mark.parametrize(("name", "call", "expected"), DDB_CASES, ids=[c[0] for c in DDB_CASES])
def test_dynamodb(name: str, call: Callable[[Any], object], expected: list[Any]) -> None:
    """SAR DynamoDB: table ARN, index ARN for Query/Scan on an index, one check per table for batch calls, and the
    item actions for transactions."""
    assert _summary(_checks(_capture("dynamodb", call))) == expected


def test_dynamodb_select_and_return_values_reach_the_context() -> None:
    """SAR DynamoDB condition keys dynamodb:Select and dynamodb:ReturnValues."""
    checks = _checks(_capture("dynamodb", lambda c: c.put_item(TableName="t", Item=KEY, ReturnValues="ALL_OLD")))
    assert checks is not None and checks[0].context["dynamodb:ReturnValues"] == "ALL_OLD"


# --- S3 (SAR: Amazon S3) ---

OBJ = f"{BUCKET_ARN}/tasks/a b+c.json"
S3_CASES: list[tuple[str, Callable[[Any], object], list[tuple[str, tuple[str, ...], str]]]] = [
    (
        "GetObject",
        lambda c: c.get_object(Bucket="asya-bucket", Key="tasks/a b+c.json"),
        [("s3:GetObject", (OBJ,), "GetObject")],
    ),
    (
        "HeadObject",
        lambda c: c.head_object(Bucket="asya-bucket", Key="tasks/a b+c.json"),
        [("s3:GetObject", (OBJ,), "HeadObject")],
    ),
    (
        "GetObjectVersion",
        lambda c: c.get_object(Bucket="asya-bucket", Key="tasks/a b+c.json", VersionId="v1"),
        [("s3:GetObjectVersion", (OBJ,), "GetObject")],
    ),
    (
        "PutObject",
        lambda c: c.put_object(Bucket="asya-bucket", Key="tasks/a b+c.json", Body=b"{}"),
        [("s3:PutObject", (OBJ,), "PutObject")],
    ),
    (
        "DeleteObject",
        lambda c: c.delete_object(Bucket="asya-bucket", Key="tasks/a b+c.json"),
        [("s3:DeleteObject", (OBJ,), "DeleteObject")],
    ),
    (
        "CopyObject",
        lambda c: c.copy_object(
            Bucket="asya-bucket", Key="tasks/a b+c.json", CopySource={"Bucket": "other", "Key": "in/x y.json"}
        ),
        [
            ("s3:GetObject", ("arn:aws:s3:::other/in/x y.json",), "CopyObject"),
            ("s3:PutObject", (OBJ,), "CopyObject"),
        ],
    ),
    (
        "CreateMultipartUpload",
        lambda c: c.create_multipart_upload(Bucket="asya-bucket", Key="tasks/a b+c.json"),
        [("s3:PutObject", (OBJ,), "CreateMultipartUpload")],
    ),
    (
        "UploadPart",
        lambda c: c.upload_part(Bucket="asya-bucket", Key="tasks/a b+c.json", UploadId="u", PartNumber=1, Body=b"x"),
        [("s3:PutObject", (OBJ,), "UploadPart")],
    ),
    (
        "CompleteMultipartUpload",
        lambda c: c.complete_multipart_upload(
            Bucket="asya-bucket",
            Key="tasks/a b+c.json",
            UploadId="u",
            MultipartUpload={"Parts": [{"ETag": "e", "PartNumber": 1}]},
        ),
        [("s3:PutObject", (OBJ,), "CompleteMultipartUpload")],
    ),
    (
        "AbortMultipartUpload",
        lambda c: c.abort_multipart_upload(Bucket="asya-bucket", Key="tasks/a b+c.json", UploadId="u"),
        [("s3:AbortMultipartUpload", (OBJ,), "AbortMultipartUpload")],
    ),
    (
        "ListParts",
        lambda c: c.list_parts(Bucket="asya-bucket", Key="tasks/a b+c.json", UploadId="u"),
        [("s3:ListMultipartUploadParts", (OBJ,), "ListParts")],
    ),
    (
        "ListMultipartUploads",
        lambda c: c.list_multipart_uploads(Bucket="asya-bucket"),
        [("s3:ListBucketMultipartUploads", (BUCKET_ARN,), "ListBucketMultipartUploads")],
    ),
    (
        "DeleteObjects",
        lambda c: c.delete_objects(
            Bucket="asya-bucket",
            Delete={"Objects": [{"Key": "tasks/1"}, {"Key": "tasks/2"}, {"Key": "tasks/3", "VersionId": "v"}]},
        ),
        [
            ("s3:DeleteObject", (f"{BUCKET_ARN}/tasks/1", f"{BUCKET_ARN}/tasks/2"), "DeleteObjects"),
            ("s3:DeleteObjectVersion", (f"{BUCKET_ARN}/tasks/3",), "DeleteObjects"),
        ],
    ),
    (
        "HeadBucket",
        lambda c: c.head_bucket(Bucket="asya-bucket"),
        [("s3:ListBucket", (BUCKET_ARN,), "HeadBucket")],
    ),
    (
        "CreateBucket",
        lambda c: c.create_bucket(Bucket="asya-bucket"),
        [("s3:CreateBucket", (BUCKET_ARN,), "CreateBucket")],
    ),
    (
        "PutBucketEncryption",
        lambda c: c.put_bucket_encryption(
            Bucket="asya-bucket",
            ServerSideEncryptionConfiguration={
                "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]
            },
        ),
        [("s3:PutEncryptionConfiguration", (BUCKET_ARN,), "PutEncryptionConfiguration")],
    ),
    (
        "PutBucketLifecycleConfiguration",
        lambda c: c.put_bucket_lifecycle_configuration(
            Bucket="asya-bucket",
            LifecycleConfiguration={
                "Rules": [{"ID": "r", "Status": "Enabled", "Filter": {"Prefix": ""}, "Expiration": {"Days": 1}}]
            },
        ),
        [("s3:PutLifecycleConfiguration", (BUCKET_ARN,), "PutLifecycleConfiguration")],
    ),
    (
        "PutPublicAccessBlock",
        lambda c: c.put_public_access_block(
            Bucket="asya-bucket", PublicAccessBlockConfiguration={"BlockPublicAcls": True}
        ),
        [("s3:PutBucketPublicAccessBlock", (BUCKET_ARN,), "PutBucketPublicAccessBlock")],
    ),
    ("ListBuckets", lambda c: c.list_buckets(), [("s3:ListAllMyBuckets", ("*",), "ListBuckets")]),
]


@pytest.mark.parametrize(("name", "call", "expected"), S3_CASES, ids=[c[0] for c in S3_CASES])
def test_s3_path_style(name: str, call: Callable[[Any], object], expected: list[Any]) -> None:
    """SAR S3: object operations on the object ARN (key URL-decoded), bucket operations on the bucket ARN, a copy
    reads the source and writes the destination, DeleteObjects needs DeleteObject per key."""
    assert _summary(_checks(_path_s3(call))) == expected


@pytest.fixture
def virtual_hosted() -> Iterator[Callable[[Callable[[Any], object]], Captured]]:
    yield lambda call: _capture(
        "s3", call, s3={"addressing_style": "virtual"}, endpoint_url="https://s3.us-east-1.amazonaws.com"
    )


def test_s3_virtual_hosted(virtual_hosted: Callable[[Callable[[Any], object]], Captured]) -> None:
    """The bucket in the host name (``asya-bucket.s3.us-east-1.amazonaws.com``) names the same ARNs."""
    captured = virtual_hosted(lambda c: c.get_object(Bucket="asya-bucket", Key="tasks/a b+c.json"))
    assert captured[1].startswith("https://asya-bucket.s3.")
    assert _summary(_checks(captured)) == [("s3:GetObject", (OBJ,), "GetObject")]
    listed = _checks(virtual_hosted(lambda c: c.list_objects_v2(Bucket="asya-bucket", Prefix="tasks/")))
    assert _summary(listed) == [("s3:ListBucket", (BUCKET_ARN,), "ListObjectsV2")]


def test_list_objects_v2_carries_prefix_delimiter_and_max_keys() -> None:
    """SAR S3 ListBucket condition keys s3:prefix, s3:delimiter, s3:max-keys come from the request's parameters."""
    checks = _checks(
        _path_s3(lambda c: c.list_objects_v2(Bucket="asya-bucket", Prefix="tasks/a", Delimiter="/", MaxKeys=5))
    )
    assert _summary(checks) == [("s3:ListBucket", (BUCKET_ARN,), "ListObjectsV2")]
    assert checks is not None
    context = checks[0].context
    assert (context["s3:prefix"], context["s3:delimiter"], context["s3:max-keys"]) == ("tasks/a", "/", "5")
    assert context["s3:authType"] == "REST-HEADER"


def test_a_get_object_carries_no_prefix() -> None:
    """A GetObject's context has no s3:prefix: a ListBucket grant conditioned on it cannot apply (the 404/403 rule)."""
    checks = _checks(_path_s3(lambda c: c.get_object(Bucket="asya-bucket", Key="tasks/a")))
    assert checks is not None and "s3:prefix" not in checks[0].context


def test_put_object_carries_its_x_amz_headers() -> None:
    """SAR S3 PutObject condition keys s3:x-amz-server-side-encryption and s3:x-amz-acl."""
    checks = _checks(
        _path_s3(
            lambda c: c.put_object(
                Bucket="asya-bucket", Key="k", Body=io.BytesIO(b"x"), ServerSideEncryption="AES256", ACL="private"
            )
        )
    )
    assert checks is not None
    assert checks[0].context["s3:x-amz-server-side-encryption"] == "AES256"
    assert checks[0].context["s3:x-amz-acl"] == "private"


def test_an_unknown_s3_subresource_is_unmodelled() -> None:
    assert _checks(_path_s3(lambda c: c.get_bucket_website(Bucket="asya-bucket"))) is None


# --- KMS, CloudWatch, Secrets Manager, STS ---


def test_kms_key_operations_name_the_key_arn() -> None:
    """SAR KMS: key operations on ``key/<id>``; a full ARN is kept."""
    checks = _checks(_capture("kms", lambda c: c.generate_data_key(KeyId="1234abcd", KeySpec="AES_256")))
    assert _summary(checks) == [
        ("kms:GenerateDataKey", (f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd",), "GenerateDataKey")
    ]
    arn = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/k"
    checks = _checks(_capture("kms", lambda c: c.decrypt(KeyId=arn, CiphertextBlob=b"x")))
    assert _summary(checks) == [("kms:Decrypt", (arn,), "Decrypt")]


def test_kms_decrypt_without_key_is_unmodelled() -> None:
    """The key hides in the ciphertext, which this module cannot read: never guessed."""
    assert _checks(_capture("kms", lambda c: c.decrypt(CiphertextBlob=b"x"))) is None


def test_cloudwatch_metric_calls() -> None:
    """SAR CloudWatch: metric actions on ``*``; PutMetricData carries cloudwatch:namespace."""
    put = _checks(
        _capture(
            "cloudwatch",
            lambda c: c.put_metric_data(Namespace="Asya", MetricData=[{"MetricName": "m", "Value": 1.0}]),
        )
    )
    assert _summary(put) == [("cloudwatch:PutMetricData", ("*",), "PutMetricData")]
    assert put is not None and put[0].context["cloudwatch:namespace"] == "Asya"
    stats = _checks(
        _capture(
            "cloudwatch",
            lambda c: c.get_metric_statistics(
                Namespace="Asya", MetricName="m", StartTime=0, EndTime=1, Period=60, Statistics=["Sum"]
            ),
        )
    )
    assert _summary(stats) == [("cloudwatch:GetMetricStatistics", ("*",), "GetMetricStatistics")]


def test_secrets_manager_get_secret_value() -> None:
    arn = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:asya-jwt-AbCdEf"
    checks = _checks(_capture("secretsmanager", lambda c: c.get_secret_value(SecretId=arn)))
    assert _summary(checks) == [("secretsmanager:GetSecretValue", (arn,), "GetSecretValue")]


def test_secrets_manager_a_name_is_checked_on_the_arn_it_resolves_to() -> None:
    """AWS authorizes the secret's full ARN (with the suffix it appended), not the name the caller sent."""
    full = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:asya-keys-Xy12Ab"
    method, url, headers, body = _capture("secretsmanager", lambda c: c.get_secret_value(SecretId="asya-keys"))
    resolved = authorize_request(
        method, url, headers, body, region=REGION, account_id=ACCOUNT, resolve_secret={"asya-keys": full}.get
    )
    assert _summary(resolved) == [("secretsmanager:GetSecretValue", (full,), "GetSecretValue")]
    unknown = authorize_request(
        method, url, headers, body, region=REGION, account_id=ACCOUNT, resolve_secret=lambda _: None
    )
    name_arn = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:asya-keys"
    assert _summary(unknown) == [("secretsmanager:GetSecretValue", (name_arn,), "GetSecretValue")]


def test_sts_get_caller_identity() -> None:
    checks = _checks(_capture("sts", lambda c: c.get_caller_identity()))
    assert _summary(checks) == [("sts:GetCallerIdentity", ("*",), "GetCallerIdentity")]


def test_an_unmodelled_service_is_none() -> None:
    assert _checks(_capture("lambda", lambda c: c.list_functions())) is None
