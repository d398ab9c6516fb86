"""Reading a synthesized mesh in the infra tier: which function is which."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from asya_cdk.testing import SynthesizedMesh


def function_ids(synth: SynthesizedMesh) -> dict[str, str]:
    """Actor name, ``gateway``, ``gateway-stream``, ``backstop`` -> the function's logical id (other functions, such
    as CDK's own custom resources, are left out)."""
    out: dict[str, str] = {}
    for key, res in synth.of_type("AWS::Lambda::Function").items():
        props = res["Properties"]
        env = props.get("Environment", {}).get("Variables", {})
        if "ASYA_ACTOR" in env:
            out[env["ASYA_ACTOR"]] = key
        elif props["Handler"] == "run.sh":
            # the main function, and the stream function sized for waiting (GW-SSE (R3))
            out["gateway-stream" if props["Description"].endswith(", streams") else "gateway"] = key
        elif env.get("POWERTOOLS_SERVICE_NAME") == "backstop":
            out["backstop"] = key
    return out
