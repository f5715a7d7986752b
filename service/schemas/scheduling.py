"""Taints, tolerations and node affinity, as in a Kubernetes node and pod spec (model.md, *Nodes*
and *Node affinity and tolerations*).

The rules are Kubernetes' API validation (`ValidateTaints`, `ValidateTolerations`,
`ValidateNodeSelector`, `ValidatePreferredSchedulingTerms`) and, for values, the label selector's
own checks (values are label values; `Gt`/`Lt` take one integer). Where Kubernetes sets no number,
a term holds at most 64 match expressions and 64 match fields (docs/http.md, *Validation*).
"""
from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, StrictInt, StrictStr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from service.schemas.common import INT64_MAX, StrictModel
from service.schemas.errors import raise_errors
from service.schemas.names import (
    LabelValue,
    QualifiedName,
    dns1123_subdomain_error,
    label_value_error,
    qualified_name_error,
)

MAX_TAINTS = 32
MAX_TOLERATIONS = 32
MAX_TERMS = 32
MAX_REQUIREMENTS = 64

TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
_INTEGER = re.compile(r"[+-]?[0-9]+", re.ASCII)

Errors = list[tuple[tuple[Any, ...], str]]

NO_TOLERATION_SECONDS = ("not supported: eviction after a delay needs a clock, which the decider does not read "
                         "(a NoExecute taint releases the pods that do not tolerate it at once)")
EXISTS_WITH_VALUE = "value must be empty when `operator` is 'Exists'"
EMPTY_KEY_NOT_EXISTS = "operator must be Exists when `key` is empty, which means \"match all values and all keys\""
DUPLICATE_TAINT = "taints must be unique by key and effect pair"


class Taint(StrictModel):
    """A node taint: pods that do not tolerate it stay off the node (`NoSchedule`, `NoExecute`) or
    avoid it (`PreferNoSchedule`)."""
    key: QualifiedName
    value: LabelValue = ""
    effect: TaintEffect


def taint_errors(taints: Any) -> Errors:
    """Distinct (key, effect) pairs, on the raw JSON (named also when the node fails elsewhere)."""
    errors: Errors = []
    seen: set[tuple[Any, Any]] = set()
    for i, taint in enumerate(taints if isinstance(taints, list) else ()):
        if isinstance(taint, dict) and isinstance(taint.get("key"), str) and isinstance(taint.get("effect"), str):
            pair = (taint["key"], taint["effect"])
            if pair in seen:
                errors.append(((i,), DUPLICATE_TAINT))
            seen.add(pair)
    return errors


class Toleration(StrictModel):
    """Tolerates the taints it matches: equal effects (an empty effect matches every effect), and
    equal keys with `Exists` or equal values, or an empty key with `Exists` (every taint)."""
    key: StrictStr = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: StrictStr = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: Any = Field(None, description="Refused (a 422): eviction after a delay needs a clock",
                                    json_schema_extra={"not": {}})

    @model_validator(mode="after")
    def _check(self) -> Toleration:
        raise_errors("Toleration", toleration_errors(self.model_dump(by_alias=True, exclude_unset=True)))
        return self


def toleration_errors(t: dict[str, Any]) -> Errors:
    errors: Errors = []
    key, operator, value = t.get("key", ""), t.get("operator", "Equal"), t.get("value", "")
    if "tolerationSeconds" in t:
        errors.append((("tolerationSeconds",), NO_TOLERATION_SECONDS))
    if isinstance(key, str) and key and (reason := qualified_name_error(key)) is not None:
        errors.append((("key",), reason))
    if key == "" and operator != "Exists":
        errors.append((("operator",), EMPTY_KEY_NOT_EXISTS))
    if operator == "Exists" and value != "":
        errors.append((("value",), EXISTS_WITH_VALUE))
    elif isinstance(value, str) and (reason := label_value_error(value)) is not None:
        errors.append((("value",), reason))
    return errors


Operator = Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]


def _integer_error(value: str) -> str | None:
    if not _INTEGER.fullmatch(value) or not -INT64_MAX - 1 <= int(value) <= INT64_MAX:
        return "for 'Gt', 'Lt' operators, the value must be an integer"
    return None


class NodeSelectorRequirement(StrictModel):
    """A label of the node against values: `In`, `NotIn` (a node without the label matches), `Exists`,
    `DoesNotExist`, `Gt`, `Lt` (integer label values; a missing or non-integer label does not match)."""
    key: QualifiedName
    operator: Operator
    values: list[StrictStr] = Field(default_factory=list)

    @model_validator(mode="after")
    def _check(self) -> NodeSelectorRequirement:
        errors: Errors = []
        if self.operator in ("In", "NotIn") and not self.values:
            errors.append((("values",), "must be specified when `operator` is 'In' or 'NotIn'"))
        elif self.operator in ("Exists", "DoesNotExist") and self.values:
            errors.append((("values",), "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        elif self.operator in ("Gt", "Lt") and len(self.values) != 1:
            errors.append((("values",), "must be specified single value when `operator` is 'Lt' or 'Gt'"))
        for i, value in enumerate(self.values):
            if (reason := label_value_error(value)) is not None:
                errors.append((("values", i), reason))
            elif self.operator in ("Gt", "Lt") and (reason := _integer_error(value)) is not None:
                errors.append((("values", i), reason))
        raise_errors("NodeSelectorRequirement", errors)
        return self


class NodeFieldSelectorRequirement(StrictModel):
    """A field of the node: only `metadata.name`, with `In` or `NotIn` and one node name."""
    key: Literal["metadata.name"]
    operator: Literal["In", "NotIn"]
    values: list[StrictStr]

    @field_validator("values")
    @classmethod
    def _one_name(cls, values: list[str]) -> list[str]:
        if len(values) != 1:
            raise PydanticCustomError("values", "{reason}", {
                "reason": "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"})
        if (reason := dns1123_subdomain_error(values[0])) is not None:
            raise_errors("values", [((0,), reason)])
        return values


class NodeSelectorTerm(StrictModel):
    """Every requirement holds. A term with none matches no node."""
    match_expressions: list[NodeSelectorRequirement] = Field(default_factory=list, max_length=MAX_REQUIREMENTS)
    match_fields: list[NodeFieldSelectorRequirement] = Field(default_factory=list, max_length=MAX_REQUIREMENTS)


class NodeSelector(StrictModel):
    """The node matches at least one term."""
    node_selector_terms: list[NodeSelectorTerm] = Field(min_length=1, max_length=MAX_TERMS)


class PreferredSchedulingTerm(StrictModel):
    weight: StrictInt = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinity(StrictModel):
    required_during_scheduling_ignored_during_execution: NodeSelector = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list, max_length=MAX_TERMS)


class Affinity(StrictModel):
    """Only node affinity: pod (anti-)affinity is not supported (an unknown field)."""
    node_affinity: NodeAffinity = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
