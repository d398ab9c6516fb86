"""``asya flow gc`` against moto (P-FLOWV-4): the manifest's programs and those paused tasks name are kept; another
program is retired first and deleted by a later collection once it has been retired for ``grace``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from asya.flows import STATE_HEADER, Program, compile_flow
from asya.programstore import ProgramStore
from asya.tableschema import paused_key, program_key
from asya_local.exceptions import LocalModeError
from asya_local.flowgc import RETIRED_TAG, collect, default_grace

pytestmark = pytest.mark.functional

T0 = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)


def _old(version: int) -> Program:
    source = (
        f"async def triage(state):\n    state['v'] = {version}\n    state = await analyze(state)\n    return state\n"
    )
    return compile_flow(source, flow="triage", filename="old.py", actors={"analyze"})


def _pause(mesh: Any, task_id: str, program: Program) -> None:
    document = {"id": task_id, "headers": {STATE_HEADER: {"flow": "triage", "pc": 2, "digest": program.digest}}}
    mesh.aws.s3.put_object(Bucket=mesh.resources.bucket, Key=paused_key(task_id), Body=json.dumps(document))


def _present(mesh: Any, program: Program) -> bool:
    found = mesh.aws.s3.list_objects_v2(Bucket=mesh.resources.bucket, Prefix=program_key(program.digest))
    return bool(found.get("KeyCount"))


def _tags(mesh: Any, program: Program) -> dict[str, str]:
    tags = mesh.aws.s3.get_object_tagging(Bucket=mesh.resources.bucket, Key=program_key(program.digest))["TagSet"]
    return {t["Key"]: t["Value"] for t in tags}


def test_a_program_nothing_needs_is_retired_then_deleted_after_the_grace(mesh: Any) -> None:
    current = mesh.manifest.flows["triage"].program
    paused, unused = _old(1), _old(2)
    store = ProgramStore(bucket=mesh.resources.bucket, s3=mesh.aws.s3)
    for program in (current, paused, unused):
        store.publish(program)
    _pause(mesh, "t-paused", paused)
    grace = default_grace(mesh.manifest)

    def run(at: datetime, *, dry_run: bool = False) -> Any:
        return collect(
            mesh.manifest, s3=mesh.aws.s3, bucket=mesh.resources.bucket, grace=grace, now=lambda: at, dry_run=dry_run
        )

    dry = run(T0, dry_run=True)
    assert dry.retired == [unused.digest] and _tags(mesh, unused) == {}
    first = run(T0)
    assert sorted(first.kept) == sorted([current.digest, paused.digest])
    assert first.retired == [unused.digest]
    assert _tags(mesh, unused) == {RETIRED_TAG: "2026-03-01T10:00:00Z"}
    assert run(T0 + grace - timedelta(seconds=1)).waiting == [unused.digest]
    assert run(T0 + grace, dry_run=True).deleted == [unused.digest] and _present(mesh, unused)
    assert run(T0 + grace).deleted == [unused.digest]
    assert not _present(mesh, unused)
    assert _present(mesh, current) and _present(mesh, paused)


def test_a_program_needed_again_loses_its_retirement(mesh: Any) -> None:
    """A paused task whose program was retired while it was being resumed (and paused again) keeps it."""
    old = _old(3)
    ProgramStore(bucket=mesh.resources.bucket, s3=mesh.aws.s3).publish(old)
    grace = default_grace(mesh.manifest)
    kwargs: dict[str, Any] = {"s3": mesh.aws.s3, "bucket": mesh.resources.bucket, "grace": grace}
    assert collect(mesh.manifest, now=lambda: T0, **kwargs).retired == [old.digest]
    _pause(mesh, "t-again", old)
    assert old.digest in collect(mesh.manifest, now=lambda: T0 + grace, **kwargs).kept
    assert _tags(mesh, old) == {}
    mesh.aws.s3.delete_object(Bucket=mesh.resources.bucket, Key=paused_key("t-again"))
    later = T0 + 2 * grace
    assert collect(mesh.manifest, now=lambda: later, **kwargs).retired == [old.digest]  # the clock starts again
    assert _present(mesh, old)


def test_a_grace_shorter_than_the_longest_flow_timeout_is_refused(mesh: Any) -> None:
    with pytest.raises(LocalModeError, match="--grace must be at least"):
        collect(mesh.manifest, s3=mesh.aws.s3, bucket=mesh.resources.bucket, grace=timedelta(hours=1), now=lambda: T0)
