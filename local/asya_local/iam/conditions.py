"""IAM ``Condition`` blocks: parsed once into :class:`Condition` objects, then tested against a request context.

What is implemented, following AWS's documented rules (IAM User Guide, "IAM JSON policy elements: Condition
operators" and "Conditions with multiple context keys or values"):

- A block maps operator -> {key: value or [values]}. Every operator in a block must hold (AND), every key under one
  operator must hold (AND); the values listed for one key are alternatives (OR), and for a negated operator
  (``StringNotEquals``, ``StringNotEqualsIgnoreCase``, ``StringNotLike``, ``ArnNotEquals``, ``ArnNotLike``,
  ``NumericNotEquals``) they combine as NOR: the condition holds when the context value matches none of them.
- Operators: ``StringEquals``, ``StringNotEquals``, ``StringEqualsIgnoreCase``, ``StringNotEqualsIgnoreCase``,
  ``StringLike``, ``StringNotLike`` (``*`` and ``?`` wildcards, case-sensitive), ``ArnEquals``, ``ArnLike``,
  ``ArnNotEquals``, ``ArnNotLike`` (compared per colon-separated ARN field, wildcards allowed in each field, for the
  ``Equals`` forms too, as AWS documents), the six ``Numeric*`` comparisons, ``Bool`` (``true``/``false``, case
  ignored) and ``Null``. Each may carry the ``IfExists`` suffix (except ``Null``) and a ``ForAnyValue:`` or
  ``ForAllValues:`` set qualifier. Any other operator (``Date*``, ``IpAddress``, ``BinaryEquals``, a misspelling) is
  a :class:`PolicyError` when the policy is parsed: nothing is ever passed silently.
- A key absent from the request context (context keys are matched case-insensitively, as AWS does):
  the condition is false, except that it is true for a negated operator ("if the policy condition requires that the
  key is *not* matched, such as StringNotLike or ArnNotLike, and the right key is not present, the condition is
  true"), true for any ``...IfExists`` operator, true under ``ForAllValues:`` (vacuously: every one of no values
  matches) and false under ``ForAnyValue:`` (not one value matches), whatever the operator. ``Null`` tests presence
  itself: ``"true"`` holds when the key is absent, ``"false"`` when it is present. An empty list counts as absent.
- A key with several values in the context and no set qualifier: a positive operator holds when any value matches,
  a negated one when no value matches (the single-valued reading applied to each value).
- Policy variables (``${aws:username}``) are not substituted: a value containing ``${`` is a :class:`PolicyError`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

__all__ = ["Condition", "ContextValue", "PolicyError", "glob_match", "parse_conditions"]

#: A request context value: one string, or several for a multivalued key.
ContextValue = str | Sequence[str]
_Matcher = Callable[[str, str], bool]


class PolicyError(ValueError):
    """A policy document that cannot be evaluated faithfully (bad shape, unknown operator, unsupported feature)."""


@functools.lru_cache(maxsize=4096)
def _glob(pattern: str, ignore_case: bool) -> re.Pattern[str]:
    body = "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch) for ch in pattern)
    return re.compile(body, re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def glob_match(pattern: str, value: str, *, ignore_case: bool = False) -> bool:
    """IAM wildcard match: ``*`` any run of characters (slashes and colons included), ``?`` exactly one."""
    return _glob(pattern, ignore_case).fullmatch(value) is not None


def _arn_match(value: str, pattern: str) -> bool:
    # Six fields: arn:partition:service:region:account:resource (the last may itself hold colons).
    have = value.split(":", 5)
    want = pattern.split(":", 5)
    if len(have) != 6 or len(want) != 6:
        return False
    return all(glob_match(w, h) for w, h in zip(want, have, strict=True))


def _numeric(op: Callable[[float, float], bool]) -> _Matcher:
    def match(value: str, wanted: str) -> bool:
        try:
            return op(float(value), float(wanted))
        except ValueError:
            return False  # a context value that is not a number matches no numeric condition

    return match


#: base operator -> (matcher(context value, policy value), negated, numeric policy values)
_OPERATORS: Final[dict[str, tuple[_Matcher, bool, bool]]] = {
    "StringEquals": (lambda v, w: v == w, False, False),
    "StringNotEquals": (lambda v, w: v == w, True, False),
    "StringEqualsIgnoreCase": (lambda v, w: v.casefold() == w.casefold(), False, False),
    "StringNotEqualsIgnoreCase": (lambda v, w: v.casefold() == w.casefold(), True, False),
    "StringLike": (lambda v, w: glob_match(w, v), False, False),
    "StringNotLike": (lambda v, w: glob_match(w, v), True, False),
    "ArnEquals": (_arn_match, False, False),
    "ArnLike": (_arn_match, False, False),
    "ArnNotEquals": (_arn_match, True, False),
    "ArnNotLike": (_arn_match, True, False),
    "NumericEquals": (_numeric(lambda a, b: a == b), False, True),
    "NumericNotEquals": (_numeric(lambda a, b: a == b), True, True),
    "NumericLessThan": (_numeric(lambda a, b: a < b), False, True),
    "NumericLessThanEquals": (_numeric(lambda a, b: a <= b), False, True),
    "NumericGreaterThan": (_numeric(lambda a, b: a > b), False, True),
    "NumericGreaterThanEquals": (_numeric(lambda a, b: a >= b), False, True),
    "Bool": (lambda v, w: v.lower() == w.lower(), False, False),
}
_FOR_ANY: Final = "ForAnyValue:"
_FOR_ALL: Final = "ForAllValues:"
_IF_EXISTS: Final = "IfExists"


@dataclass(frozen=True, slots=True)
class Condition:
    """One (operator, key, values) test of a statement's ``Condition`` block."""

    operator: str  # as written, e.g. "ForAnyValue:StringLikeIfExists"
    key: str
    values: tuple[str, ...]
    base: str
    qualifier: str | None  # "ForAnyValue", "ForAllValues" or None
    if_exists: bool

    def holds(self, context: Mapping[str, ContextValue]) -> bool:
        present = _lookup(context, self.key)
        if self.base == "Null":
            return any((wanted.lower() == "true") == (present is None) for wanted in self.values)
        matcher, negated, _ = _OPERATORS[self.base]
        if present is None:
            if self.if_exists or self.qualifier == "ForAllValues":
                return True
            if self.qualifier == "ForAnyValue":
                return False
            return negated

        def one(value: str) -> bool:
            matched = any(matcher(value, wanted) for wanted in self.values)
            return not matched if negated else matched

        if self.qualifier == "ForAllValues" or (self.qualifier is None and negated):
            return all(one(value) for value in present)
        return any(one(value) for value in present)


def _lookup(context: Mapping[str, ContextValue], key: str) -> tuple[str, ...] | None:
    found: ContextValue | None = context.get(key)
    if found is None:
        folded = key.casefold()
        found = next((value for name, value in context.items() if name.casefold() == folded), None)
    if found is None:
        return None
    values = (found,) if isinstance(found, str) else tuple(found)
    return values or None


def _text(value: object, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        raise PolicyError(f"{where}: a condition value must be a string, number or boolean, got {value!r}")
    if "${" in value:
        raise PolicyError(f"{where}: policy variables are not supported here, got {value!r}")
    return value


def _split_operator(operator: str, where: str) -> tuple[str, str | None, bool]:
    qualifier: str | None = None
    rest = operator
    for prefix in (_FOR_ANY, _FOR_ALL):
        if rest.startswith(prefix):
            qualifier, rest = prefix[:-1], rest[len(prefix) :]
    if_exists = rest.endswith(_IF_EXISTS) and rest != _IF_EXISTS
    base = rest[: -len(_IF_EXISTS)] if if_exists else rest
    if base != "Null" and base not in _OPERATORS:
        known = ", ".join([*_OPERATORS, "Null"])
        raise PolicyError(f"{where}: unknown or unsupported condition operator {operator!r} (supported: {known})")
    if base == "Null" and (if_exists or qualifier):
        raise PolicyError(f"{where}: {operator!r}: Null takes neither IfExists nor a set qualifier")
    return base, qualifier, if_exists


def parse_conditions(block: object, where: str) -> tuple[Condition, ...]:
    """The tests of one statement's ``Condition`` element (``where`` names the statement in error messages)."""
    if not isinstance(block, Mapping):
        raise PolicyError(f"{where}: Condition must be an object, got {block!r}")
    parsed: list[Condition] = []
    for operator, keys in block.items():
        base, qualifier, if_exists = _split_operator(str(operator), where)
        if not isinstance(keys, Mapping) or not keys:
            raise PolicyError(f"{where}: Condition {operator!r} must map keys to values, got {keys!r}")
        for key, raw in keys.items():
            listed = raw if isinstance(raw, list | tuple) else [raw]
            values = tuple(_text(value, f"{where} {operator} {key}") for value in listed)
            if not values:
                raise PolicyError(f"{where}: Condition {operator!r} key {key!r} lists no values")
            if base in _OPERATORS and _OPERATORS[base][2]:
                for value in values:
                    try:
                        float(value)
                    except ValueError:
                        raise PolicyError(f"{where}: {operator} {key}: {value!r} is not a number") from None
            if base in ("Null", "Bool") and any(value.lower() not in ("true", "false") for value in values):
                raise PolicyError(f"{where}: {operator} {key}: values must be true or false, got {list(values)}")
            parsed.append(Condition(str(operator), str(key), values, base, qualifier, if_exists))
    return tuple(parsed)
