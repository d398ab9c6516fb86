"""The ``asya`` command line (console script ``asya = asya_local.cli:main``).

Commands::

    asya dev    [--manifest asya.yaml] [--host 127.0.0.1] [--port 8080]    run the mesh locally until Ctrl-C
    asya dev    --artifact cdk.out [--port 8080]                           the synthesized mesh (cdk.out) instead
    asya call   FLOW | --actor NAME [--payload JSON] [--timeout S] [--no-wait] [--url URL]
    asya call   ... [--brief | --view]                                      one-line summary / the whole view
    asya status ID [--url URL]                                              the task view, pretty JSON
    asya resume ID (--input JSON | --input-file PATH) [--timeout S] [--url URL]   resume a paused task
    asya signal ID EVENT [--data JSON | --data-file PATH] [--url URL]           deliver an event to a wait_for
    asya watch  ID [ID...] [--url URL]                                      the run so far, then the SSE transcript
                                                                            (asya_local.watch_cli)
    asya list | cancel ID | retry ID | checkpoint ID | history ID           task commands (asya_local.tasks_cli)
    asya demo   [--manifest asya.yaml] [--flow text-pipeline] [--text T] [--port 8080]   the example flow end to end
    asya dlq    list [ACTOR] | show ACTOR | redrive ACTOR   [--local | --endpoint-url URL]   dead-letter queues
    asya init DIR | synth | deploy | destroy                                a project and its deployment
    asya plan   OLD NEW [--json]                                            what a deploy from OLD to NEW changes
                                                                            for work in flight (asya_local.plan_cli)

``--url``, else the running ``asya dev`` of ``--manifest`` (its state file), else env ``ASYA_URL``, else
``http://127.0.0.1:8080`` picks the gateway (``asya_local.discovery``); ``asya_local.auth`` picks how to authenticate
to it (env ``ASYA_API_KEY``, IAM signing for ``execute-api`` URLs, ``ASYA_AUTH``). ``call`` creates a task
(GW-CREATE-7); with ``--no-wait`` it prints the id, otherwise it follows the SSE stream (progress and FLY output on
stderr, ``asya_local.progress``) and prints the task view on stdout: without its ``data`` member and empty members by
default, whole with ``--view``, or as ``status:``, ``result:``/``error:`` and ``id:`` lines with ``--brief``.
``--timeout`` is the task's timeout (GW-CREATE-6); the CLI stops following 30 s after it. A task that pauses
(x-pause) stops the following: ``call`` shows the prompt and fields on stderr and, when stdin is a terminal, asks for
the input, resumes and follows on; otherwise it prints the view and exits 1 (``asya resume`` continues it;
``asya_local.resume_cli``). ``status`` adds the prompt of a paused task on stderr. Exit codes: 0 success
(``call``/``demo``: the task succeeded), 1 the task failed, was canceled or is still not terminal, 2 usage errors, no
gateway at the URL, HTTP errors (their ``{"error"}`` message is printed) and local-mode start failures.

``dev`` and ``demo`` pass ``ASYA_API_KEYS`` and ``ASYA_SSE_MAX_SECONDS`` from ``env`` to the local gateway. ``dev``
serves on exactly ``--port``, keeps the actors' JSON logs (stdout) and writes the gateway's JSON log lines, an access
line with its ``request_id`` per request among them, to stderr; ``demo`` serves on ``--port`` when it is free,
else on a free port (and says so), and quiets the actors' logs to warnings so the progress bar stays readable.
``dev`` writes ``.asya/dev/{manifest file name}.json`` next to the manifest while it runs (``asya_local.localstate``)
so that ``dlq --local`` finds its moto endpoint, and refuses to start while another ``dev`` of the same manifest
runs; ``dlq`` is documented in ``asya_local.dlq_cli``.
Configuration is read from ``argv`` and the ``env`` mapping given to :func:`main` (``os.environ`` only when ``main``
is called without one, i.e. as the console script).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType
from typing import Any, Final, TextIO

from botocore.exceptions import ClientError

from asya.exceptions import AsyaError
from asya.manifest import load_manifest
from asya_local.agents_cli import add_agent_parsers
from asya_local.auth import gateway_auth
from asya_local.childwatch import ChildWatch
from asya_local.cliargs import http_url, port, seconds
from asya_local.client import GatewayClient
from asya_local.cliio import CliIo, compact_json
from asya_local.discovery import DEFAULT_URL, URL_ENV, discover
from asya_local.dlq_cli import add_dlq_parser
from asya_local.exceptions import GatewayHttpError, GatewayUnreachableError, LocalModeError, SseStreamError
from asya_local.flow_cli import add_flow_parser
from asya_local.plan_cli import add_plan_parser
from asya_local.preflight import check_mesh
from asya_local.progress import ProgressView
from asya_local.project_cli import add_project_parsers
from asya_local.resume_cli import add_resume_parser, add_signal_parser, describe_pause, handle_pause
from asya_local.tasks_cli import add_task_parsers
from asya_local.watch_cli import watch as watch_task

__all__ = ["DEFAULT_URL", "URL_ENV", "main"]

#: How long ``call`` keeps following after the task's own timeout (the gateway fails the task at its deadline).
_FOLLOW_GRACE_SECONDS: Final = 30
#: Gateway environment variables ``dev`` and ``demo`` pass through to the local gateway (GW-AUTH-4).
_GATEWAY_PASSTHROUGH: Final = ("ASYA_API_KEYS", "ASYA_SSE_MAX_SECONDS")
#: The demo shows a progress bar; the actors' INFO lines (one JSON line per envelope) would break it up.
_DEMO_ACTOR_LOG_LEVEL: Final = "WARNING"
_DEMO_TEXT: Final = (
    "Hello World! Asya runs every actor as a Lambda behind its own queue. "
    "Locally the very same code runs against moto, and the result is great."
)


def main(
    argv: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    cwd: Path | None = None,
    stdin: TextIO | None = None,
) -> int:
    """Run one command; returns the exit code. ``cwd`` is where the running ``asya dev`` is looked for (default:
    the working directory)."""
    io = CliIo(out=stdout or sys.stdout, err=stderr or sys.stderr)
    environment = os.environ if env is None else env
    parser = _parser()
    try:
        with contextlib.redirect_stdout(io.out), contextlib.redirect_stderr(io.err):
            args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
            if hasattr(args, "url"):
                _resolve_target(parser, args, environment, cwd or Path.cwd(), io)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 2
    args.env = environment
    args.cwd = cwd or Path.cwd()
    args.stdin = stdin or sys.stdin
    try:
        return int(args.run(args, io))
    except GatewayUnreachableError as exc:
        io.error(str(exc))
    except GatewayHttpError as exc:
        io.error(_http_advice(args, exc))
    except (SseStreamError, LocalModeError, AsyaError) as exc:
        io.error(str(exc))
    except KeyboardInterrupt:
        io.error("interrupted")
        return 130
    return 2


def _http_advice(args: argparse.Namespace, exc: GatewayHttpError) -> str:
    """The gateway's refusal said as a fix on this command line: the CLI flag, not the HTTP body member, and which
    task was not found; otherwise the gateway's message, with the URL that answered for an unknown path or a failing
    server (the first thing to check)."""
    from asya_gateway.validation import NULL_PAYLOAD_REASON

    if exc.status_code == 400 and exc.message.endswith(NULL_PAYLOAD_REASON) and getattr(args, "command", "") == "call":
        return 'the task needs an input: give it with --payload JSON (for example --payload \'{"text": "hi"}\')'
    task_id = getattr(args, "id", None)
    task_path = "/api/v1/mesh/" in exc.url and "/api/v1/dev/" not in exc.url  # a task resource, not the dev history
    if exc.status_code == 404 and isinstance(task_id, str) and exc.message == "not found" and task_path:
        return f"task {task_id} not found at {args.url} (HTTP 404): check the id, or the mesh with --url"
    where = exc.url and (exc.status_code == 404 or exc.status_code >= 500)
    return f"{exc.message} (HTTP {exc.status_code} from {exc.url})" if where else exc.message


def _resolve_target(
    parser: argparse.ArgumentParser, args: argparse.Namespace, env: Mapping[str, str], cwd: Path, io: CliIo
) -> None:
    """Fill ``args.url`` (and ``args.target``, ``args.client``) from ``--url``, the running ``asya dev``,
    ``ASYA_URL`` or the default (``asya_local.discovery``); a bad URL is a usage error."""
    target, warning = discover(url=args.url, manifest=args.manifest, env=env, cwd=cwd)
    if warning is not None:
        io.error(warning)
    try:
        url = http_url(target.url)
    except argparse.ArgumentTypeError as exc:
        parser.error(f"{target.source}: {exc}")  # ASYA_URL or a state file: --url was checked by argparse
    args.url = url
    args.target = target
    args.client = lambda: GatewayClient(url, auth=gateway_auth(url, env))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asya", description="Run and call an Asya mesh.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    remote = argparse.ArgumentParser(add_help=False)
    remote.add_argument(
        "--url",
        type=http_url,
        default=None,
        help=f"gateway URL (default: the running asya dev here, else env {URL_ENV}, else {DEFAULT_URL})",
    )
    remote.add_argument(
        "--manifest", default=None, help="find the running asya dev of this manifest (default ./asya.yaml)"
    )

    dev = commands.add_parser("dev", help="run the mesh locally (moto, actors, gateway) until Ctrl-C")
    dev.add_argument("--manifest", default="asya.yaml", help="path of asya.yaml (default ./asya.yaml)")
    dev.add_argument("--host", default="127.0.0.1", help="interface the gateway listens on (default 127.0.0.1)")
    dev.add_argument("--port", type=port, default=8080, help="0 picks a free port")
    dev.add_argument(
        "--artifact", default=None, metavar="CDK_OUT", help="run the synthesized assembly (cdk.out), not the manifest"
    )
    dev.set_defaults(run=_dev)

    call = commands.add_parser("call", parents=[remote], help="create a task and follow it to its end")
    call.add_argument("flow", nargs="?", help="flow name (or use --actor)")
    call.add_argument("--actor", help="send to this actor instead of a flow")
    call.add_argument("--payload", type=_json_arg, default=None, help="the payload as JSON (default null)")
    call.add_argument("--timeout", type=seconds, default=None, help="task timeout in seconds")
    call.add_argument("--no-wait", action="store_true", help="print the task id and return")
    call.add_argument("--brief", action="store_true", help="print only the status, the result or error, and the id")
    call.add_argument("--view", action="store_true", help="print the whole task view as JSON")
    call.set_defaults(run=_call)

    status = commands.add_parser("status", parents=[remote], help="print a task view")
    status.add_argument("id", help="task id")
    status.set_defaults(run=_status)

    watch = commands.add_parser(
        "watch", parents=[remote], help="print a task's run so far, then its SSE events as they arrive"
    )
    watch.add_argument("id", nargs="+", help="task id; several ids share one stream (events carry task_id)")
    watch.set_defaults(run=watch_task)

    demo = commands.add_parser("demo", help="start the mesh, run the example flow, show progress and result")
    demo.add_argument("--manifest", default="asya.yaml", help="path of asya.yaml (default ./asya.yaml)")
    demo.add_argument("--flow", default="text-pipeline", help="flow to run (default text-pipeline)")
    demo.add_argument("--text", default=_DEMO_TEXT, help="the payload's text (default: a sample paragraph)")
    demo.add_argument("--port", type=port, default=8080, help="gateway port; a free one when it is in use")
    demo.set_defaults(run=_demo)
    add_dlq_parser(commands)
    add_task_parsers(commands, remote)
    add_resume_parser(commands, remote)
    add_signal_parser(commands, remote)
    add_project_parsers(commands)
    add_agent_parsers(commands, remote=remote)
    add_flow_parser(commands)
    add_plan_parser(commands)
    return parser


def _json_arg(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid JSON {raw!r}: {exc}") from None


# -- commands ---------------------------------------------------------------------------------------------------


def _dev(args: argparse.Namespace, io: CliIo) -> int:
    if args.artifact is not None:
        from asya_local.artifact.devrun import run_artifact

        with _sigterm_as_interrupt():
            return run_artifact(args.artifact, port=args.port, out=io.out, err=io.err)
    from asya_gateway.logs import json_lines_to
    from asya_local.devloop import DevLoop, DevOptions

    options = DevOptions(manifest=args.manifest, host=args.host, port=args.port, gateway_env=_gateway_env(args.env))
    with (
        _sigterm_as_interrupt(),
        json_lines_to(io.err),  # the access line of every request, with its X-Request-Id, as deployed (GW-GEN-4)
    ):
        try:
            return DevLoop(options, out=io.out, err=io.err).run()
        except KeyboardInterrupt:
            io.err.write("asya dev: stopping\n")
    return 0


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """``kill`` (SIGTERM) stops ``asya dev`` as cleanly as Ctrl-C does: background jobs of a non-interactive shell
    ignore SIGINT, so a process manager or script can only stop it this way."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _call(args: argparse.Namespace, io: CliIo) -> int:
    if (args.flow is None) == (args.actor is None):
        io.error("give exactly one of FLOW and --actor NAME")
        return 2
    with args.client() as client:
        created = client.create(flow=args.flow, actor=args.actor, payload=args.payload, timeout=args.timeout)
        task_id = str(created["id"])
        if args.no_wait:
            io.out.write(task_id + "\n")
            return 0
        limit = None if args.timeout is None else args.timeout + _FOLLOW_GRACE_SECONDS
        view = _follow(client, task_id, io, limit=limit)
        while view.get("status") == "paused" and handle_pause(client, view, stdin=args.stdin, err=io.err):
            view = _follow(client, task_id, io, limit=limit)
    if args.brief:
        _print_brief(view, io)
    else:
        io.print_json(view if args.view else _short_view(view))
    return 0 if view.get("status") == "succeeded" else 1


def _short_view(view: dict[str, Any]) -> dict[str, Any]:
    """The task view without its ``data`` member (the last status event's data, which repeats the view) and without
    empty members: what ``call`` prints unless ``--view`` asks for all of it."""
    return {key: value for key, value in view.items() if key != "data" and value is not None}


def _print_brief(view: dict[str, Any], io: CliIo) -> None:
    """``status: S``, then ``result: <JSON>`` or ``error: E`` (with the failed actor), then ``id: ID``."""
    status = view.get("status")
    io.line(f"status: {status}")
    if status == "succeeded":
        io.line(f"result: {compact_json(view.get('result'))}")
    elif status == "failed":
        actor = view.get("failed_actor")
        io.line(f"error: {view.get('error')}" + (f" (at {actor})" if actor else ""))
    io.line(f"id: {view.get('id')}")


def _status(args: argparse.Namespace, io: CliIo) -> int:
    with args.client() as client:
        view = client.get(args.id)
    io.print_json(view)
    if view.get("status") == "paused":
        io.err.write(describe_pause(view))
    return 0


def _demo(args: argparse.Namespace, io: CliIo) -> int:
    from asya_local.mesh import LocalMesh

    manifest = load_manifest(args.manifest)
    check_mesh(manifest, source=args.manifest, instantiate=True)
    io.err.write(f"asya demo: starting mesh {manifest.namespace!r} (moto, {len(manifest.deployed_actors())} actors)\n")
    mesh = LocalMesh(
        manifest,
        port=args.port,
        free_port_fallback=True,
        actor_log_level=_DEMO_ACTOR_LOG_LEVEL,
        gateway_env=_gateway_env(args.env),
    )
    with mesh, GatewayClient(mesh.url) as client:
        if mesh.port_was_busy:
            io.err.write(f"asya demo: port {args.port} is in use; serving on a free port instead\n")
        io.err.write(f"asya demo: gateway at {mesh.url}\n")
        created = client.create(flow=args.flow, payload={"text": args.text})
        task_id = str(created["id"])
        io.err.write(f"asya demo: task {task_id} -> flow {args.flow}\n")
        view = _follow(client, task_id, io, limit=None)
        io.out.write(f"status: {view.get('status')}\n")
        if view.get("status") != "succeeded":
            io.print_json({key: view.get(key) for key in ("error", "error_details", "failed_actor")})
            return 1
        io.out.write("result:\n")
        io.print_json(view.get("result"))
        key = view.get("checkpoint_key")
        if not isinstance(key, str) or not key:
            io.error("the task view has no checkpoint_key")
            return 1
        bucket = mesh.resources.bucket
        try:
            size = mesh.clients.s3.head_object(Bucket=bucket, Key=key)["ContentLength"]
        except ClientError as exc:
            io.error(f"checkpoint s3://{bucket}/{key} not found: {exc.response['Error']['Code']}")
            return 1
        line = view.get("checkpoint_line")
        io.out.write(f"checkpoint: s3://{bucket}/{key} line {line} ({size} bytes, verified in moto S3)\n")
        io.out.flush()
    return 0


def _gateway_env(env: Mapping[str, str]) -> dict[str, str]:
    """The gateway settings a local run takes from the environment (API keys for ``gateway.auth.mode: api_key``)."""
    return {name: env[name] for name in _GATEWAY_PASSTHROUGH if name in env}


def _follow(client: GatewayClient, task_id: str, io: CliIo, *, limit: float | None) -> dict[str, Any]:
    """Show the task's events until it ends (or ``limit`` seconds pass), then return its task view."""
    view = ProgressView(io.err, tty=io.err.isatty(), columns=shutil.get_terminal_size((100, 24)).columns)
    # the children's retries and failures, labelled with the child, read from the view's child tree (GW-TASK-9)
    children = ChildWatch(lambda: client.get(task_id), io.note)
    deadline = None if limit is None else time.monotonic() + limit
    try:
        for event in client.events(task_id).events():
            view.on_event(event)
            if event.event == "status" and event.json().get("status") == "paused":
                break  # not terminal, but nothing moves until someone resumes it
            if deadline is not None and time.monotonic() > deadline:
                io.error(f"stopped following task {task_id} after {limit:.0f} s")
                break
            children.poll()
    finally:
        view.finish()
    final = client.get(task_id)
    children.update(final)
    summary = children.summary()
    if summary is not None:
        io.note(summary)
    return final
