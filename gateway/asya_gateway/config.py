"""Gateway configuration, read once from an injectable environment mapping into a frozen object.

Environment variables:

| variable | meaning | default |
|---|---|---|
| ``ASYA_MANIFEST`` | path of the manifest (YAML or JSON) | ``asya.yaml`` |
| ``ASYA_TABLE`` | DynamoDB task-store table | ``asya-{namespace}-tasks`` |
| ``ASYA_BUCKET`` | storage bucket | ``asya-{namespace}-storage`` |
| ``ASYA_API_KEYS`` | API keys for ``gateway.auth.mode: api_key`` (local mode, GW-AUTH-4): a JSON array of strings,
  as in the deployed secret, or comma-separated; when set, the Secrets Manager secret is not read | unset |
| ``ASYA_REPORTER_KEYS`` | reporter keys of the producer route (GW-EVT-1, local mode): same formats as
  ``ASYA_API_KEYS``; when set, ``ASYA_REPORTER_KEY_SECRET`` is not read | unset |
| ``ASYA_REPORTER_KEY_SECRET`` | Secrets Manager secret holding the reporter keys (a string or a JSON array of strings);
  with neither variable the producer route refuses every request | unset |
| ``ASYA_ACCOUNT_ID`` | AWS account of the queues: queue URLs built without ``GetQueueUrl`` (GW-CREATE-7) | unset |
| ``ASYA_SSE_MAX_SECONDS`` | longest SSE response before the server ends it (GW-SSE-9) | ``840`` |
| ``ASYA_BODY_READ_TIMEOUT`` | longest wait for the next part of a request body, then 400 (GW-GEN-5) | ``5`` |
| ``ASYA_RETRY_AFTER_SECONDS`` | the ``Retry-After`` of a 429/503 answered for AWS throttling or unavailability
  (GW-OVL-2), whole seconds 1..3600 | ``2`` |
| ``ASYA_ADMISSION_DRAIN_RATES`` | admission (GW-OVL-7): a JSON object of actor name -> tasks per second its queue
  drains, which synth derives from a declared ``capacity`` target's model; a create whose first actor is listed is
  refused 429 while that actor's backlog would outlast half the task's timeout | unset (no admission check) |
| ``ASYA_HISTORY_ALL_TASKS`` | record the run history (P-HIST-1) of every task, static routes and ``?actor=`` tasks
  included, keeping bodies up to this many bytes (64..262144); ``asya dev`` sets it, so ``asya history`` answers for
  every local task (P-HIST-10). A flow's own ``history: steps`` keeps its ``history_body_bytes`` | unset (only flows
  with ``history: steps``) |
| ``AWS_LAMBDA_FUNCTION_NAME`` | set by Lambda; its absence means the local mode (GW-AUTH-3 warning) | unset |

The SSE poll cadence (GW-SSE-9) and the hold-back of young numbers (GW-SSE-6) are fields with spec defaults; tests
shorten them by building the config directly.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from asya.config import ENV, ConfigError, positive_number
from asya.manifest import HISTORY_BODY_MAX, HISTORY_BODY_MIN
from asya.overload import DEFAULT_RETRY_AFTER_SECONDS

__all__ = ["DEFAULT_RETRY_AFTER_SECONDS", "GATEWAY_ENV", "GatewayConfig", "GatewayConfigError", "parse_key_array"]


_RETRY_AFTER_MAX: Final = 3600


class GatewayConfigError(ConfigError):
    """An environment variable of the gateway is malformed."""


@dataclass(frozen=True, slots=True)
class _EnvNames:
    manifest: str = ENV.manifest
    table: str = ENV.table
    bucket: str = ENV.bucket
    api_keys: str = "ASYA_API_KEYS"
    reporter_keys: str = "ASYA_REPORTER_KEYS"
    reporter_key_secret: str = ENV.reporter_key_secret
    sse_max_seconds: str = "ASYA_SSE_MAX_SECONDS"
    account_id: str = "ASYA_ACCOUNT_ID"
    body_read_timeout: str = "ASYA_BODY_READ_TIMEOUT"
    index_shards: str = ENV.index_shards
    retry_after_seconds: str = ENV.retry_after
    admission_drain_rates: str = ENV.admission_drain_rates
    history_all_tasks: str = "ASYA_HISTORY_ALL_TASKS"
    lambda_function: str = "AWS_LAMBDA_FUNCTION_NAME"


#: The environment variable names the gateway reads; those the deployment sets are ``asya.config.ENV``'s
#: (``asya_deploy.environment.gateway_environment`` builds them for the CDK app and the local mode).
GATEWAY_ENV: Final = _EnvNames()


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    """Everything the gateway reads from its environment. Empty ``table``/``bucket`` mean the namespace default."""

    manifest_path: str = "asya.yaml"
    table: str = ""
    bucket: str = ""
    #: ``None``: read keys from the manifest's Secrets Manager secret; a tuple: these keys (local mode).
    api_keys: tuple[str, ...] | None = None
    #: GW-EVT-1: the producer route's keys, never a client's. ``None``: read them from ``reporter_key_secret``;
    #: neither: the route refuses every request (secure default).
    reporter_keys: tuple[str, ...] | None = None
    reporter_key_secret: str = ""
    in_lambda: bool = False
    #: GW-SSE-9: poll every ``sse_poll_fast`` s while an event arrived in the last ``sse_fast_window`` s, else
    #: every ``sse_poll_slow`` s; ``:keepalive`` after ``sse_keepalive`` s of silence; end after ``sse_max_seconds``.
    sse_poll_fast: float = 0.25
    sse_poll_slow: float = 1.0
    sse_fast_window: float = 5.0
    sse_keepalive: float = 15.0
    sse_max_seconds: float = 840.0
    #: GW-SSE-6: how long a follower holds back a number without a fly item before taking it for a status change.
    sse_gap_wait: float = 1.0
    #: GW-AUTH-4: how long keys read from Secrets Manager are cached.
    api_key_cache_seconds: float = 300.0
    #: the AWS account of the mesh's queues: queue URLs are built without ``GetQueueUrl`` (GW-CREATE-7)
    account_id: str = ""
    #: GW-GEN-5: seconds to wait for the next part of a request body before answering 400
    body_read_timeout: float = 5.0
    #: partitions per day of the created index this gateway writes and lists (docs/capacity.md); at least 8
    index_shards: int = 8
    #: GW-OVL-2: the ``Retry-After`` (seconds) of an overload answer; the default until the deployment derives it
    #: from the manifest's declared capacity.
    retry_after_seconds: int = DEFAULT_RETRY_AFTER_SECONDS
    #: GW-OVL-7: tasks per second each listed actor's queue drains (empty: no admission check)
    admission_drain_rates: Mapping[str, float] = field(default_factory=dict)
    #: P-HIST-10: the body cut of the run history recorded for every task (``None``: only flows with ``history: steps``)
    history_all_tasks: int | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GatewayConfig:
        """Read the configuration from ``env`` (default: ``os.environ``)."""
        source = os.environ if env is None else env
        raw_keys = source.get(GATEWAY_ENV.api_keys)
        api_keys = None if raw_keys is None else _api_keys(raw_keys)
        raw_reporter = source.get(GATEWAY_ENV.reporter_keys)
        reporter_keys = None if raw_reporter is None else _api_keys(raw_reporter, GATEWAY_ENV.reporter_keys)
        return cls(
            manifest_path=source.get(GATEWAY_ENV.manifest) or "asya.yaml",
            table=source.get(GATEWAY_ENV.table, ""),
            bucket=source.get(GATEWAY_ENV.bucket, ""),
            api_keys=api_keys,
            reporter_keys=reporter_keys,
            reporter_key_secret=source.get(GATEWAY_ENV.reporter_key_secret, "").strip(),
            in_lambda=bool(source.get(GATEWAY_ENV.lambda_function)),
            sse_max_seconds=positive_number(
                source, GATEWAY_ENV.sse_max_seconds, 840.0, unit="a number of seconds", error=GatewayConfigError
            ),
            account_id=source.get(GATEWAY_ENV.account_id, "").strip(),
            body_read_timeout=positive_number(
                source, GATEWAY_ENV.body_read_timeout, 5.0, unit="a number of seconds", error=GatewayConfigError
            ),
            index_shards=_index_shards(source.get(GATEWAY_ENV.index_shards, "")),
            retry_after_seconds=_retry_after(source.get(GATEWAY_ENV.retry_after_seconds)),
            admission_drain_rates=_drain_rates(source.get(GATEWAY_ENV.admission_drain_rates)),
            history_all_tasks=_history_bytes(source.get(GATEWAY_ENV.history_all_tasks)),
        )


def _index_shards(raw: str) -> int:
    text = raw.strip()
    if not text:
        return 8
    if not text.isdigit() or not 8 <= int(text) <= 1024:
        raise GatewayConfigError(f"{GATEWAY_ENV.index_shards} must be a whole number from 8 to 1024, got {raw!r}")
    return int(text)


def parse_key_array(text: str, *, what: str) -> tuple[str, ...] | None:
    """The non-empty keys of ``text`` when it is a JSON array of strings (the format of the deployed secret);
    ``None`` when it is a plain key (not JSON, or a JSON scalar such as ``12345``). A JSON object (the Secrets Manager
    key/value form) or an array holding a non-string is a :class:`GatewayConfigError` naming ``what``."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if isinstance(parsed, list) and all(isinstance(key, str) for key in parsed):
        return tuple(key for key in parsed if key)
    if isinstance(parsed, list | dict):
        kind = "an object" if isinstance(parsed, dict) else "an array holding a non-string"
        raise GatewayConfigError(f"{what} must be a JSON array of strings or one plain key, got {kind}")
    return None


def _api_keys(raw: str, name: str = GATEWAY_ENV.api_keys) -> tuple[str, ...]:
    keys = parse_key_array(raw, what=f"environment variable {name}")
    if keys is not None:
        return keys
    return tuple(key.strip() for key in raw.split(",") if key.strip())


def _whole_number(raw: str, name: str, unit: str) -> int:
    try:
        return int(raw.strip())
    except ValueError:
        raise GatewayConfigError(f"environment variable {name} must be a whole number of {unit}, got {raw!r}") from None


def _retry_after(raw: str | None) -> int:
    if raw is None or not raw.strip():
        return DEFAULT_RETRY_AFTER_SECONDS
    name = GATEWAY_ENV.retry_after_seconds
    value = _whole_number(raw, name, "seconds")
    if not 1 <= value <= _RETRY_AFTER_MAX:
        raise GatewayConfigError(f"environment variable {name} must be 1..{_RETRY_AFTER_MAX}, got {raw!r}")
    return value


def _drain_rates(raw: str | None) -> dict[str, float]:
    if raw is None or not raw.strip():
        return {}
    name = GATEWAY_ENV.admission_drain_rates
    try:
        parsed = json.loads(raw)
    except ValueError:
        raise GatewayConfigError(f"environment variable {name} must be a JSON object, got {raw!r}") from None
    if not isinstance(parsed, dict):
        raise GatewayConfigError(f"environment variable {name} must be a JSON object, got {raw!r}")
    rates: dict[str, float] = {}
    for actor, rate in parsed.items():
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not rate > 0:
            raise GatewayConfigError(
                f"environment variable {name}: {actor} must be a number of tasks/s > 0, got {rate!r}"
            )
        rates[str(actor)] = float(rate)
    return rates


def _history_bytes(raw: str | None) -> int | None:
    if raw is None or not raw.strip():
        return None
    name = GATEWAY_ENV.history_all_tasks
    value = _whole_number(raw, name, "bytes")
    if not HISTORY_BODY_MIN <= value <= HISTORY_BODY_MAX:
        raise GatewayConfigError(
            f"environment variable {name} must be {HISTORY_BODY_MIN}..{HISTORY_BODY_MAX} bytes, got {raw!r}"
        )
    return value
