"""``asya init DIR``: a project of the user's own, for ``asya dev``, its tests, ``asya synth`` and ``asya deploy``.

Writes, in ``DIR`` (created; refused when it already holds any of these files):

- ``asya.yaml``: namespace (``--namespace``, else ``DIR``'s name made valid), one actor ``greet``, one flow ``hello``
  with an input schema;
- ``functions/hello.py``: the actor;
- ``tests/test_hello.py``: a test of the flow on a local mesh, with the shipped test client
  (``asya_local.testing.run_mesh``);
- ``app.py`` and ``cdk.json``: the CDK app of the mesh, built with ``asya_cdk.build_app`` from the installed runtime
  code (``asya_cdk.installed.installed_root``), writing into the project's own ``cdk.out/``; ``cdk.json`` carries the
  same CDK feature flags and ``asya:*`` defaults as this repository's (``asya_local/data/cdk_context.json``);
- ``.gitignore`` and a short ``README.md``.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Final

from asya import naming
from asya_local.exceptions import LocalModeError

__all__ = ["PROJECT_FILES", "default_namespace", "scaffold"]

_MANIFEST: Final = """\
# The mesh of this project. `asya dev` runs it locally, `asya synth` / `asya deploy` deploy it with CDK.
namespace: {namespace}              # queues are asya-{namespace}-<actor>

actors:
  greet:
    handler: hello.greet            # functions/hello.py, function greet

flows:
  hello:
    description: Greet someone by name
    route: [greet]
    timeout: 60                     # task deadline in seconds
    input_schema:
      type: object
      required: [name]
      properties:
        name: {{type: string, minLength: 1}}
"""

_ACTOR: Final = '''\
"""The actors of this project: each function takes the payload and returns the next one."""

from __future__ import annotations

from typing import Any


def greet(payload: dict[str, Any]) -> dict[str, Any]:
    return {**payload, "greeting": f"Hello, {payload['name']}!"}
'''

_TEST: Final = '''\
"""The flow `hello` end to end on a local mesh (moto, the actors, the gateway), as `asya dev` runs it."""

from __future__ import annotations

from pathlib import Path

from asya_local.testing import run_mesh

MANIFEST = Path(__file__).resolve().parent.parent / "asya.yaml"


def test_hello_greets_by_name() -> None:
    with run_mesh(MANIFEST) as mesh:
        view = mesh.call("hello", {"name": "Ada"})
    assert view["status"] == "succeeded", view.get("error")
    assert view["result"] == {"name": "Ada", "greeting": "Hello, Ada!"}
'''

_APP: Final = '''\
"""The CDK app of this project: the mesh of asya.yaml as one stack, asya-{namespace}.

`asya synth`, `asya deploy` and `asya destroy` run it with the pinned CDK CLI; `npx aws-cdk@2.1148.1 synth` works
too. The runtime code (sidecar layer, crew, gateway) is the installed asya-serverless's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from asya.exceptions import AsyaError
from asya_cdk import build_app, load_cdk_context
from asya_cdk.installed import installed_root

HERE = Path(__file__).resolve().parent


def main() -> int:
    context = {"manifest": str(HERE / "asya.yaml"), **load_cdk_context(HERE / "cdk.json")}
    outdir = os.environ.get("CDK_OUTDIR") or str(HERE / "cdk.out")
    try:
        root = installed_root(staging=HERE / ".asya" / "source")
        built = build_app(repo_root=root, context=context, env=os.environ, outdir=outdir)
        built.app.synth()
    except AsyaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"synthesized {built.stack.stack_name} -> {outdir}/{built.stack.artifact_id}.template.json", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
'''

_GITIGNORE: Final = "cdk.out/\n.asya/\n.cdk.staging/\n__pycache__/\n.venv/\ncdk-outputs.json\n"

_README: Final = """\
# {namespace}

An [asya-serverless](https://pypi.org/project/asya-serverless/) mesh.

```bash
asya dev                                   # the mesh on http://127.0.0.1:8080, reloading functions/ as you edit
asya call hello --payload '{{"name": "Ada"}}' --brief
python -m pytest tests                     # the flow end to end on a local mesh
asya synth                                 # CloudFormation into ./cdk.out (no AWS account needed)
asya deploy                                # with your AWS credentials; asya destroy removes the stack
```
"""

#: Every file ``scaffold`` writes, relative to the project directory.
PROJECT_FILES: Final = (
    "asya.yaml",
    "functions/hello.py",
    "tests/test_hello.py",
    "app.py",
    "cdk.json",
    ".gitignore",
    "README.md",
)


def default_namespace(directory: Path) -> str:
    """``directory``'s name made a valid namespace (lower case, ``[a-z][a-z0-9-]*``), ``app`` when nothing is left."""
    name = re.sub(r"[^a-z0-9-]+", "-", directory.resolve().name.lower()).strip("-")
    name = re.sub(r"^[^a-z]+", "", name)
    return name or "app"


def scaffold(directory: Path, *, namespace: str | None = None) -> list[Path]:
    """Write the project into ``directory``; returns the files written. Nothing is overwritten."""
    chosen = namespace if namespace is not None else default_namespace(directory)
    naming.validate_namespace(chosen, field="--namespace")
    existing = [name for name in PROJECT_FILES if (directory / name).exists()]
    if existing:
        raise LocalModeError(f"{directory} already has {', '.join(existing)}: choose an empty or new directory")
    context = json.loads(resources.files("asya_local").joinpath("data", "cdk_context.json").read_text("utf-8"))
    cdk_json = {
        "app": "python3 app.py",
        "watch": {"include": ["app.py", "asya.yaml", "functions/**"], "exclude": ["**/__pycache__", "cdk.out"]},
        **context,
    }
    contents = {
        "asya.yaml": _MANIFEST.format(namespace=chosen),
        "functions/hello.py": _ACTOR,
        "tests/test_hello.py": _TEST,
        "app.py": _APP.replace("{namespace}", chosen),
        "cdk.json": json.dumps(cdk_json, indent=2) + "\n",
        ".gitignore": _GITIGNORE,
        "README.md": _README.format(namespace=chosen),
    }
    written = []
    for name in PROJECT_FILES:
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(contents[name], encoding="utf-8")
        written.append(path)
    return written
