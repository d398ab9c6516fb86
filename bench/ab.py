"""Benchmark 1b and 5b: the layer of a baseline git ref against the current tree, interleaved in one run (A/B).

A loaded machine inflates every absolute figure (CPU time included: cores share caches and the scheduler), so a
target that says "faster than the build of a given day" is measured as a ratio taken in the same run. The baseline's
runtime packages (``layers/sidecar/python`` and ``crew`` at the ref, by ``git archive``) are unpacked into a
temporary directory; each side runs in its own process whose import path puts that side's packages first, and both
use this tree's harness (:mod:`bench.overhead`, :mod:`bench.fakes`, :mod:`bench.handlers`), so only the layer differs.

Overhead: two warm worker processes, one per side, each with one ``ActorRuntime`` of the ``echo`` actor and fake
clients (as :func:`bench.overhead.run`'s ``fake`` case, 1 KB payload). The parent asks them in turn for a chunk of
batches, the order of the two swapped every round, so load that comes and goes hits both alike. Per batch: layer CPU
time minus the handler called directly, per envelope.

Cold import: fresh ``python -X importtime`` processes of ``import boto3``, the current actor entry and the baseline's,
interleaved, over the importer stack depths of :mod:`bench.coldstart` and with cached bytecode, the same way.

The baseline ref is ``--baseline`` of ``python -m bench``, else ``ASYA_BENCH_BASELINE``, else
:data:`DEFAULT_BASELINE`: the last commit before this round's merges, the build the round's targets were set
against (210 µs per 1 KB envelope, actor import 1.47x boto3, as measured then).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any, Final

from bench.coldstart import DEPTH_STEP, IMPORT_DEPTHS, import_code, parse_importtime
from bench.stats import median, ratio, summarize

__all__ = ["BASELINE_ENV", "DEFAULT_BASELINE", "RUNTIME_DIRS", "BaselineError", "baseline_ref", "extract", "run"]

BASELINE_ENV: Final = "ASYA_BENCH_BASELINE"
DEFAULT_BASELINE: Final = "8ef6e90"
#: What an actor imports from its layers, relative to a tree's root.
RUNTIME_DIRS: Final = ("layers/sidecar/python", "crew")
_REPO: Final = Path(__file__).resolve().parent.parent
_PAYLOAD_BYTES: Final = 1024

#: The worker: reads a number of batches per line, answers one JSON line of per-envelope overhead samples (µs).
_WORKER: Final = """
import gc, json, os, sys, time
from contextlib import redirect_stdout
import asya
from bench.fakes import InMemoryAws
from bench.handlers import echo
from bench.overhead import BATCH_SIZE, make_event, make_payload, make_runtime

class Context:
    function_name = "asya-bench-echo"
    memory_limit_in_mb = 256
    aws_request_id = "bench"
    def get_remaining_time_in_millis(self):
        return 300_000

aws = InMemoryAws()
with open(os.devnull, "w") as sink, redirect_stdout(sink):
    runtime = make_runtime(aws)
context = Context()
payload = make_payload(int(sys.argv[1]))
print(json.dumps({"asya": asya.__file__}), flush=True)
for line in sys.stdin:
    samples = []
    for _ in range(int(line)):
        event = make_event(payload)
        aws.reset()
        started = time.process_time_ns()
        response = runtime.handle(event, context)
        spent = time.process_time_ns() - started
        if response.get("batchItemFailures"):
            raise SystemExit(f"records failed: {response}")
        payloads = [json.loads(record["body"])["payload"] for record in event["Records"]]
        started = time.process_time_ns()
        for item in payloads:
            echo(item)
        direct = time.process_time_ns() - started
        samples.append((spent - direct) / BATCH_SIZE / 1000)
    gc.collect()
    print(json.dumps(samples), flush=True)
"""


class BaselineError(Exception):
    """The baseline ref names no commit here."""


def baseline_ref(explicit: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """The baseline git ref: ``explicit``, else ``env[BASELINE_ENV]``, else :data:`DEFAULT_BASELINE`. Pure."""
    if explicit:
        return explicit
    chosen = (os.environ if env is None else env).get(BASELINE_ENV, "").strip()
    return chosen or DEFAULT_BASELINE


def extract(ref: str, into: Path) -> str:
    """Unpack the runtime packages (:data:`RUNTIME_DIRS`) of ``ref`` under ``into``; the full commit id."""
    found = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        cwd=_REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    if found.returncode != 0:
        raise BaselineError(
            f"baseline ref {ref!r} is no commit of this repository (a shallow clone lacks it): "
            f"choose one with --baseline or {BASELINE_ENV}"
        )
    commit = found.stdout.strip()
    archive = subprocess.run(
        ["git", "archive", "--format=tar", commit, *RUNTIME_DIRS], cwd=_REPO, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return commit


def _env(tree: Path, pycache: Path) -> dict[str, str]:
    """This process's environment with ``tree``'s runtime packages first on the path, then this tree's harness."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = os.pathsep.join([*(str(tree / d) for d in RUNTIME_DIRS), str(_REPO)])
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    env.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
    return env


class _Worker:
    def __init__(self, tree: Path, pycache: Path) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(_PAYLOAD_BYTES)],
            cwd=_REPO,
            env=_env(tree, pycache),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.module = json.loads(self._read())["asya"]

    def _read(self) -> str:
        stdout: IO[str] | None = self._process.stdout
        line = stdout.readline() if stdout is not None else ""
        if not line:
            raise RuntimeError(f"A/B worker exited with {self._process.wait()}")
        return line

    def batches(self, count: int) -> list[float]:
        assert self._process.stdin is not None
        self._process.stdin.write(f"{count}\n")
        self._process.stdin.flush()
        samples: list[float] = json.loads(self._read())
        return samples

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=60)


def _overhead(trees: Mapping[str, Path], pycache: Path, *, rounds: int, chunk: int, warmup: int) -> dict[str, Any]:
    workers = {side: _Worker(tree, pycache) for side, tree in trees.items()}
    try:
        samples: dict[str, list[float]] = {side: [] for side in trees}
        for worker in workers.values():
            worker.batches(warmup)
        order = list(trees)
        for index in range(rounds):
            for side in order if index % 2 == 0 else reversed(order):
                samples[side] += workers[side].batches(chunk)
    finally:
        for worker in workers.values():
            worker.close()
    out: dict[str, Any] = {
        "rounds": rounds,
        "batches_per_round": chunk,
        "modules": {side: worker.module for side, worker in workers.items()},
    }
    for side, values in samples.items():
        out[side] = summarize(values).to_dict()
    out["current_over_baseline"] = ratio(out["current"]["median"], out["baseline"]["median"])
    return out


def _import_ms(module: str, env: Mapping[str, str], depth: int) -> float:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", import_code(module, depth)],
        cwd=_REPO,
        env=dict(env),
        capture_output=True,
        text=True,
        check=True,
    )
    return sum(micros for _, micros in parse_importtime(result.stderr)) / 1000


def _coldstart(trees: Mapping[str, Path], pycache: Path, *, runs: int) -> dict[str, Any]:
    targets = {"boto3": ("boto3", trees["current"])} | {side: ("asya.sidecar", tree) for side, tree in trees.items()}
    envs = {name: _env(tree, pycache) for name, (_module, tree) in targets.items()}
    for name, (module, _tree) in targets.items():
        _import_ms(module, envs[name], 0)  # writes the bytecode the measured runs read
    totals: dict[str, list[float]] = {name: [] for name in targets}
    for index in range(runs):
        depth = (index % IMPORT_DEPTHS) * DEPTH_STEP
        names = list(targets) if index % 2 == 0 else list(reversed(targets))
        for name in names:
            totals[name].append(_import_ms(targets[name][0], envs[name], depth))
    boto3 = median(totals["boto3"])
    out: dict[str, Any] = {"runs": runs, "ms": {name: summarize(values).to_dict() for name, values in totals.items()}}
    for side in trees:
        out[f"{side}_over_boto3"] = ratio(median(totals[side]), boto3)
    return out


def run(
    *,
    baseline: str | None = None,
    quick: bool = False,
    sections: Sequence[str] = ("overhead", "coldstart"),
    pycache: Path = _REPO / "bench" / "results" / "pycache",
) -> dict[str, Any]:
    """The A/B overhead and cold-import figures of the current tree against ``baseline`` (:func:`baseline_ref`)."""
    ref = baseline_ref(baseline)
    with tempfile.TemporaryDirectory(prefix="asya-bench-baseline-") as tmp:
        commit = extract(ref, Path(tmp))
        trees = {"current": _REPO, "baseline": Path(tmp)}
        out: dict[str, Any] = {"baseline": {"ref": ref, "commit": commit}}
        if "overhead" in sections:
            out["overhead"] = _overhead(
                trees, pycache, rounds=8 if quick else 40, chunk=5 if quick else 10, warmup=5 if quick else 30
            )
        if "coldstart" in sections:
            out["coldstart"] = _coldstart(trees, pycache, runs=6 if quick else IMPORT_DEPTHS)
    return out
