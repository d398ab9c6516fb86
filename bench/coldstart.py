"""Benchmark 5: import time of the actor entry point and the gateway app in fresh processes, against boto3 alone.

Each target is imported ``runs`` times (default :data:`IMPORT_DEPTHS`), each in a fresh ``python -X importtime -c
...`` process; the figure of one run is the sum of the ``self`` column of every line (every module imported, the
interpreter's own start-up included, identically for every target). The median over the runs is compared with ``import
boto3`` measured in the same loop (runs interleaved, so machine load hits every target alike). The report also shows
the median by top-level package, which says where the time goes.

Run ``i`` imports from ``(i % IMPORT_DEPTHS) * DEPTH_STEP`` nested function calls, every target alike. CPython 3.11
keeps frames in chunks of a per-thread data stack and frees a chunk as soon as the stack unwinds out of it, so an
import whose recursive work (the regex compiler, above all) keeps crossing a chunk boundary maps and unmaps memory on
every crossing. Measured here: ``import asya.sidecar`` took 204 to 274 ms depending on the importer's depth alone,
``import boto3`` 144 to 160 ms. The depth Lambda's bootstrap imports a handler from is its own, so the median over
depths is the fair figure, not whichever depth ``-c "import x"`` happens to hit. The swings repeat over a cycle of
some tens of frames, and any change to code that runs while boto3 imports moves where they fall: 8 neighbouring depths
(as this bench first used) could show a 6 ms saving as a 15 ms loss, so the runs sweep depths 0 to 195 in steps of 5.

Bytecode: the measured runs read bytecode cached under ``bench/results/pycache`` (``PYTHONPYCACHEPREFIX``; one
unmeasured import per target writes it), whatever ``PYTHONDONTWRITEBYTECODE`` says, so the figures do not depend on
the state of ``__pycache__`` directories. The layers the CDK app builds ship no bytecode (``--no-compile``, ``*.pyc``
excluded) and ``/opt`` is read-only in Lambda, so a deployed actor compiles its layer packages at every cold start:
``actor_without_layer_bytecode`` estimates that, adding to the cached figure what the layer packages (everything
of :data:`LAYER_PACKAGES`) cost when imported with no bytecode at all.

A further fresh process imports ``asya.sidecar``, builds an ``ActorRuntime`` with tracing off, and counts the
Powertools ``Tracer`` objects alive and whether the X-Ray SDK was imported: there must be none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final

from bench.stats import median, summarize

__all__ = [
    "DEPTH_STEP",
    "IMPORT_DEPTHS",
    "LAYER_PACKAGES",
    "TARGETS",
    "by_package",
    "import_code",
    "parse_importtime",
    "run",
    "tracer_check",
]

#: name -> module imported; ``boto3`` is the reference.
TARGETS: Final = {
    "boto3": "boto3",
    "actor": "asya.sidecar",
    "gateway": "asya_gateway.app",
    "python": "sys",
}
_REPO: Final = Path(__file__).resolve().parent.parent
#: Import roots an actor gets from its layers (the asya layer; the dependency layer: Powertools and its one
#: dependency the runtime lacks); boto3, botocore and their dependencies come with the Lambda runtime.
LAYER_PACKAGES: Final = ("asya", "asya_crew", "aws_lambda_powertools", "typing_extensions")
#: Importer stack depths the runs cycle through, ``DEPTH_STEP`` apart (see the module docstring).
IMPORT_DEPTHS: Final = 40
DEPTH_STEP: Final = 5


def import_code(module: str, depth: int) -> str:
    """Python source that imports ``module`` from ``depth`` nested calls (0: from one plain function call). Pure."""
    return f"def _nest(n):\n    if n:\n        return _nest(n - 1)\n    import {module}\n_nest({depth})\n"


def parse_importtime(stderr: str) -> list[tuple[str, int]]:
    """``(module, self microseconds)`` of every ``import time:`` line of ``python -X importtime`` output."""
    out: list[tuple[str, int]] = []
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        columns = line[len("import time:") :].split("|")
        if len(columns) != 3 or not columns[0].strip().isdigit():
            continue  # the header line
        out.append((columns[2].strip(), int(columns[0])))
    return out


def by_package(entries: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Self time summed by top-level package (``botocore.client`` -> ``botocore``)."""
    totals: dict[str, int] = defaultdict(int)
    for module, micros in entries:
        totals[module.split(".", 1)[0]] += micros
    return dict(totals)


def _env(pycache: Path, *, write_bytecode: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    if not write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _import_once(module: str, env: Mapping[str, str], depth: int = 0) -> list[tuple[str, int]]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", import_code(module, depth)],
        cwd=_REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        check=True,
    )
    return parse_importtime(result.stderr)


_TRACER_PROBE: Final = """
import gc, json, sys
from asya.config import ActorConfig
from asya.sidecar import ActorRuntime
config = ActorConfig.from_env({"ASYA_NAMESPACE": "bench", "ASYA_ACTOR": "echo", "ASYA_HANDLER": "bench.handlers.echo",
                               "ASYA_TABLE": "t", "ASYA_BUCKET": "b", "POWERTOOLS_LOG_LEVEL": "ERROR"})
runtime = ActorRuntime(config, sqs=object(), dynamodb=object(), s3=object())
tracer_module = sys.modules.get("aws_lambda_powertools.tracing.tracer")
tracers = 0 if tracer_module is None else sum(isinstance(o, tracer_module.Tracer) for o in gc.get_objects())
print(json.dumps({"tracers": tracers, "xray_sdk_imported": "aws_xray_sdk" in sys.modules}))
"""


def tracer_check() -> dict[str, Any]:
    """After building an actor runtime with tracing off, in a fresh process: ``tracers`` (Powertools ``Tracer``
    objects alive) and ``xray_sdk_imported``."""
    result = subprocess.run(
        [sys.executable, "-c", _TRACER_PROBE],
        cwd=_REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def _medians(samples: list[dict[str, int]]) -> dict[str, float]:
    names = {package for sample in samples for package in sample}
    return {package: median([sample.get(package, 0) / 1000 for sample in samples]) for package in names}


def run(
    *, runs: int = IMPORT_DEPTHS, source_runs: int = 3, pycache: Path = _REPO / "bench" / "results" / "pycache"
) -> dict[str, Any]:
    """Median import times with cached bytecode (every target), then the actor's without any bytecode."""
    cached = _env(pycache, write_bytecode=True)
    for module in TARGETS.values():
        _import_once(module, cached)  # writes the bytecode the measured runs read
    totals: dict[str, list[float]] = defaultdict(list)
    packages: dict[str, list[dict[str, int]]] = defaultdict(list)
    for index in range(runs):
        for name, module in TARGETS.items():
            entries = _import_once(module, cached, depth=(index % IMPORT_DEPTHS) * DEPTH_STEP)
            totals[name].append(sum(micros for _, micros in entries) / 1000)
            packages[name].append(by_package(entries))
    out: dict[str, Any] = {"runs": runs, "depths": min(runs, IMPORT_DEPTHS), "targets": {}}
    for name, module in TARGETS.items():
        package_ms = _medians(packages[name])
        top = dict(sorted(package_ms.items(), key=lambda kv: -kv[1])[:8])
        out["targets"][name] = {"module": module, "ms": summarize(totals[name]).to_dict(), "top_packages": top}
    boto3_ms = out["targets"]["boto3"]["ms"]["median"]
    out["actor_over_boto3"] = out["targets"]["actor"]["ms"]["median"] / boto3_ms
    out["gateway_over_boto3"] = out["targets"]["gateway"]["ms"]["median"] / boto3_ms
    with tempfile.TemporaryDirectory(prefix="asya-bench-pyc-") as empty:
        source = _env(Path(empty), write_bytecode=False)
        samples = [
            by_package(_import_once(TARGETS["actor"], source, depth=(i % IMPORT_DEPTHS) * DEPTH_STEP))
            for i in range(source_runs)
        ]
    source_ms = _medians(samples)
    cached_ms = _medians(packages["actor"])
    layer = [p for p in LAYER_PACKAGES if p in source_ms]
    penalty = sum(source_ms[p] - cached_ms.get(p, 0.0) for p in layer)
    out["actor_without_layer_bytecode"] = {
        "runs": source_runs,
        "layer_packages": layer,
        "compile_penalty_ms": penalty,
        "estimated_ms": out["targets"]["actor"]["ms"]["median"] + penalty,
    }
    out["tracer"] = tracer_check()
    return out
