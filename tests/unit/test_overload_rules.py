"""The building blocks of overload handling (docs/http.md GW-OVL-1, GW-OVL-2): client budgets, the classification of
AWS failures by error code, and the gateway's ``Retry-After`` setting."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError, ConnectTimeoutError, ReadTimeoutError

from asya.awsclients import ACTOR_BUDGET, BACKSTOP_BUDGET, GATEWAY_BUDGET, LOCAL_BUDGET, ClientBudget, client_config
from asya.overload import DEFAULT_RETRY_AFTER_SECONDS, Overload, overload_of
from asya.transport import TransportError
from asya_gateway.config import GatewayConfig, GatewayConfigError

pytestmark = pytest.mark.unit


def _error(code: str, status: int = 400) -> ClientError:
    return ClientError(
        {"Error": {"Code": code, "Message": "throttl"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "Op"
    )


@pytest.mark.parametrize("budget", [GATEWAY_BUDGET, ACTOR_BUDGET, BACKSTOP_BUDGET, LOCAL_BUDGET])
def test_gw_ovl_1_every_budget_sets_a_retry_mode_and_both_timeouts(budget: ClientBudget) -> None:
    config = client_config(budget)
    assert config.retries == {"mode": "standard", "total_max_attempts": budget.max_attempts}
    assert (config.connect_timeout, config.read_timeout) == (budget.connect_timeout, budget.read_timeout)


def test_gw_ovl_1_a_gateway_call_gives_up_within_a_few_seconds() -> None:
    """Attempts times (connect + read), plus standard mode's backoff of at most 1 s before the one retry."""
    worst = GATEWAY_BUDGET.max_attempts * (GATEWAY_BUDGET.connect_timeout + GATEWAY_BUDGET.read_timeout) + 1
    assert worst <= 10


def test_gw_ovl_1_clients_made_by_the_runtime_carry_their_budget(aws_env: None) -> None:
    from asya.store import TaskStore
    from asya.transport import Transport

    store = TaskStore(table="t", budget=GATEWAY_BUDGET)
    assert store.dynamodb.meta.config.read_timeout == GATEWAY_BUDGET.read_timeout
    assert store.dynamodb.meta.config.retries["mode"] == "standard"
    transport = Transport(namespace="demo")
    assert transport.sqs.meta.config.read_timeout == ACTOR_BUDGET.read_timeout


def test_gw_ovl_1_a_gateway_client_tries_a_throttled_call_exactly_twice(aws_env: None) -> None:
    """The budget's attempts count the first try: botocore's standard mode makes exactly that many requests."""
    from asya.awsclients import aws_client

    client = aws_client("dynamodb", GATEWAY_BUDGET, endpoint_url="http://127.0.0.1:9")
    sent: list[int] = []

    def answer(request: object, **_: object) -> object:
        from botocore.awsrequest import AWSResponse

        sent.append(1)
        body = b'{"__type": "com.amazonaws.dynamodb.v20120810#ThrottlingException", "message": "slow down"}'
        return AWSResponse("http://127.0.0.1:9", 400, {}, _Raw(body))

    client.meta.events.register("before-send.dynamodb.GetItem", answer)
    with pytest.raises(ClientError) as error:
        client.get_item(TableName="t", Key={"pk": {"S": "x"}})
    assert error.value.response["Error"]["Code"] == "ThrottlingException"
    assert len(sent) == GATEWAY_BUDGET.max_attempts


class _Raw:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: object) -> list[bytes]:
        return [self._body]

    def read(self, *_: object, **__: object) -> bytes:
        return self._body


def test_gw_ovl_1_a_budget_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        ClientBudget("x", connect_timeout=1, read_timeout=1, max_attempts=0)


@pytest.mark.parametrize(
    "code",
    [
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "SlowDown",
        "AWS.SimpleQueueService.RequestThrottled",
        "KMS.ThrottlingException",
    ],
)
def test_gw_ovl_2_throttling_codes_are_throttles(code: str) -> None:
    assert overload_of(_error(code)) is Overload.THROTTLED


@pytest.mark.parametrize(
    "exc",
    [
        _error("InternalServerError", 500),
        _error("Weird", 503),
        ReadTimeoutError(endpoint_url="u"),
        ConnectTimeoutError(endpoint_url="u"),
    ],
)
def test_gw_ovl_2_unavailability_is_told_apart(exc: Exception) -> None:
    assert overload_of(exc) is Overload.UNAVAILABLE


@pytest.mark.parametrize(
    "exc", [_error("ValidationException"), _error("ConditionalCheckFailedException"), ValueError("Throttling")]
)
def test_gw_ovl_2_other_errors_are_not_overload_whatever_their_message(exc: Exception) -> None:
    assert overload_of(exc) is None


def test_gw_ovl_2_a_wrapped_throttle_is_found_through_its_cause() -> None:
    try:
        try:
            raise _error("ThrottlingException")
        except ClientError as inner:
            raise TransportError("SendMessage failed") from inner
    except TransportError as outer:
        assert overload_of(outer) is Overload.THROTTLED


def test_gw_ovl_2_retry_after_is_read_from_the_environment() -> None:
    assert GatewayConfig.from_env({}).retry_after_seconds == DEFAULT_RETRY_AFTER_SECONDS
    assert GatewayConfig.from_env({"ASYA_RETRY_AFTER_SECONDS": "5"}).retry_after_seconds == 5
    for bad in ("0", "1.5", "soon", "3601"):
        with pytest.raises(GatewayConfigError, match="ASYA_RETRY_AFTER_SECONDS"):
            GatewayConfig.from_env({"ASYA_RETRY_AFTER_SECONDS": bad})


def test_gw_ovl_7_drain_rates_are_read_from_the_environment() -> None:
    assert GatewayConfig.from_env({}).admission_drain_rates == {}
    config = GatewayConfig.from_env({"ASYA_ADMISSION_DRAIN_RATES": '{"normalize": 2.5}'})
    assert config.admission_drain_rates == {"normalize": 2.5}
    for bad in ("[1]", "{", '{"a": 0}', '{"a": "fast"}', '{"a": true}'):
        with pytest.raises(GatewayConfigError, match="ASYA_ADMISSION_DRAIN_RATES"):
            GatewayConfig.from_env({"ASYA_ADMISSION_DRAIN_RATES": bad})
