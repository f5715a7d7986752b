"""The what-if changes document (audit.md, *What-if*): checked by hand, every error located from the
document's root (the HTTP adapter puts "body" before it; the CLI names the first), into the
domain's `Changes`."""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from service.domain import ClusterState
from service.domain.decide.commands import upsert_node
from service.domain.placement.scoring import STRATEGIES, recorded
from service.domain.read.whatif import CapacityChange, Changes, NodeChange
from service.schemas.common import PRIORITY_MAX, PRIORITY_MIN
from service.schemas.errors import InputValidationError
from service.schemas.names import dns1123_subdomain_error
from service.schemas.validate import validate_body

_KEYS = ("from", "until", "scoring", "priorityClasses", "nodes", "capacity", "withdraw")
_NODE_KINDS = ("remove", "add", "cordon", "uncordon")
_DECIMAL = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_WITHDRAW = re.compile(r"^([^/@]+)/([^/@]+)(?:@([0-9]{1,18}))?$")  # ns/name, or ns/name@N: one incarnation


def _unknown(entry: dict[str, Any], allowed: tuple[str, ...], loc: list[Any], errors: list[dict[str, Any]]) -> None:
    """An error per key that is not one of `allowed`, naming them."""
    for k in sorted(set(entry) - set(allowed)):
        errors.append({"loc": [*loc, k], "msg": f"Unknown field: allowed are {', '.join(allowed)}"})


def _position(value: Any, loc: list[Any], errors: list[dict[str, Any]]) -> int | None:
    if type(value) is not int or value < 0:
        errors.append({"loc": loc, "msg": "must be a position (an integer, 0 or more)"})
        return None
    return value


def _name(value: Any, loc: list[Any], errors: list[dict[str, Any]]) -> str | None:
    """A node name, as `PUT /nodes/{name}` takes it (a DNS-1123 subdomain)."""
    if not isinstance(value, str) or not value:
        errors.append({"loc": loc, "msg": "must be a node name (a non-empty string)"})
        return None
    if (reason := dns1123_subdomain_error(value)) is not None:
        errors.append({"loc": loc, "msg": f"must be a node name: {reason}"})
        return None
    return value


def _node_entry(i: int, entry: Any, errors: list[dict[str, Any]]) -> NodeChange | None:
    loc: list[Any] = ["nodes", i]
    if not isinstance(entry, dict):
        errors.append({"loc": loc, "msg": "must be an object"})
        return None
    _unknown(entry, ("at", *_NODE_KINDS, "node"), loc, errors)
    kinds = [k for k in _NODE_KINDS if k in entry]
    at = _position(entry.get("at"), [*loc, "at"], errors)
    if len(kinds) != 1:
        errors.append({"loc": loc, "msg": "needs exactly one of remove, add, cordon, uncordon"})
        return None
    kind = kinds[0]
    name = _name(entry[kind], [*loc, kind], errors)
    if ("node" in entry) != (kind == "add"):
        errors.append({"loc": [*loc, "node"], "msg": "add needs node (a node body); the others take none"})
        return None
    data = None
    if kind == "add" and name is not None:
        try:
            body = validate_body("Node", entry["node"], name=name, loc=[*loc, "node"])
        except InputValidationError as exc:
            errors.extend(exc.errors)
            return None
        accepted = upsert_node(ClusterState("what-if"), name, None, body)
        if not isinstance(accepted, tuple):
            errors.append({"loc": [*loc, "node"], "msg": accepted.detail})
            return None
        data = accepted[1]
    if at is None or name is None:
        return None
    return NodeChange(i, at, kind, name, data)


def _capacity(i: int, entry: Any, errors: list[dict[str, Any]]) -> CapacityChange | None:
    loc: list[Any] = ["capacity", i]
    if not isinstance(entry, dict):
        errors.append({"loc": loc, "msg": "must be an object"})
        return None
    _unknown(entry, ("resource", "factor", "nodeSelector"), loc, errors)
    resource, factor, selector = entry.get("resource"), entry.get("factor"), entry.get("nodeSelector", {})
    ok = True
    if not isinstance(resource, str) or not resource:
        errors.append({"loc": [*loc, "resource"], "msg": "must be a resource name"})
        ok = False
    value: Fraction | None = None
    if type(factor) is int:
        value = Fraction(factor)
    elif isinstance(factor, str) and _DECIMAL.match(factor):
        try:
            value = Fraction(Decimal(factor))
        except InvalidOperation:  # pragma: no cover - the pattern guards it
            value = None
    if value is None or value <= 0:
        errors.append({"loc": [*loc, "factor"], "msg": "must be above 0: an integer or a decimal string"})
        ok = False
    if not isinstance(selector, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in selector.items()):
        errors.append({"loc": [*loc, "nodeSelector"], "msg": "must be an object of label values (strings)"})
        ok = False
    if not ok or value is None or not isinstance(resource, str):
        return None
    return CapacityChange(resource, value, dict(selector), i)


def _scoring(value: Any, errors: list[dict[str, Any]]) -> dict[str, Any] | None:
    """`scoring` as the scoringStrategy it puts in force: validated as `PUT /scheduler` validates its
    body (sharing.md), `strategy` for `type`, recorded with every default filled in."""
    if not isinstance(value, dict):
        errors.append({"loc": ["scoring"], "msg": "must be an object"})
        return None
    unknown = sorted(set(value) - {"strategy", "fragmentationAware"})
    _unknown(value, ("strategy", "fragmentationAware"), ["scoring"], errors)
    strategy = value.get("strategy")
    if strategy not in STRATEGIES:  # the decider's strategies (domain/placement/scoring.py)
        errors.append({"loc": ["scoring", "strategy"], "msg": f"must be one of {', '.join(STRATEGIES)}"})
        return None
    if ("fragmentationAware" in value) != (strategy == "FragmentationAware"):
        errors.append({"loc": ["scoring", "fragmentationAware"],
                       "msg": "required with FragmentationAware, refused with the others"})
        return None
    body = {"type": strategy, **({"fragmentationAware": value["fragmentationAware"]}
                                 if "fragmentationAware" in value else {})}
    try:
        checked = validate_body("SchedulerConfiguration", {"scoringStrategy": body}, loc=())
    except InputValidationError as exc:
        for e in exc.errors:
            where = ["strategy" if p == "type" else p for p in e["loc"][1:]]
            errors.append({**e, "loc": ["scoring", *where]})
        return None
    if unknown:
        return None
    return dict(recorded(checked["scoringStrategy"])["scoringStrategy"])


def parse_changes(doc: Any) -> Changes:
    """The changes document (audit.md) as Changes; InputValidationError naming every bad entry
    (locations from the document's root; the HTTP adapter puts "body" before them)."""
    errors: list[dict[str, Any]] = []
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise InputValidationError.single([], "the changes must be an object")
    _unknown(doc, _KEYS, [], errors)
    changes = Changes()
    if "from" in doc:
        changes.start = _position(doc["from"], ["from"], errors) or 0
    if "until" in doc:
        changes.until = _position(doc["until"], ["until"], errors)
    classes = doc.get("priorityClasses", {})
    if not isinstance(classes, dict):
        errors.append({"loc": ["priorityClasses"], "msg": "must be an object of class names to priorities"})
    else:
        for name, value in classes.items():
            if type(value) is not int or not PRIORITY_MIN <= value <= PRIORITY_MAX:
                errors.append({"loc": ["priorityClasses", name],
                               "msg": f"must be an integer in {PRIORITY_MIN}..{PRIORITY_MAX}"})
            else:
                changes.priority_classes[name] = value
    for field, parse in (("nodes", _node_entry), ("capacity", _capacity)):
        entries = doc.get(field, [])
        if not isinstance(entries, list):
            errors.append({"loc": [field], "msg": "must be a list"})
            continue
        parsed = [parse(i, e, errors) for i, e in enumerate(entries)]
        getattr(changes, field).extend(p for p in parsed if p is not None)
    withdraw = doc.get("withdraw", [])
    if not isinstance(withdraw, list):
        errors.append({"loc": ["withdraw"], "msg": "must be a list of NAMESPACE/NAME or NAMESPACE/NAME@POSITION"})
    else:
        for i, w in enumerate(withdraw):
            found = _WITHDRAW.match(w) if isinstance(w, str) else None
            if found is None:
                errors.append({"loc": ["withdraw", i], "msg": "must be NAMESPACE/NAME (every incarnation of the "
                                                              "name) or NAMESPACE/NAME@POSITION (the one submitted "
                                                              "at POSITION)"})
            else:
                at = found.group(3)
                changes.withdraw.append((found.group(1), found.group(2), None if at is None else int(at)))
    if "scoring" in doc:
        changes.scoring = _scoring(doc["scoring"], errors)
    if errors:
        raise InputValidationError(errors)
    return changes
