"""One in-process moto per pytest worker, with the example mesh provisioned once and reset before each test.

Provisioning the example mesh (32 queues, the table, the bucket) costs 0.3 to 0.7 s, and the functional tier asks for
it in hundreds of tests. moto's backends live for the whole process; ``mock_aws`` only switches botocore's stub on and
off. So a test of the ``mesh`` fixture starts moto *without* resetting it and stops it *without* removing its data:
the mesh a previous test of this worker provisioned is still there, and :meth:`SharedMoto.reset_mesh` returns it to
its provisioned state:

- every queue of the mesh is purged (moto's own purge, with its once-a-minute limit lifted: it is the test's reset,
  not a ``PurgeQueue`` call);
- every item of the table and every object (and pending multipart upload) of the bucket is deleted through the API;
- every other service (a secret, a schedule a test made) is reset as moto resets it;
- when the mesh is not exactly what was provisioned (a queue, table or bucket missing or added, a queue's settings
  changed, or moto reset by a test of the ``aws`` fixture alone), moto is reset and the mesh provisioned again.

The reset reads moto's backends to see what is there (no API call when a queue, the table or the bucket is already
empty, which it is after most tests) and deletes through the API what it finds.

A test of the ``aws`` fixture without the mesh gets a fresh moto, as ``mock_aws`` gives it, and the boto3 clients of
both are new in every test (tests register event hooks on them); only the boto3 session, which loads the service
models, is kept for the worker. moto's start registers some 1,300 URL patterns with the ``responses`` library (for
calls made with ``requests``) and its stop drops them; :func:`_worker_mock` registers them once per worker instead,
the rest of ``mock_aws``'s start and stop unchanged.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import boto3

from asya.manifest import Manifest
from asya_local.provision import MeshResources, provision

#: Attributes of a queue that change with its traffic or its age, left out when judging whether settings changed.
_VOLATILE_ATTRIBUTES = frozenset(
    {
        "ApproximateNumberOfMessages",
        "ApproximateNumberOfMessagesDelayed",
        "ApproximateNumberOfMessagesNotVisible",
        "CreatedTimestamp",
        "LastModifiedTimestamp",
    }
)


@dataclass
class SharedMoto:
    """The worker's moto state: its boto3 session and the mesh provisioned in it (``None`` until provisioned, and
    after a test reset moto)."""

    region: str
    session: boto3.Session | None = None
    resources: MeshResources | None = None
    _queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    _table_key: tuple[str, ...] = ()
    #: whether the objects the first test on moto left (models, backends) were frozen out of the garbage collector
    heap_frozen: bool = False

    def boto3_session(self) -> boto3.Session:
        if self.session is None:
            self.session = boto3.Session(region_name=self.region)
        return self.session

    @contextmanager
    def mocked(self, *, keep: bool) -> Iterator[None]:
        """``mock_aws`` for one test. ``keep``: moto's data outlives the test (the shared mesh); otherwise moto starts
        empty and is emptied at the end, as ``with mock_aws():`` does."""
        mock = _worker_mock()
        if not keep:
            self.resources = None
        mock.start(reset=not keep)
        try:
            yield
        finally:
            # remove_data also closes the buffers of the S3 objects moto made: without it they stay open until the
            # next test that resets moto, or the end of the session (close)
            mock.stop(remove_data=not keep)

    def close(self) -> None:
        """Empty moto and close every buffer it holds (at the end of the worker's session)."""
        from moto.core.base_backend import BackendDict
        from moto.core.model_instances import reset_model_data

        BackendDict.reset()
        reset_model_data()
        self.resources = None

    def reset_mesh(self, manifest: Manifest, clients: Any) -> MeshResources:
        """The mesh of ``manifest`` as :func:`provision` leaves it: no message, no item, no object (see the module).
        ``clients`` has the test's ``sqs``, ``dynamodb`` and ``s3`` clients as attributes, read only when needed."""
        resources = self.resources
        if resources is None or not self._intact(resources):
            return self._provision(manifest, sqs=clients.sqs, dynamodb=clients.dynamodb, s3=clients.s3)
        _reset_other_services()
        self._purge_queues()
        if len(_dynamodb_backend(resources, self.region).tables[resources.table]):
            self._empty_table(clients.dynamodb, resources.table)
        bucket = _s3_backend(resources).buckets[resources.bucket]
        if len(bucket.keys) or len(bucket.multiparts):
            self._empty_bucket(clients.s3, resources.bucket)
        return _copy(resources)

    def _provision(self, manifest: Manifest, *, sqs: Any, dynamodb: Any, s3: Any) -> MeshResources:
        from moto.core.base_backend import BackendDict

        BackendDict.reset()  # whatever a previous test left: the mesh is made from nothing
        resources = provision(manifest, sqs=sqs, dynamodb=dynamodb, s3=s3, region=self.region)
        self._queues = {name: _settings(queue) for name, queue in _backend_queues(resources, self.region).items()}
        schema = dynamodb.describe_table(TableName=resources.table)["Table"]["KeySchema"]
        self._table_key = tuple(key["AttributeName"] for key in schema)
        self.resources = resources
        return _copy(resources)

    def _intact(self, resources: MeshResources) -> bool:
        queues = _backend_queues(resources, self.region)
        if set(queues) != set(self._queues):
            return False
        if any(_settings(queue) != self._queues[name] for name, queue in queues.items()):
            return False
        tables = list(_dynamodb_backend(resources, self.region).tables)
        buckets = list(_s3_backend(resources).buckets)
        return tables == [resources.table] and buckets == [resources.bucket]

    def _purge_queues(self) -> None:
        assert self.resources is not None
        backend = _sqs_backend(self.resources, self.region)
        for name, queue in backend.queues.items():
            queue.last_purged_at = None
            backend.purge_queue(name)
            queue.deleted_messages.clear()

    def _empty_table(self, dynamodb: Any, table: str) -> None:
        names = {f"#k{index}": key for index, key in enumerate(self._table_key)}
        keys: list[dict[str, Any]] = []
        for page in dynamodb.get_paginator("scan").paginate(
            TableName=table, ProjectionExpression=", ".join(names), ExpressionAttributeNames=names
        ):
            keys.extend(page["Items"])
        for start in range(0, len(keys), 25):
            chunk = keys[start : start + 25]
            dynamodb.batch_write_item(RequestItems={table: [{"DeleteRequest": {"Key": key}} for key in chunk]})

    @staticmethod
    def _empty_bucket(s3: Any, bucket: str) -> None:
        for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
            versions = [*page.get("Versions", []), *page.get("DeleteMarkers", [])]
            objects = [{"Key": v["Key"], "VersionId": v["VersionId"]} for v in versions]
            if objects:
                s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": True})
        for upload in s3.list_multipart_uploads(Bucket=bucket).get("Uploads", []):
            s3.abort_multipart_upload(Bucket=bucket, Key=upload["Key"], UploadId=upload["UploadId"])


#: The services of the mesh, reset by their own API; every other service moto holds is emptied before each test.
_MESH_SERVICES = frozenset({"sqs", "dynamodb", "s3"})


def _reset_other_services() -> None:
    """What a test made in another service (a secret, a schedule, a role) is gone, as moto's own reset does it."""
    from moto.core.base_backend import BackendDict, backend_lock

    with backend_lock:
        for backend in list(BackendDict._instances):
            if backend.service_name in _MESH_SERVICES:
                continue
            for account_backend in backend.values():
                account_backend.reset()
            backend.clear()
            BackendDict._instances.remove(backend)


def _copy(resources: MeshResources) -> MeshResources:
    """The test's own copy: what a test does to its URL maps stays in that test."""
    return dataclasses.replace(resources, queue_urls=dict(resources.queue_urls), dlq_urls=dict(resources.dlq_urls))


def _account(resources: MeshResources) -> str:
    # a queue URL ends with <account>/<name>: the account moto made the mesh in
    some_url = next(iter(resources.queue_urls.values()))
    return some_url.rstrip("/").split("/")[-2]


def _sqs_backend(resources: MeshResources, region: str) -> Any:
    from moto.sqs.models import sqs_backends

    return sqs_backends[_account(resources)][region]


def _dynamodb_backend(resources: MeshResources, region: str) -> Any:
    from moto.dynamodb.models import dynamodb_backends

    return dynamodb_backends[_account(resources)][region]


def _s3_backend(resources: MeshResources) -> Any:
    from moto.s3.models import s3_backends

    return s3_backends[_account(resources)]["global"]


def _worker_mock() -> Any:
    return _worker_mock_class()()


@functools.cache
def _worker_mock_class() -> type[Any]:
    """A ``mock_aws`` whose start registers moto's ``responses`` URL patterns only when they are not registered (the
    first test of the worker, or after a plain ``mock_aws`` dropped them), and whose stop keeps them; patching
    botocore, resetting the backends and moto's mocked environment are ``mock_aws``'s own."""
    from moto.core.base_backend import BackendDict
    from moto.core.model_instances import reset_model_data
    from moto.core.models import MockAWS, botocore_stubber, responses_mock

    class _WorkerMock(MockAWS):
        def _enable_patching(self, reset: bool = True) -> None:
            if not responses_mock.registered():
                super()._enable_patching(reset=reset)
                return
            botocore_stubber.enabled = True
            if reset:
                BackendDict.reset()
            responses_mock.start()

        def _disable_patching(self, remove_data: bool) -> None:
            botocore_stubber.enabled = False
            if remove_data:
                BackendDict.reset()
                reset_model_data()
            responses_mock.stop()

    return _WorkerMock


def _backend_queues(resources: MeshResources, region: str) -> dict[str, Any]:
    return dict(_sqs_backend(resources, region).queues)


def _settings(queue: Any) -> dict[str, Any]:
    attributes = {key: value for key, value in queue.attributes.items() if key not in _VOLATILE_ATTRIBUTES}
    return {"attributes": json.loads(json.dumps(attributes, default=str)), "tags": dict(queue.tags)}
