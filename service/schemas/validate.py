"""Body validation: raw bytes (or an already-decoded JSON value) in, the body as sent out.

`validate_body` is the one entry point of HTTP and Kafka for bodies. JSON is decoded
strictly (UTF-8 only, no duplicate keys, no NaN/Infinity, no lone surrogates), then
checked by the strict pydantic models. Every failure is an InputValidationError whose
errors are located from the root of the request (`["body", ...]` by default).
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import ValidationError

from service.schemas.common import StrictModel
from service.schemas.devices import (
    ALL_WITH_COUNT,
    ONE_ATTRIBUTE_VALUE,
    DeviceClass,
    ResourceSlice,
    one_reach,
    unknown_request,
)
from service.schemas.errors import InputValidationError, pydantic_errors
from service.schemas.groups import MAX_PODS_PER_WORKLOAD
from service.schemas.inventory import Node, PriorityClass
from service.schemas.lifecycle import PodStatusReport, Scale, podstatus_cross_field_errors
from service.schemas.podgroups import PodGroupObject
from service.schemas.scheduler import SchedulerConfiguration
from service.schemas.scheduling import taint_errors
from service.schemas.workload import Workload

BodyKind = Literal["Node", "DeviceClass", "ResourceSlice", "PriorityClass", "Workload", "PodStatusReport", "Scale",
                   "PodGroupObject"]
BODY_MODELS: dict[str, type[StrictModel]] = {
    "Node": Node,
    "DeviceClass": DeviceClass,
    "ResourceSlice": ResourceSlice,
    "PriorityClass": PriorityClass,
    "Workload": Workload,
    "SchedulerConfiguration": SchedulerConfiguration,
    "PodStatusReport": PodStatusReport,
    "Scale": Scale,
    "PodGroupObject": PodGroupObject,
}
# Kinds whose name is the object's address (the URL path, the Kafka envelope): an optional
# `name` in the body must equal it, and is dropped from the validated body.
ADDRESSED_BY_NAME = frozenset({"Node", "DeviceClass", "ResourceSlice", "PriorityClass"})


class _DuplicateKey(ValueError):
    pass


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(f"duplicate key {key!r}")
            seen.add(key)
    return result


class _Constant(ValueError):
    pass


def _no_constant(name: str) -> Any:
    raise _Constant(f"{name} is not valid JSON")


def _lone_surrogate(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            strings: Sequence[str] = (item,)
        elif isinstance(item, dict):
            strings = list(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
            continue
        else:
            continue
        for text in strings:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def parse_json(raw: bytes | bytearray | memoryview | str, loc: Sequence[str | int] = ("body",)) -> Any:
    """Decode one JSON document strictly; InputValidationError at `loc` otherwise."""
    def fail(msg: str) -> InputValidationError:
        return InputValidationError.single(loc, msg)

    if isinstance(raw, str):
        text = raw
    else:
        try:
            text = bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise fail(f"Invalid JSON: not UTF-8 ({exc.reason} at byte {exc.start})") from None
    if not text.strip():
        raise fail("Invalid JSON: empty body")
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise fail(f"Invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except _DuplicateKey as exc:
        raise fail(f"Invalid JSON: {exc}") from None
    except RecursionError:
        raise fail("Invalid JSON: nested too deeply") from None
    except _Constant as exc:  # NaN, Infinity, -Infinity
        raise fail(f"Invalid JSON: {exc}") from None
    except ValueError:  # integers beyond Python's digit limit (4300)
        raise fail("Invalid JSON: a number is too large") from None
    # text decoded from UTF-8 cannot hold a surrogate: only a \u escape can make one
    if (isinstance(raw, str) or "\\u" in text) and _lone_surrogate(value):
        raise fail("Invalid JSON: a string holds an unpaired UTF-16 surrogate")
    return value


def _is_count(value: Any) -> bool:
    return type(value) is int and 1 <= value <= MAX_PODS_PER_WORKLOAD


def workload_cross_field_errors(body: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """The workload's cross-field rules, checked on the raw JSON wherever the fields a rule relates
    are themselves valid, so that a body failing elsewhere still gets them named (the models check
    a rule only when the whole object holding it is valid). Same messages as the models."""
    errors: list[tuple[tuple[Any, ...], str]] = []
    dicts = _dicts

    def duplicates(where: tuple[Any, ...], items: Any) -> None:
        errors.extend(_duplicate_names(where, items))

    if "priority" in body and "priorityClassName" in body:
        errors.append((("priorityClassName",), "must not be set together with priority"))
    groups = dicts(body.get("podGroups"))
    duplicates(("podGroups",), body.get("podGroups"))
    duplicates(("resourceClaims",), body.get("resourceClaims"))
    duplicates(("resourceClaimTemplates",), body.get("resourceClaimTemplates"))
    templates = {t["name"] for _, t in dicts(body.get("resourceClaimTemplates")) if isinstance(t.get("name"), str)}
    templates_known = isinstance(body.get("resourceClaimTemplates", []), list)

    def claims(where: tuple[Any, ...], entries: Any) -> None:
        duplicates(where, entries)
        for i, claim in dicts(entries):
            template = claim.get("resourceClaimTemplateName")
            if templates_known and isinstance(template, str) and template not in templates:
                errors.append(((*where, i, "resourceClaimTemplateName"),
                               f"no resourceClaimTemplates entry named {template!r}"))

    claims(("resourceClaims",), body.get("resourceClaims"))
    total: int | None = 0
    for g, group in groups:
        claims(("podGroups", g, "resourceClaims"), group.get("resourceClaims"))
        duplicates(("podGroups", g, "pods"), group.get("pods"))
        entries = dicts(group.get("pods"))
        counts = [entry.get("count", 1) for _, entry in entries]
        for p, entry in entries:
            claims(("podGroups", g, "pods", p, "resourceClaims"), entry.get("resourceClaims"))
        valid = isinstance(group.get("pods"), list) and len(entries) == len(group["pods"]) and entries \
            and all(_is_count(c) for c in counts)
        if not valid:
            total = None
            continue
        count = sum(counts)
        if total is not None:
            total += count
        policy = group.get("schedulingPolicy")
        gang = policy.get("gang") if isinstance(policy, dict) else None
        min_count = gang.get("minCount") if isinstance(gang, dict) else None
        if _is_count(min_count) and min_count > count:
            errors.append((("podGroups", g, "schedulingPolicy", "gang", "minCount"),
                           f"must be at most the group's pod count ({count})"))
    if total is not None and total > MAX_PODS_PER_WORKLOAD:
        errors.append((("podGroups",), f"a workload has at most {MAX_PODS_PER_WORKLOAD} pods (this one has {total})"))
    for t, template in dicts(body.get("resourceClaimTemplates")):
        spec = template.get("spec")
        devices = spec.get("devices") if isinstance(spec, dict) else None
        if isinstance(devices, dict):
            errors += [(("resourceClaimTemplates", t, "spec", "devices", *where), msg)
                       for where, msg in _claim_errors(devices)]
    return errors


def _dicts(value: Any) -> list[tuple[int, dict[str, Any]]]:
    return [(i, v) for i, v in enumerate(value) if isinstance(v, dict)] if isinstance(value, list) else []


def _duplicate_names(where: tuple[Any, ...], items: Any) -> list[tuple[tuple[Any, ...], str]]:
    seen: set[str] = set()
    errors = []
    for i, item in _dicts(items):
        name = item.get("name")
        if isinstance(name, str):
            if name in seen:
                errors.append(((*where, i, "name"), f"duplicate name {name!r}"))
            seen.add(name)
    return errors


def _claim_errors(devices: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """A claim spec's `devices` rules (DeviceClaim, ExactDeviceRequest), on the raw JSON."""
    errors = _duplicate_names(("requests",), devices.get("requests"))
    requests = _dicts(devices.get("requests"))
    for r, request in requests:
        exactly = request.get("exactly")
        if isinstance(exactly, dict) and exactly.get("allocationMode") == "All" and "count" in exactly:
            errors.append((("requests", r, "exactly", "count"), ALL_WITH_COUNT))
    if isinstance(devices.get("requests", []), list) and len(requests) == len(devices.get("requests", [])):
        known = {request.get("name") for _, request in requests if isinstance(request.get("name"), str)}
        for c, constraint in _dicts(devices.get("constraints")):
            names = constraint.get("requests")
            for j, name in enumerate(names if isinstance(names, list) else ()):
                if isinstance(name, str) and name not in known:
                    errors.append((("constraints", c, "requests", j), unknown_request(name)))
    return errors


def slice_cross_field_errors(body: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """A resource slice's rules (ResourceSlice, Device, DeviceAttribute) on the raw JSON, as for
    workloads: named also when the slice fails elsewhere."""
    chosen = [f for f, given in (("nodeName", body.get("nodeName") is not None),
                                 ("allNodes", body.get("allNodes") is True),
                                 ("nodeSelector", body.get("nodeSelector") is not None)) if given]
    errors: list[tuple[tuple[Any, ...], str]] = []
    if len(chosen) != 1:
        errors.append(((), one_reach(chosen)))
    if body.get("nodeSelector") == {}:
        errors.append((("nodeSelector",), "must not be empty"))
    errors += _duplicate_names(("devices",), body.get("devices"))
    for d, device in _dicts(body.get("devices")):
        attributes = device.get("attributes")
        for key, value in (attributes.items() if isinstance(attributes, dict) else ()):
            if isinstance(value, dict) and len(value) != 1:
                errors.append((("devices", d, "attributes", key), ONE_ATTRIBUTE_VALUE))
    return errors


def node_cross_field_errors(body: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """A node's distinct (key, effect) taints, as for workloads: named also when it fails elsewhere."""
    return [(("taints", *where), msg) for where, msg in taint_errors(body.get("taints"))]


_CROSS_FIELD = {"Workload": workload_cross_field_errors, "ResourceSlice": slice_cross_field_errors,
                "Node": node_cross_field_errors, "PodStatusReport": podstatus_cross_field_errors}


def validate_body(kind: str, raw: bytes | bytearray | memoryview | str | dict[str, Any], *,
                  name: str | None = None, namespace: str | None = None,
                  loc: Sequence[str | int] = ("body",)) -> dict[str, Any]:
    """Validate a body of `kind` ("Node", "DeviceClass", "ResourceSlice", "PriorityClass", "Workload").

    Returns the body as the user sent it: a plain JSON dict (`model_dump(mode="json",
    by_alias=True, exclude_unset=True)`: no defaults filled in), except that the address
    fields are dropped: `name` from inventory bodies (the name is the path segment or the
    envelope's `name`) and `namespace` from workload bodies. When a body carries them anyway
    they must equal `name` / `namespace` as given here (when given), else it is an error.
    A workload body always carries its `name`; when `name` is given it must equal it.

    Raises InputValidationError (errors located under `loc`).
    """
    model = BODY_MODELS.get(kind)
    if model is None:
        raise ValueError(f"unknown body kind {kind!r}")
    value = raw if isinstance(raw, dict) else parse_json(raw, loc)
    if not isinstance(value, dict):
        raise InputValidationError.single(loc, "Input should be a JSON object")
    try:
        validated = model.model_validate(value, strict=True)
    except ValidationError as exc:
        errors = pydantic_errors(exc, loc)
        if (cross_field := _CROSS_FIELD.get(kind)) is not None:
            # also the cross-field rules whose own fields are valid (http.md: every offending field)
            named = {tuple(e["loc"]) for e in errors}
            try:
                extra = cross_field(value)
            except Exception:  # pragma: no cover - a best effort on input that already failed: never a 500
                extra = []
            errors += [{"loc": [*loc, *where], "msg": msg} for where, msg in extra if (*loc, *where) not in named]
        raise InputValidationError(errors) from None
    except RecursionError:  # pragma: no cover - the models are not recursive
        raise InputValidationError.single(loc, "nested too deeply") from None
    body = validated.model_dump(mode="json", by_alias=True, exclude_unset=True)
    errors = []
    if name is not None and "name" in body and body["name"] != name:
        errors.append({"loc": [*loc, "name"], "msg": f"must equal the name the request addresses ({name!r})"})
    if namespace is not None and "namespace" in body and body["namespace"] != namespace:
        errors.append({"loc": [*loc, "namespace"],
                       "msg": f"must equal the namespace the request addresses ({namespace!r})"})
    if errors:
        raise InputValidationError(errors)
    if kind in ADDRESSED_BY_NAME:
        body.pop("name", None)
    if kind in ("Workload", "PodGroupObject"):
        body.pop("namespace", None)
    return body
