"""Identity-based IAM policy evaluation for one principal in one account.

:meth:`PolicySet.from_documents` parses policy documents (``{"Version", "Statement": [...]}``, every ARN already a
string: the caller resolves CloudFormation intrinsics) and :meth:`PolicySet.evaluate` answers one request
``(action, resource, context)`` as AWS's documented evaluation logic does for identity-based policies in one account
(IAM User Guide, "Policy evaluation logic"):

1. Every statement of every document is considered; a statement *applies* when its ``Action`` matches (or its
   ``NotAction`` does not), its ``Resource`` matches (or its ``NotResource`` does not) and every test in its
   ``Condition`` holds (see :mod:`asya_local.iam.conditions`).
2. An applying ``Deny`` is an explicit deny, and wins over any allow.
3. Else an applying ``Allow`` allows.
4. Else the request is implicitly denied. An ``Allow`` whose condition is false simply does not apply: it is no deny.

Actions match case-insensitively, resources case-sensitively, both with ``*`` and ``?`` wildcards. Resource-based
policies, SCPs, permission boundaries and session policies are out of scope. A document this module cannot evaluate
faithfully (a ``Principal`` element, an unknown condition operator, a policy variable) is a :class:`PolicyError` when
parsed, never a silent allow.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from asya_local.iam.conditions import Condition, ContextValue, PolicyError, glob_match, parse_conditions

__all__ = ["Decision", "Evaluation", "PolicySet", "Statement"]


class Decision(enum.Enum):
    """The outcome of one evaluation."""

    ALLOW = "allow"
    EXPLICIT_DENY = "explicit_deny"
    IMPLICIT_DENY = "implicit_deny"

    @property
    def allowed(self) -> bool:
        return self is Decision.ALLOW


@dataclass(frozen=True, slots=True)
class Evaluation:
    """A decision and the statement that made it (``None`` for an implicit deny: no statement decided)."""

    decision: Decision
    statement: str | None

    @property
    def allowed(self) -> bool:
        return self.decision.allowed


@dataclass(frozen=True, slots=True)
class Statement:
    """One parsed statement; ``label`` is its ``Sid``, or ``#<document>.<statement>`` (0-based) without one."""

    label: str
    allow: bool
    actions: tuple[str, ...]
    not_action: bool
    resources: tuple[str, ...]
    not_resource: bool
    conditions: tuple[Condition, ...]

    def applies(self, action: str, resource: str, context: Mapping[str, ContextValue]) -> bool:
        action_hit = any(glob_match(pattern, action, ignore_case=True) for pattern in self.actions)
        if action_hit == self.not_action:
            return False
        resource_hit = any(glob_match(pattern, resource) for pattern in self.resources)
        if resource_hit == self.not_resource:
            return False
        return all(condition.holds(context) for condition in self.conditions)


class PolicySet:
    """The identity-based policies of one principal."""

    def __init__(self, statements: Sequence[Statement]) -> None:
        self._statements = tuple(statements)

    @property
    def statements(self) -> tuple[Statement, ...]:
        return self._statements

    @classmethod
    def from_documents(cls, docs: Sequence[Mapping[str, object]]) -> PolicySet:
        statements: list[Statement] = []
        for doc_index, doc in enumerate(docs):
            if not isinstance(doc, Mapping):
                raise PolicyError(f"policy document #{doc_index} must be an object, got {doc!r}")
            raw = doc.get("Statement")
            listed = [raw] if isinstance(raw, Mapping) else raw
            if not isinstance(listed, list | tuple):
                raise PolicyError(f"policy document #{doc_index}: Statement must be an object or a list, got {raw!r}")
            for index, item in enumerate(listed):
                statements.append(_parse_statement(item, f"#{doc_index}.{index}"))
        return cls(statements)

    def explain(self, action: str, resource: str, context: Mapping[str, ContextValue]) -> Evaluation:
        """The decision for one request and the statement that decided it."""
        allowed_by: str | None = None
        for statement in self._statements:
            if not statement.applies(action, resource, context):
                continue
            if not statement.allow:
                return Evaluation(Decision.EXPLICIT_DENY, statement.label)
            if allowed_by is None:
                allowed_by = statement.label
        if allowed_by is not None:
            return Evaluation(Decision.ALLOW, allowed_by)
        return Evaluation(Decision.IMPLICIT_DENY, None)

    def evaluate(self, action: str, resource: str, context: Mapping[str, ContextValue]) -> Decision:
        return self.explain(action, resource, context).decision


def _strings(value: object, what: str, where: str) -> tuple[str, ...]:
    listed = [value] if isinstance(value, str) else value
    if not isinstance(listed, list | tuple) or not listed or not all(isinstance(item, str) for item in listed):
        raise PolicyError(f"statement {where}: {what} must be a string or a non-empty list of strings, got {value!r}")
    for item in listed:
        if "${" in item:
            raise PolicyError(f"statement {where}: {what} {item!r}: policy variables are not supported")
    return tuple(listed)


def _one_of(item: Mapping[str, object], name: str, where: str) -> tuple[tuple[str, ...], bool]:
    plain, negated = item.get(name), item.get(f"Not{name}")
    if (plain is None) == (negated is None):
        raise PolicyError(f"statement {where}: exactly one of {name} and Not{name} is required")
    if plain is not None:
        return _strings(plain, name, where), False
    return _strings(negated, f"Not{name}", where), True


def _parse_statement(item: object, index_label: str) -> Statement:
    if not isinstance(item, Mapping):
        raise PolicyError(f"statement {index_label} must be an object, got {item!r}")
    sid = item.get("Sid")
    label = sid if isinstance(sid, str) and sid else index_label
    where = f"{label!r}" if label != index_label else index_label
    effect = item.get("Effect")
    if effect not in ("Allow", "Deny"):
        raise PolicyError(f"statement {where}: Effect must be 'Allow' or 'Deny', got {effect!r}")
    if "Principal" in item or "NotPrincipal" in item:
        raise PolicyError(f"statement {where}: Principal belongs in resource-based policies, not identity policies")
    actions, not_action = _one_of(item, "Action", where)
    resources, not_resource = _one_of(item, "Resource", where)
    raw_conditions = item.get("Condition")
    conditions = () if raw_conditions is None else parse_conditions(raw_conditions, f"statement {where}")
    return Statement(label, effect == "Allow", actions, not_action, resources, not_resource, conditions)
