"""``asya flow check`` and ``asya flow show``: compile flows written as Python (docs/flows.md) without a mesh;
``asya flow gc``: collect the kept programs no task needs any more (``asya_local.flowgc``).

::

    asya flow check FILE [--manifest PATH | --no-manifest]
                                                     every compile error of FILE, exit 1 when there is one; actor
                                                     names are checked against the manifest (default: ./asya.yaml,
                                                     else the nearest asya.yaml in FILE's directory or above it),
                                                     and with it a warning (exit 0) at each call of an actor whose
                                                     handler can return two payloads (asya_deploy.frames); no manifest
                                                     found fails the check (exit 1) unless --no-manifest asks for
                                                     the language only
    asya flow show FLOW [--manifest asya.yaml] [--out DIR] [--json]
                                                     the compiled program of FLOW; writes DIR/FLOW.dot (Graphviz)
                                                     and DIR/FLOW.mmd (Mermaid), DIR defaults to the working directory
    asya flow gc [--manifest asya.yaml] [--local | --endpoint-url URL] [--region R] [--bucket B] [--grace SECONDS]
                 [--dry-run]                         retire, then delete, programs of flows/ that neither the manifest
                                                     nor a paused task names (docs/deploy.md "Upgrading a mesh")
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from asya.flows.isolated import check_isolated
from asya.flows.render import listing, to_dot, to_mermaid
from asya.manifest import load_manifest
from asya_deploy.frames import HandlerSource, two_frame_warnings
from asya_local.cliargs import http_url, seconds
from asya_local.cliio import CliIo
from asya_local.exceptions import LocalModeError

if TYPE_CHECKING:
    _Commands = argparse._SubParsersAction[argparse.ArgumentParser]

__all__ = ["add_flow_parser"]

_MANIFEST_NAME = "asya.yaml"


def add_flow_parser(commands: _Commands) -> None:
    flow = commands.add_parser("flow", help="compile flows written as Python: check a file, show a flow")
    actions = flow.add_subparsers(dest="flow_command", required=True, metavar="ACTION")
    check = actions.add_parser("check", help="report every compile error of a flow file")
    check.add_argument("file", help="the flow's Python file")
    where = check.add_mutually_exclusive_group()
    where.add_argument(
        "--manifest", default=None, help="check actor names against it (default: ./asya.yaml, else one above FILE)"
    )
    where.add_argument("--no-manifest", action="store_true", help="check the language only, without the actor names")
    check.set_defaults(run=_check)
    show = actions.add_parser("show", help="print a flow's compiled program; write its DOT and Mermaid diagrams")
    show.add_argument("flow", help="the flow's name in the manifest")
    show.add_argument("--manifest", default="asya.yaml", help="path of asya.yaml (default ./asya.yaml)")
    show.add_argument("--out", default=".", help="directory for FLOW.dot and FLOW.mmd (default: the working one)")
    show.add_argument("--json", action="store_true", help="print the program as JSON instead of the listing")
    show.set_defaults(run=_show)
    gc = actions.add_parser("gc", help="delete the kept flow programs that no deployment and no paused task needs")
    gc.add_argument("--manifest", default="asya.yaml", help="path of asya.yaml (default ./asya.yaml)")
    where = gc.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="the mesh of the running `asya dev` for this manifest")
    where.add_argument("--endpoint-url", type=http_url, help="S3 endpoint (env AWS_ENDPOINT_URL)")
    gc.add_argument("--region", help="AWS region (env AWS_REGION)")
    gc.add_argument("--bucket", help="the storage bucket (default: the local mode's name for the namespace)")
    gc.add_argument("--grace", type=seconds, help="seconds a program stays retired before it is deleted")
    gc.add_argument("--dry-run", action="store_true", help="print what would be done; change nothing")
    gc.set_defaults(run=_gc)


def _find_manifest(cwd: Path, flow: Path) -> Path | None:
    """``./asya.yaml``, else the nearest ``asya.yaml`` in the flow file's directory or above it (the project root of
    ``flows/f.py``), as git finds its repository."""
    for directory in (cwd, *flow.resolve().parents):
        candidate = directory / _MANIFEST_NAME
        if candidate.is_file():
            return candidate
    return None


def _check(args: argparse.Namespace, io: CliIo) -> int:
    cwd = Path(args.cwd)
    path = cwd / args.file
    try:
        source = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise LocalModeError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise LocalModeError(f"{path} is not UTF-8 text: {exc.reason}") from None
    manifest_path: Path | None = None
    if args.manifest is not None:
        manifest_path = cwd / args.manifest
        if not manifest_path.is_file():
            raise LocalModeError(f"manifest not found: {manifest_path} (give its path, or --no-manifest)")
    elif not args.no_manifest:
        manifest_path = _find_manifest(cwd, path)
    manifest = load_manifest(manifest_path) if manifest_path is not None else None
    actors = set(manifest.actors) if manifest is not None else None
    # in a child process: a file that kills the parser is a compile error, not a crash of this one (P-FLOW-22)
    problems = check_isolated(source, filename=str(path), actors=actors)
    warnings = []
    if manifest is not None and not problems:  # a file that compiles parses here too
        handlers = {
            name: HandlerSource(spec.handler, manifest.code_dir(name)) for name, spec in manifest.actors.items()
        }
        warnings = two_frame_warnings(source, filename=args.file, actors=handlers)
    for problem in sorted([*problems, *warnings], key=lambda p: (p.line, p.col)):
        io.line(str(problem))
    if manifest_path is not None:
        io.note(f"actor names checked against {manifest_path}")
    elif not args.no_manifest:
        # a bare "ok" here would pass a flow that calls actors the mesh does not have
        io.note(
            f"{args.file}: actor names not checked: no {_MANIFEST_NAME} in {cwd} nor above {path.parent}; "
            "give it with --manifest PATH, or check the language only with --no-manifest"
        )
    if problems:
        io.note(f"{len(problems)} error(s) in {args.file}")
        return 1
    if manifest_path is None and not args.no_manifest:
        return 1
    scope = " (language only; actor names not checked: --no-manifest)" if args.no_manifest else ""
    io.note(f"{args.file}: ok{scope}" + (f", {len(warnings)} warning(s)" if warnings else ""))
    return 0


def _show(args: argparse.Namespace, io: CliIo) -> int:
    manifest = load_manifest(args.manifest)  # compiles every flow of the manifest, reporting every error
    spec = manifest.flows.get(args.flow)
    if spec is None:
        raise LocalModeError(f"flow not found: {args.flow} (flows: {', '.join(sorted(manifest.flows)) or 'none'})")
    program = spec.program
    if program is None:
        raise LocalModeError(f"flow {args.flow} is a static route {spec.route}, not a flow written as Python")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dot, mermaid = out / f"{args.flow}.dot", out / f"{args.flow}.mmd"
    dot.write_text(to_dot(program), encoding="utf-8")
    mermaid.write_text(to_mermaid(program), encoding="utf-8")
    if args.json:
        io.print_json(program.to_json())
    else:
        io.out.write(listing(program))
        io.out.write("\n" + to_mermaid(program))
    io.note(f"wrote {dot} and {mermaid}")
    return 0


def _gc(args: argparse.Namespace, io: CliIo) -> int:
    from urllib.parse import urlsplit

    import boto3

    from asya import naming
    from asya.timeutil import system_clock
    from asya_local.flowgc import collect, default_grace
    from asya_local.localstate import read_local_state, state_path
    from asya_local.moto_server import DEFAULT_REGION, make_clients

    manifest = load_manifest(args.manifest)
    endpoint, region = args.endpoint_url, args.region
    if args.local:
        state = read_local_state(state_path(args.manifest))
        endpoint, region = state.endpoint_url, region or state.region
    if endpoint is not None and urlsplit(endpoint).hostname in ("127.0.0.1", "localhost", "::1"):
        s3 = make_clients(endpoint, region=region or DEFAULT_REGION).s3  # moto: fake credentials
    else:
        s3 = boto3.Session(region_name=region).client("s3", endpoint_url=endpoint)
    grace = timedelta(seconds=args.grace) if args.grace is not None else default_grace(manifest)
    bucket = args.bucket or naming.bucket_name(manifest.namespace)
    done = collect(manifest, s3=s3, bucket=bucket, grace=grace, now=system_clock, dry_run=args.dry_run)
    io.print_json(done.to_json())
    verb = "would delete" if args.dry_run else "deleted"
    io.note(
        f"{len(done.kept)} kept, {len(done.retired)} newly retired, {len(done.waiting)} retired for less than "
        f"{grace}, {len(done.deleted)} {verb}"
    )
    return 0
