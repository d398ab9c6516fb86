"""``asya init``, ``synth``, ``deploy`` and ``destroy``: a project of the user's own, and its CDK deployment.

::

    asya init    DIR [--namespace NS]                          scaffold a project (asya_local.scaffold)
    asya synth   [--dir .] [-c KEY=VALUE ...] [-- CDK ARGS]    CloudFormation into DIR/cdk.out, no AWS account
    asya deploy  [--dir .] [-c KEY=VALUE ...] [--plan] [--force] [--deployed OLD] [--bucket B] [-- CDK ARGS]
                                                               deploy with your AWS credentials, after its preview
    asya destroy [--dir .] [-c KEY=VALUE ...] [--delete-data [--yes]] [-- CDK ARGS]
                                                               remove the stack (the table and bucket are retained)

``synth``, ``deploy`` and ``destroy`` first load the project's ``asya.yaml`` and check every handler without
instantiating any class (``asya_local.preflight``: every problem in one message, nothing run), then run the pinned
CDK CLI (``npx --yes aws-cdk@2.1148.1``: the 2.x release that reads the assembly this ``aws-cdk-lib`` writes) in the
project directory with ``--app "<this Python> app.py"`` (the interpreter asya runs on, whatever ``cdk.json`` says)
and ``--output cdk.out`` (``synth`` with ``--quiet``: the app names the template written, the CLI does not print
it). The CLI's output is passed through line by line as text; the jsii end-of-life notice for Node 20 is silenced
as in the repository's Makefile (env ``JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION``, unless set). The exit code
is the CDK CLI's; 2 when the project or Node.js is missing.

``destroy --delete-data`` deletes the task table and the bucket too (:func:`destroy_plan`): after a confirmation
(typing the namespace; ``--yes`` skips it, for scripts) it deploys the stack once more with context
``asya:deleteData=true`` (table and bucket set to be deleted with the stack, the bucket emptied by CDK's
auto-delete custom resource, the table's deletion protection off), then destroys it with ``--force``. A table or
bucket the manifest reuses (``deployment.existing_table`` / ``existing_bucket``) is not the stack's and stays.

``deploy`` first prints the deploy preview of the mesh deployed now (``asya_local.livestate``, read with your
credentials; ``asya_local.preview``): the actors it removes with the messages of their queues and DLQs, the flows with
tasks in flight on another program, the queue settings it changes, and with ``--deployed OLD`` the static plan of
``asya plan OLD .``. ``--plan`` stops there (exit 1 when the deploy would be refused, else 0; ``--endpoint-url`` reads
a local moto mesh instead). A deploy that removes an actor whose queue or DLQ holds messages is refused (exit 1,
before the CDK CLI runs) unless ``--force``, which first fails those messages' tasks through x-sump. Then it looks for
a task table a deleted stack retained (``asya_local.deploycheck``, two read-only calls) and stops with the fix instead
of letting CloudFormation fail on it.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final, TextIO

from asya.manifest import Manifest, load_manifest
from asya.timeutil import system_clock
from asya_local.cliargs import http_url
from asya_local.cliio import CliIo
from asya_local.deploycheck import check_before_deploy, deploy_region
from asya_local.exceptions import LocalModeError
from asya_local.plan import deploy_plan, load_side, render_plan
from asya_local.preflight import check_mesh
from asya_local.preview import drain_removed, drained_lines, read_deployed, refusal, render_live
from asya_local.scaffold import scaffold

if TYPE_CHECKING:
    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["CDK_CLI", "DELETE_DATA_CONTEXT", "add_project_parsers", "cdk_command", "confirm_deletion", "destroy_plan"]

#: The CDK CLI release every deployment uses (aws-cdk@3 cannot read this aws-cdk-lib's cloud assembly).
CDK_CLI: Final = "aws-cdk@2.1148.1"
_JSII_NOTICE: Final = ("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
#: The context ``destroy --delete-data`` deploys with (``asya_cdk.settings``: the table and bucket become deletable).
DELETE_DATA_CONTEXT: Final = "asya:deleteData=true"


def add_project_parsers(commands: _Commands) -> None:
    init = commands.add_parser("init", help="create a project: asya.yaml, functions/, a test, the CDK app")
    init.add_argument("dir", help="the project directory (created when missing)")
    init.add_argument("--namespace", help="the mesh namespace (default: the directory's name)")
    init.set_defaults(run=_init)
    for name, summary in (
        ("synth", "write the project's CloudFormation template into its cdk.out/ (no AWS account needed)"),
        ("deploy", "deploy the project's mesh with the CDK CLI (your AWS credentials)"),
        ("destroy", "remove the project's stack (the table and bucket are retained)"),
    ):
        command = commands.add_parser(name, help=summary)
        command.add_argument("--dir", default=".", help="the project directory (default: the current one)")
        command.add_argument(
            "-c", "--context", action="append", default=[], metavar="KEY=VALUE", help="CDK context, e.g. asya:region"
        )
        if name == "deploy":
            _add_preview_arguments(command)
        if name == "destroy":
            command.add_argument(
                "--delete-data",
                action="store_true",
                help="also delete the task table and the bucket with everything in them (asks first)",
            )
            command.add_argument("--yes", action="store_true", help="with --delete-data: do not ask (for scripts)")
        command.add_argument("cdk_args", nargs=argparse.REMAINDER, help="after --: more arguments for the CDK CLI")
        command.set_defaults(run=_cdk, cdk_command=name)


def _add_preview_arguments(command: argparse.ArgumentParser) -> None:
    command.add_argument("--plan", action="store_true", help="print the deploy preview and stop; nothing is changed")
    command.add_argument(
        "--force",
        action="store_true",
        help="remove actors whose queue or DLQ holds messages: fail those messages' tasks through x-sump first "
        "(not with --plan, which changes nothing)",
    )
    command.add_argument(
        "--deployed",
        metavar="OLD",
        help="also compare with the deployed version's manifest (asya.yaml or its directory), as `asya plan OLD .`",
    )
    command.add_argument("--bucket", help="the deployed storage bucket (default: the stack's BucketName output)")
    command.add_argument(
        "--endpoint-url", type=http_url, help="with --plan: read the mesh at this loopback (moto) endpoint instead"
    )


def _init(args: argparse.Namespace, io: CliIo) -> int:
    directory = Path(args.dir)
    written = scaffold(directory, namespace=args.namespace)
    for path in written:
        io.line(str(path))
    io.note(f"asya init: project ready in {directory}; next: cd {shlex.quote(str(directory))} && asya dev")
    return 0


def cdk_command(
    action: str,
    *,
    context: list[str],
    extra: list[str],
    python: str = sys.executable,
    which: Callable[[str], str | None] = shutil.which,
) -> list[str]:
    """The CDK CLI command line ``asya <action>`` runs in the project directory."""
    npx = which("npx")
    if npx is None:
        raise LocalModeError("npx was not found: the CDK CLI needs Node.js (https://nodejs.org), install it first")
    command = [npx, "--yes", CDK_CLI, action, "--app", f"{shlex.quote(python)} app.py", "--output", "cdk.out"]
    if action == "synth":
        command.append("--quiet")  # the app says where the template is; the CLI would print all of it
    for pair in context:
        if "=" not in pair or pair.startswith("="):
            raise LocalModeError(f"-c expects KEY=VALUE, got {pair!r}")
        command += ["-c", pair]
    return command + [arg for arg in extra if arg != "--"]


def _cdk(args: argparse.Namespace, io: CliIo) -> int:
    project = Path(args.dir).resolve()
    for required in ("app.py", "cdk.json", "asya.yaml"):
        if not (project / required).is_file():
            raise LocalModeError(
                f"{project} has no {required}: run `asya init DIR` to create a project, or pass --dir PROJECT"
            )
    manifest_path = project / "asya.yaml"
    manifest = load_manifest(manifest_path)
    check_mesh(manifest, source=str(manifest_path), instantiate=False)
    if getattr(args, "yes", False) and not getattr(args, "delete_data", False):
        raise LocalModeError("--yes only confirms --delete-data; add --delete-data or drop --yes")
    if not getattr(args, "delete_data", False):
        deploying = args.cdk_command == "deploy"
        if deploying and args.plan:  # the preview alone needs no Node.js
            return _preview(args, manifest, io) or 0
        command = cdk_command(args.cdk_command, context=args.context, extra=args.cdk_args)
        if deploying:
            stop = _preview(args, manifest, io)
            if stop is not None:
                return stop
            note = check_before_deploy(manifest, region=deploy_region(args.context, args.env))
            if note is not None:
                io.note(f"asya deploy: {note}")
        return _stream(command, cwd=project, env=_cdk_env(args.env), io=io)
    if not args.yes and not confirm_deletion(manifest.namespace, stdin=args.stdin, err=io.err):
        io.error("destroy --delete-data: not confirmed; nothing was changed")
        return 1
    for command in destroy_plan(context=args.context, extra=args.cdk_args):
        code = _stream(command, cwd=project, env=_cdk_env(args.env), io=io)
        if code != 0:
            return code
    return 0


def _preview(args: argparse.Namespace, manifest: Manifest, io: CliIo) -> int | None:
    """Print the deploy preview; the exit code when the deploy stops here (``--plan``, a refused removal), else
    ``None`` after ``--force`` drained what the removal would lose."""
    if args.endpoint_url is not None and not args.plan:
        raise LocalModeError("--endpoint-url reads a local mesh for --plan; a deploy goes to AWS: add --plan")
    if args.deployed is not None:
        io.line("manifest OLD -> NEW (static, as `asya plan`):")
        for line in render_plan(deploy_plan(load_side(args.deployed), manifest)):
            io.line(f"  {line}")
    state, clients = read_deployed(
        manifest,
        region=deploy_region(args.context, args.env),
        endpoint_url=args.endpoint_url,
        bucket=args.bucket,
        now=system_clock(),
    )
    for line in render_live(state):
        io.line(line)
    problem = refusal(state)
    if args.plan:
        if problem is not None:
            io.note(f"asya deploy would refuse: {problem}")
        return 1 if problem is not None else 0
    if problem is None:
        return None
    if not args.force:
        io.error(f"asya deploy: {problem}")
        return 1
    for line in drained_lines(drain_removed(state, sqs=clients.sqs, clock=system_clock)):
        io.note(f"asya deploy {line}")
    return None


def confirm_deletion(namespace: str, *, stdin: TextIO, err: TextIO) -> bool:
    """Ask for the namespace on ``err``; true when the line read from ``stdin`` is exactly it."""
    err.write(
        f"This deletes the mesh {namespace!r} with its task table asya-{namespace}-tasks and its bucket, with every "
        f"task and checkpoint in them; it cannot be undone.\nType the namespace ({namespace}) to confirm: "
    )
    err.flush()
    return stdin.readline().strip() == namespace


def destroy_plan(
    *,
    context: list[str],
    extra: list[str],
    python: str = sys.executable,
    which: Callable[[str], str | None] = shutil.which,
) -> list[list[str]]:
    """The CDK CLI commands of ``asya destroy --delete-data``: a deploy that makes the data deletable, then the
    destroy."""
    context = [*context, DELETE_DATA_CONTEXT]
    deploy = cdk_command("deploy", context=context, extra=["--require-approval", "never"], python=python, which=which)
    destroy = cdk_command("destroy", context=context, extra=["--force", *extra], python=python, which=which)
    return [deploy, destroy]


def _cdk_env(env: Mapping[str, str]) -> dict[str, str]:
    merged = dict(env)
    if not merged:  # main() was given no environment: the CLI still needs PATH and HOME to run
        merged = dict(os.environ)
    merged.setdefault(*_JSII_NOTICE)
    return merged


def _stream(command: list[str], *, cwd: Path, env: Mapping[str, str], io: CliIo) -> int:
    """Run ``command``, passing its output through as text, line by line (stderr merged into ours)."""
    with subprocess.Popen(
        command,
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        encoding="utf-8",
        errors="replace",
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            io.err.write(line)
            io.err.flush()
        return process.wait()
