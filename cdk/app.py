"""Composition root of the CDK app: synthesizes the mesh of ``asya.yaml`` into ``cdk.out/``.

    .venv/bin/python cdk/app.py [-c manifest=path/to/asya.yaml] [-c asya:region=eu-west-1]

runs offline with no AWS account (the stack is environment-agnostic: region from context ``asya:region``, else
``CDK_DEFAULT_REGION``, else us-east-1; account unresolved) and writes ``cdk.out/asya-{namespace}.template.json``.
Under the CDK CLI (``npx aws-cdk@2.1148.1 deploy``, run from the repository root) the CLI's ``-c`` values and output
directory apply instead. Context keys: ``asya_cdk.settings``. After synthesis the templates are checked against the
limits a deployment would hit (``asya_cdk.limits``): exit 1 listing every one.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from asya.exceptions import AsyaError
from asya_cdk import build_app, load_cdk_context, synthesize

REPO = Path(__file__).resolve().parent.parent


def _parse_context(pairs: list[str]) -> dict[str, str]:
    context: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"app.py: -c expects KEY=VALUE, got {pair!r}")
        context[key] = value
    return context


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Synthesize the asya mesh stack.")
    parser.add_argument("-c", "--context", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    context = {**load_cdk_context(REPO / "cdk.json"), **_parse_context(args.context)}
    outdir = os.environ.get("CDK_OUTDIR") or str(REPO / "cdk.out")
    try:
        built = build_app(repo_root=REPO, context=context, env=os.environ, outdir=outdir)
        _, report = synthesize(built)
    except AsyaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"synthesized {built.stack.stack_name} -> {outdir}/{built.stack.artifact_id}.template.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
