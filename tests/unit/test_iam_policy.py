"""The identity-policy evaluator, case by case against AWS's documented rules (IAM User Guide).

Each test cites the rule it checks: "Policy evaluation logic" (PEL), "IAM JSON policy elements: Action / NotAction /
Resource / NotResource" (ELEM), "Condition operators" (COND) and "Conditions with multiple context keys or values"
(MULTI).
"""

from __future__ import annotations

from typing import Any

import pytest

from asya_local.iam import Decision, PolicyError, PolicySet

BUCKET = "arn:aws:s3:::asya-bucket"
TABLE = "arn:aws:dynamodb:us-east-1:123456789012:table/asya-tasks"


def _policy(*statements: dict[str, Any]) -> PolicySet:
    return PolicySet.from_documents([{"Version": "2012-10-17", "Statement": list(statements)}])


def _allow(action: Any = "s3:GetObject", resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Allow", "Action": action, "Resource": resource, **extra}


def _deny(action: Any = "s3:GetObject", resource: Any = "*", **extra: Any) -> dict[str, Any]:
    return {"Effect": "Deny", "Action": action, "Resource": resource, **extra}


def _cond(operator: str, key: str, values: Any, context: dict[str, Any]) -> bool:
    policy = _policy(_allow(Condition={operator: {key: values}}))
    return policy.evaluate("s3:GetObject", BUCKET, context) is Decision.ALLOW


# --- combining (PEL) ---


def test_no_statement_applies_is_an_implicit_deny() -> None:
    """PEL: by default all requests are implicitly denied."""
    explained = _policy(_allow("s3:PutObject")).explain("s3:GetObject", BUCKET, {})
    assert explained.decision is Decision.IMPLICIT_DENY
    assert explained.statement is None
    assert not explained.allowed


def test_an_applying_allow_allows_and_names_its_statement() -> None:
    """PEL: an explicit allow overrides the default implicit deny; the Sid names the deciding statement."""
    explained = _policy(_allow(Sid="Read")).explain("s3:GetObject", BUCKET, {})
    assert explained.decision is Decision.ALLOW and explained.allowed
    assert explained.statement == "Read"


def test_a_statement_without_sid_is_named_by_document_and_index() -> None:
    """ELEM Sid is optional: without one the deciding statement is named by its place."""
    docs = [{"Statement": [_allow("sqs:*")]}, {"Statement": [_allow("s3:PutObject"), _allow()]}]
    assert PolicySet.from_documents(docs).explain("s3:GetObject", BUCKET, {}).statement == "#1.1"


def test_explicit_deny_beats_allow_in_any_order_and_any_document() -> None:
    """PEL: an explicit deny in any policy overrides any allow."""
    docs: list[dict[str, Any]] = [{"Statement": _deny(Sid="No")}, {"Statement": [_allow(Sid="Yes")]}]
    for ordered in (docs, docs[::-1]):
        explained = PolicySet.from_documents(ordered).explain("s3:GetObject", BUCKET, {})
        assert explained.decision is Decision.EXPLICIT_DENY
        assert explained.statement == "No"


def test_an_allow_whose_condition_fails_does_not_apply_and_is_no_deny() -> None:
    """PEL: a statement applies only when its conditions are met; a failed Allow leaves the other Allow to decide."""
    policy = _policy(
        _allow(Sid="Prefixed", Condition={"StringLike": {"s3:prefix": "tasks/*"}}),
        _allow(Sid="Plain"),
    )
    explained = policy.explain("s3:GetObject", BUCKET, {})
    assert explained.decision is Decision.ALLOW and explained.statement == "Plain"


def test_a_deny_whose_condition_fails_does_not_apply() -> None:
    """PEL: a Deny with an unmet condition does not deny."""
    policy = _policy(_allow(), _deny(Condition={"Bool": {"aws:SecureTransport": "false"}}))
    assert policy.evaluate("s3:GetObject", BUCKET, {"aws:SecureTransport": "true"}) is Decision.ALLOW
    assert policy.evaluate("s3:GetObject", BUCKET, {"aws:SecureTransport": "false"}) is Decision.EXPLICIT_DENY


def test_single_statement_object_and_single_strings_are_accepted() -> None:
    """ELEM: Statement may be one object, Action and Resource one string."""
    statement = {"Effect": "Allow", "Action": "s3:GetObject", "Resource": BUCKET}
    policy = PolicySet.from_documents([{"Statement": statement}])
    assert policy.evaluate("s3:GetObject", BUCKET, {}).allowed


# --- Action / NotAction (ELEM) ---


@pytest.mark.parametrize(
    ("pattern", "action", "hit"),
    [
        ("s3:GetObject", "s3:GetObject", True),
        ("s3:getobject", "S3:GETOBJECT", True),  # action names are case-insensitive
        ("s3:*", "s3:PutObject", True),
        ("s3:*", "sqs:SendMessage", False),
        ("*", "dynamodb:Query", True),
        ("s3:Get*", "s3:GetObjectVersion", True),
        ("s3:Get*", "s3:PutObject", False),
        ("sqs:?eceiveMessage", "sqs:ReceiveMessage", True),
        ("sqs:?eceiveMessage", "sqs:RReceiveMessage", False),
        ("s3:GetObject", "s3:GetObjectAcl", False),  # no implicit prefix match
    ],
)
def test_action_matching(pattern: str, action: str, hit: bool) -> None:
    """ELEM Action: case-insensitive, `*` any run, `?` one character, `service:*` all of a service."""
    assert _policy(_allow(pattern)).evaluate(action, BUCKET, {}).allowed is hit


def test_action_list_is_any_of() -> None:
    """ELEM Action: a list of actions matches when any of them does."""
    policy = _policy(_allow(["sqs:SendMessage", "s3:GetObject"]))
    assert policy.evaluate("s3:GetObject", BUCKET, {}).allowed
    assert not policy.evaluate("s3:PutObject", BUCKET, {}).allowed


def test_not_action_matches_every_action_but_those_listed() -> None:
    """ELEM NotAction: the statement applies to every action except the listed ones."""
    policy = _policy({"Effect": "Allow", "NotAction": ["s3:Delete*"], "Resource": "*"})
    assert policy.evaluate("s3:GetObject", BUCKET, {}).allowed
    assert not policy.evaluate("s3:DeleteObject", BUCKET, {}).allowed


def test_deny_with_not_action_denies_everything_else() -> None:
    """ELEM NotAction with Deny: every action not listed is explicitly denied."""
    policy = _policy(_allow("*"), {"Effect": "Deny", "NotAction": "s3:GetObject", "Resource": "*"})
    assert policy.evaluate("s3:GetObject", BUCKET, {}).allowed
    assert policy.evaluate("s3:PutObject", BUCKET, {}) is Decision.EXPLICIT_DENY


# --- Resource / NotResource (ELEM) ---


@pytest.mark.parametrize(
    ("pattern", "resource", "hit"),
    [
        ("*", BUCKET + "/any/key", True),
        (BUCKET + "/tasks/*", BUCKET + "/tasks/abc/result.json", True),  # `*` crosses slashes
        (BUCKET + "/tasks/*", BUCKET + "/paused/abc.json", False),
        (BUCKET + "/tasks/*", BUCKET + "/TASKS/abc", False),  # resources are case-sensitive
        (TABLE, TABLE + "/index/by-status", False),  # the table ARN does not cover its indexes
        (TABLE + "/index/*", TABLE + "/index/by-status", True),
        ("arn:aws:sqs:*:123456789012:asya-?", "arn:aws:sqs:us-east-1:123456789012:asya-a", True),
    ],
)
def test_resource_matching(pattern: str, resource: str, hit: bool) -> None:
    """ELEM Resource: case-sensitive, wildcards anywhere in the ARN."""
    assert _policy(_allow(resource=pattern)).evaluate("s3:GetObject", resource, {}).allowed is hit


def test_not_resource_matches_every_resource_but_those_listed() -> None:
    """ELEM NotResource: the statement applies to every resource except the listed ones."""
    policy = _policy({"Effect": "Allow", "Action": "s3:GetObject", "NotResource": BUCKET + "/secret/*"})
    assert policy.evaluate("s3:GetObject", BUCKET + "/tasks/a", {}).allowed
    assert not policy.evaluate("s3:GetObject", BUCKET + "/secret/a", {}).allowed


# --- Condition operators (COND) and combining (MULTI) ---


@pytest.mark.parametrize(
    ("operator", "values", "context", "holds"),
    [
        ("StringEquals", "a", "a", True),
        ("StringEquals", "a", "A", False),
        ("StringNotEquals", "a", "b", True),
        ("StringNotEquals", "a", "a", False),
        ("StringEqualsIgnoreCase", "abc", "ABC", True),
        ("StringNotEqualsIgnoreCase", "abc", "ABC", False),
        ("StringNotEqualsIgnoreCase", "abc", "abd", True),
        ("StringLike", "tasks/*", "tasks/x/y", True),
        ("StringLike", "tasks/*", "Tasks/x", False),
        ("StringLike", "t?sks", "tasks", True),
        ("StringNotLike", "tasks/*", "paused/x", True),
        ("StringNotLike", "tasks/*", "tasks/x", False),
        ("NumericEquals", "10", "10.0", True),
        ("NumericNotEquals", "10", "11", True),
        ("NumericLessThan", "10", "9", True),
        ("NumericLessThan", "10", "10", False),
        ("NumericLessThanEquals", "10", "10", True),
        ("NumericGreaterThan", "10", "11", True),
        ("NumericGreaterThan", "10", "10", False),
        ("NumericGreaterThanEquals", "10", "10", True),
        ("NumericLessThan", "10", "not-a-number", False),
        ("Bool", "true", "TRUE", True),
        ("Bool", True, "true", True),
        ("Bool", "false", "true", False),
    ],
)
def test_condition_operators(operator: str, values: Any, context: str, holds: bool) -> None:
    """COND: string (case-sensitive unless IgnoreCase; Like takes `*`/`?`), numeric and boolean operators."""
    assert _cond(operator, "k", values, {"k": context}) is holds


@pytest.mark.parametrize(
    ("operator", "pattern", "arn", "holds"),
    [
        ("ArnEquals", TABLE, TABLE, True),
        ("ArnEquals", "arn:aws:dynamodb:*:*:table/asya-*", TABLE, True),  # wildcards per field, Equals too
        ("ArnLike", "arn:aws:sqs:us-east-1:123456789012:*", "arn:aws:sqs:us-east-1:123456789012:q", True),
        ("ArnLike", "arn:aws:sqs:us-east-1:123456789012:*", "arn:aws:sqs:eu-west-1:123456789012:q", False),
        ("ArnLike", "arn:aws:sqs:*:*:*", "not-an-arn", False),
        ("ArnNotEquals", TABLE, TABLE, False),
        ("ArnNotLike", "arn:aws:sqs:*:*:*", TABLE, True),
    ],
)
def test_arn_operators(operator: str, pattern: str, arn: str, holds: bool) -> None:
    """COND ARN operators: compared field by field, each field may carry wildcards."""
    assert _cond(operator, "aws:SourceArn", pattern, {"aws:SourceArn": arn}) is holds


def test_values_for_one_key_are_ored() -> None:
    """MULTI: several values for one key under a positive operator: any may match (OR)."""
    assert _cond("StringLike", "s3:prefix", ["tasks/*", "paused/*"], {"s3:prefix": "paused/x"})
    assert not _cond("StringLike", "s3:prefix", ["tasks/*", "paused/*"], {"s3:prefix": "other/x"})


def test_values_for_one_key_under_a_negated_operator_are_nored() -> None:
    """MULTI: a negated operator with several values holds only when none matches (NOR)."""
    assert _cond("StringNotEquals", "k", ["a", "b"], {"k": "c"})
    assert not _cond("StringNotEquals", "k", ["a", "b"], {"k": "b"})


def test_keys_and_operators_are_anded() -> None:
    """MULTI: several keys under one operator, and several operators, must all hold (AND)."""
    block = {"StringEquals": {"a": "1", "b": "2"}, "StringLike": {"c": "x*"}}
    policy = _policy(_allow(Condition=block))
    assert policy.evaluate("s3:GetObject", BUCKET, {"a": "1", "b": "2", "c": "xy"}).allowed
    assert not policy.evaluate("s3:GetObject", BUCKET, {"a": "1", "b": "3", "c": "xy"}).allowed
    assert not policy.evaluate("s3:GetObject", BUCKET, {"a": "1", "b": "2", "c": "yx"}).allowed


def test_context_keys_are_matched_case_insensitively() -> None:
    """COND: condition key names are not case-sensitive."""
    assert _cond("StringEquals", "S3:Prefix", "a", {"s3:prefix": "a"})


# --- missing keys (COND "Important" note, IfExists, Null; MULTI set operators) ---


@pytest.mark.parametrize("operator", ["StringEquals", "StringLike", "ArnLike", "NumericEquals", "Bool"])
def test_a_missing_key_makes_a_positive_condition_false(operator: str) -> None:
    """COND: a key not present in the request context does not match: the condition is false."""
    assert not _cond(operator, "k", "1" if operator != "Bool" else "true", {})


@pytest.mark.parametrize("operator", ["StringNotEquals", "StringNotLike", "ArnNotLike", "NumericNotEquals"])
def test_a_missing_key_makes_a_negated_condition_true(operator: str) -> None:
    """COND: "if the condition requires that the key is not matched (StringNotLike, ArnNotLike) and the key is not
    present, the condition is true"."""
    assert _cond(operator, "k", "1", {})


def test_if_exists_holds_when_the_key_is_missing_and_tests_it_when_present() -> None:
    """COND ...IfExists: true when the key is absent; the plain operator when present."""
    assert _cond("StringLikeIfExists", "s3:prefix", "tasks/*", {})
    assert _cond("StringLikeIfExists", "s3:prefix", "tasks/*", {"s3:prefix": "tasks/a"})
    assert not _cond("StringLikeIfExists", "s3:prefix", "tasks/*", {"s3:prefix": "paused/a"})
    assert not _cond("NumericLessThanIfExists", "s3:max-keys", "10", {"s3:max-keys": "11"})


def test_null_tests_presence() -> None:
    """COND Null: "true" holds when the key is absent (or empty), "false" when it is present."""
    assert _cond("Null", "k", "true", {})
    assert _cond("Null", "k", "true", {"k": []})
    assert not _cond("Null", "k", "true", {"k": "v"})
    assert _cond("Null", "k", "false", {"k": "v"})
    assert not _cond("Null", "k", "false", {})


def test_for_any_value_needs_one_matching_context_value() -> None:
    """MULTI ForAnyValue: at least one context value matches one policy value; a missing key is false."""
    assert _cond("ForAnyValue:StringEquals", "tags", ["a", "b"], {"tags": ["x", "b"]})
    assert not _cond("ForAnyValue:StringEquals", "tags", ["a", "b"], {"tags": ["x", "y"]})
    assert not _cond("ForAnyValue:StringEquals", "tags", ["a"], {})
    assert not _cond("ForAnyValue:StringNotEquals", "tags", ["a"], {})


def test_for_all_values_needs_every_context_value_to_match() -> None:
    """MULTI ForAllValues: every context value matches some policy value; a missing or empty key is true."""
    assert _cond("ForAllValues:StringLike", "tags", ["a*", "b*"], {"tags": ["ax", "by"]})
    assert not _cond("ForAllValues:StringLike", "tags", ["a*", "b*"], {"tags": ["ax", "cy"]})
    assert _cond("ForAllValues:StringEquals", "tags", ["a"], {})
    assert _cond("ForAllValues:StringEquals", "tags", ["a"], {"tags": []})


def test_set_qualifiers_with_negated_operators() -> None:
    """MULTI: ForAllValues:StringNotEquals: no context value is listed; ForAnyValue:StringNotEquals: one is not."""
    assert _cond("ForAllValues:StringNotEquals", "tags", ["a"], {"tags": ["b", "c"]})
    assert not _cond("ForAllValues:StringNotEquals", "tags", ["a"], {"tags": ["b", "a"]})
    assert _cond("ForAnyValue:StringNotEquals", "tags", ["a"], {"tags": ["a", "b"]})
    assert not _cond("ForAnyValue:StringNotEquals", "tags", ["a"], {"tags": ["a"]})


def test_unqualified_operator_on_a_multivalued_context_key() -> None:
    """A positive operator holds when any value matches; a negated one only when none does."""
    assert _cond("StringEquals", "k", "a", {"k": ["b", "a"]})
    assert not _cond("StringNotEquals", "k", "a", {"k": ["b", "a"]})


def test_for_any_value_if_exists_holds_when_missing() -> None:
    """COND ...IfExists: "if the key is not present, evaluate the condition as true", qualified or not."""
    assert _cond("ForAnyValue:StringEqualsIfExists", "tags", ["a"], {})


# --- malformed or unsupported policies are errors, never silent passes ---


@pytest.mark.parametrize(
    ("statement", "message"),
    [
        (_allow(Condition={"StringEqualz": {"k": "v"}}), "unknown or unsupported condition operator 'StringEqualz'"),
        (_allow(Condition={"DateLessThan": {"aws:CurrentTime": "2030-01-01"}}), "'DateLessThan'"),
        (_allow(Condition={"IpAddress": {"aws:SourceIp": "10.0.0.0/8"}}), "'IpAddress'"),
        (_allow(Condition={"NullIfExists": {"k": "true"}}), "Null takes neither"),
        (_allow(Condition={"NumericLessThan": {"k": "ten"}}), "'ten' is not a number"),
        (_allow(Condition={"Bool": {"k": "yes"}}), "true or false"),
        (_allow(Condition={"StringEquals": {"k": []}}), "lists no values"),
        (_allow(Condition={"StringEquals": {"aws:username": "${aws:username}"}}), "policy variables"),
        ({"Effect": "Allow", "Resource": "*"}, "exactly one of Action and NotAction"),
        ({"Effect": "Allow", "Action": "s3:*", "NotAction": "s3:Get*", "Resource": "*"}, "exactly one of Action"),
        ({"Effect": "Allow", "Action": "s3:*"}, "exactly one of Resource and NotResource"),
        ({"Effect": "Permit", "Action": "s3:*", "Resource": "*"}, "Effect must be"),
        (_allow(Principal={"AWS": "*"}), "Principal"),
        (_allow(resource=[]), "non-empty list"),
        (_allow(resource=BUCKET + "/${aws:username}/*"), "policy variables"),
    ],
)
def test_bad_or_unsupported_policies_are_errors(statement: dict[str, Any], message: str) -> None:
    """ELEM grammar (Effect, one of Action/NotAction and Resource/NotResource, no Principal in an identity policy);
    operators this evaluator does not implement are refused, never passed."""
    with pytest.raises(PolicyError, match=message.replace("(", r"\(").replace("$", r"\$").replace("{", r"\{")):
        _policy(statement)


def test_a_document_without_statement_list_is_an_error() -> None:
    """ELEM: Statement is required."""
    with pytest.raises(PolicyError, match="Statement must be"):
        PolicySet.from_documents([{"Version": "2012-10-17"}])


def test_the_templates_prefix_conditioned_list_bucket() -> None:
    """The shape CDK synthesizes for the mesh's ListBucket grant: a ListObjectsV2 with a matching prefix is allowed;
    a request without s3:prefix (what a GetObject carries) is not."""
    policy = _policy(_allow("s3:ListBucket", BUCKET, Condition={"StringLike": {"s3:prefix": ["tasks/*"]}}))
    assert policy.evaluate("s3:ListBucket", BUCKET, {"s3:prefix": "tasks/abc/"}).allowed
    assert policy.evaluate("s3:ListBucket", BUCKET, {}) is Decision.IMPLICIT_DENY
