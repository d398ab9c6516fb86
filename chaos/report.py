"""The chaos report: the fault matrix of one ``make chaos`` run as Markdown (``chaos/REPORT.md``).

One row per scenario: its fault rates, tasks and outcomes, faults played, the conditional-check failures the actors
met (hop-claim races lost, stale writes), handler calls and repeated runs, dead letters, the requests clients sent
again and the SSE streams they resumed (gateway restarts), the late child copies sent after every task ended (with
the runs across a task's end, counted apart), the forged producer posts and crew SETs played, then the violation
count of each property of :data:`chaos.checker.PROPERTIES` (0 is a pass); below the table, the first violations of each
failing property, so a failure can be chased from the report alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from chaos.checker import PROPERTIES
from chaos.run import ScenarioResult

__all__ = ["render"]

_SHOWN_VIOLATIONS = 5


def render(results: Sequence[ScenarioResult], *, header: str, skipped: Sequence[str] = ()) -> str:
    lines = [
        "# Chaos report",
        "",
        header,
        "",
        "| scenario | rates | tasks | outcomes | faults played | conditional-check failures | "
        "handler calls (repeated runs; after a lease) | DLQ | "
        "client retries (creations cut after sending); SSE resumes | "
        "late child copies (runs across the end, counted apart); forged posts; crew SETs; layer-header SETs | "
        + " | ".join(PROPERTIES.values())
        + " | seconds |",
        "|" + "---|" * (10 + len(PROPERTIES) + 1),
    ]
    for result in results:
        rates = ", ".join(f"{name} {rate:g}" for name, rate in result.scenario.rates.active().items()) or "none"
        outcomes = ", ".join(f"{count} {status}" for status, count in sorted(result.outcomes.items()))
        played = ", ".join(f"{count} {name}" for name, count in sorted(result.played.items())) or "0"
        counts = " | ".join(str(len(result.violations.get(name, []))) for name in PROPERTIES)
        lines.append(
            f"| {result.scenario.name} | {rates} | {result.tasks} | {outcomes} | {played} | "
            f"{result.observed['conditional_check_failed']} | "
            f"{result.handler_calls} ({result.duplicate_runs}; {result.runs_after_lease}) | {result.dead_letters} | "
            f"{result.client_retries} ({result.ambiguous_creates}); {result.sse_resumes} | "
            f"{result.late_copies} ({result.runs_across_end}); {result.forged_posts}; {result.crew_sets}; "
            f"{result.layer_sets} | "
            f"{counts} | "
            f"{result.seconds:.0f} |"
        )
    lines += ["", f"Total violations: {sum(sum(len(v) for v in r.violations.values()) for r in results)}."]
    if skipped:
        lines += ["", f"Not run (the 15-minute budget ran out): {', '.join(skipped)}."]
    for result in results:
        failing = {name: found for name, found in result.violations.items() if found}
        if not failing and not result.errors:
            continue
        lines += ["", f"## {result.scenario.name}: violations", ""]
        for name, found in failing.items():
            lines.append(f"- **{PROPERTIES[name]}** ({len(found)}):")
            lines += [f"  - `{violation}`" for violation in found[:_SHOWN_VIOLATIONS]]
        if result.errors:
            lines.append(f"- client errors ({len(result.errors)}): " + "; ".join(result.errors[:_SHOWN_VIOLATIONS]))
    return "\n".join(lines) + "\n"
