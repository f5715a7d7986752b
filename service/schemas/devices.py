"""DRA bodies: device classes, resource slices, and the device claim spec (model.md, *Devices*).

Limits follow Kubernetes' resource.k8s.io validation where model.md is silent: at most 32
selectors, requests and constraints, 128 devices per slice, 32 attributes and capacities per
device, attribute strings and versions of at most 64 characters.
"""
from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StrictBool, StrictInt, StrictStr, WithJsonSchema, model_validator
from pydantic_core import PydanticCustomError

from service.domain.model.quantity import parse_quantity
from service.schemas.cel_check import CELExpression
from service.schemas.common import INT64_MAX, INT64_MIN, QUANTITY_SCHEMA, StrictModel, quantity_error
from service.schemas.errors import duplicate_names as _duplicates
from service.schemas.errors import raise_errors
from service.schemas.names import (
    DeviceQualifiedName,
    DNSLabel,
    DNSSubdomain,
    DriverName,
    LabelMap,
    PoolName,
)

MAX_SELECTORS = 32
MAX_REQUESTS = 32
MAX_CONSTRAINTS = 32
MAX_DEVICES_PER_SLICE = 128
MAX_ATTRIBUTES_AND_CAPACITIES = 32
MAX_ATTRIBUTE_LENGTH = 64

# Semantic Versioning 2.0.0 (https://semver.org), as Kubernetes checks device `version` attributes.
SEMVER_PATTERN = (
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
_semver_re = re.compile(SEMVER_PATTERN, re.ASCII)


def _check_version(value: str) -> str:
    if len(value) > MAX_ATTRIBUTE_LENGTH:
        raise PydanticCustomError("version", "{reason}", {"reason": f"must be no more than {MAX_ATTRIBUTE_LENGTH} characters"})
    if not _semver_re.fullmatch(value):
        raise PydanticCustomError("version", "{reason}", {"reason": "must be a semantic version (semver.org), e.g. 1.2.3"})
    return value


Version = Annotated[StrictStr, AfterValidator(_check_version),
                    WithJsonSchema({"type": "string", "pattern": SEMVER_PATTERN, "maxLength": MAX_ATTRIBUTE_LENGTH})]


class CELSelector(StrictModel):
    expression: CELExpression


class DeviceSelector(StrictModel):
    """`{"cel": {"expression": "..."}}`; the expression must compile."""
    cel: CELSelector


class DeviceClass(StrictModel):
    """A device class: `PUT /v1/clusters/{cluster}/deviceclasses/{name}`."""
    name: DNSSubdomain = Field(None, description="Optional; when given, it must equal the name in the path.")
    selectors: list[DeviceSelector] = Field(default_factory=list, max_length=MAX_SELECTORS)


# Messages of the cross-field rules, shared with their raw-JSON checks (service/schemas/validate.py).
ONE_ATTRIBUTE_VALUE = "exactly one of string, int, bool or version must be set"
ALL_WITH_COUNT = "must not be set when allocationMode is All"
ONE_CONSTRAINT = "exactly one of matchAttribute and distinctAttribute must be set"


def one_reach(chosen: list[str]) -> str:
    return "exactly one of nodeName, allNodes: true or nodeSelector must be set" + (
        f" (got {', '.join(chosen)})" if chosen else "")


def unknown_request(name: str) -> str:
    return f"no request named {name!r} in this claim"


class DeviceAttribute(StrictModel):
    """A typed attribute value: exactly one of `string`, `int`, `bool`, `version`."""
    string: StrictStr = Field(None, max_length=MAX_ATTRIBUTE_LENGTH)  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    int_: StrictInt = Field(None, alias="int", ge=INT64_MIN, le=INT64_MAX)  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    bool_: StrictBool = Field(None, alias="bool")  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    version: Version = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel

    @model_validator(mode="after")
    def _exactly_one(self) -> DeviceAttribute:
        given = self.model_fields_set
        if len(given) != 1:
            raise_errors("DeviceAttribute", [((), ONE_ATTRIBUTE_VALUE)])
        return self


Quantity = Annotated[Any, WithJsonSchema(QUANTITY_SCHEMA)]
MAX_VALID_VALUES = 10


class CapacityRange(StrictModel):
    min: Quantity = None
    max: Quantity = None
    step: Quantity = None


class RequestPolicy(StrictModel):
    """How a request consumes a capacity of a shareable device (sharing.md)."""
    default: Quantity = None
    valid_values: list[Quantity] = Field(None, max_length=MAX_VALID_VALUES)  # type: ignore[arg-type]  # may be absent, never null: see StrictModel
    valid_range: CapacityRange = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel


class DeviceCapacity(StrictModel):
    value: Quantity
    request_policy: RequestPolicy = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel


def _policy_errors(cap: DeviceCapacity, unit: str, shareable: bool) -> list[tuple[tuple[Any, ...], str]]:
    """Kubernetes' resource.k8s.io rules for a capacity's requestPolicy (sharing.md's table)."""
    policy = cap.request_policy
    if policy is None:
        return []
    if not shareable:
        return [(("requestPolicy",), "may be set only on a device with allowMultipleAllocations: true")]
    errors: list[tuple[tuple[Any, ...], str]] = []

    def q(value: Any, loc: tuple[Any, ...]) -> int | None:
        if value is None:
            return None
        if (reason := quantity_error(value, unit)) is not None:
            errors.append((loc, reason))
            return None
        return parse_quantity(value, unit)

    value = q(cap.value, ("value",))
    default = q(policy.default, ("requestPolicy", "default"))
    valid, rng = policy.valid_values, policy.valid_range
    if valid is not None and rng is not None:
        return [*errors, (("requestPolicy",), "only one of validValues and validRange may be set")]
    if (valid is not None or rng is not None) and policy.default is None:
        errors.append((("requestPolicy", "default"), "must be set with validValues or validRange"))
    if valid is not None:
        loc = ("requestPolicy", "validValues")
        amounts = [q(v, (*loc, i)) for i, v in enumerate(valid)]
        for i, a in enumerate(amounts):
            if a is None:
                continue
            prev = amounts[i - 1] if i else None
            if prev is not None and a <= prev:
                errors.append(((*loc, i), "must be strictly ascending"))
            if value is not None and a > value:
                errors.append(((*loc, i), "must not be above the capacity's value"))
        if default is not None and default not in amounts:
            errors.append((loc, "must include default"))
    if rng is not None:
        loc = ("requestPolicy", "validRange")
        vmin, vmax, step = q(rng.min, (*loc, "min")), q(rng.max, (*loc, "max")), q(rng.step, (*loc, "step"))
        if rng.min is None:
            errors.append(((*loc, "min"), "is required"))
        elif vmin is not None:
            if value is not None and vmin > value:
                errors.append(((*loc, "min"), "must not be above the capacity's value"))
            if default is not None and default < vmin:
                errors.append(((*loc, "min"), "must not be above default"))
        if vmax is not None and vmin is not None and vmax < vmin:
            errors.append(((*loc, "max"), "must not be below min"))
        if vmax is not None and value is not None and vmax > value:
            errors.append(((*loc, "max"), "must not be above the capacity's value"))
        if vmax is not None and default is not None and default > vmax:
            errors.append(((*loc, "max"), "must not be below default"))
        if rng.step is not None and step is not None:
            if step <= 0:
                errors.append(((*loc, "step"), "must be above 0"))
            elif vmin is not None:
                if value is not None and vmin + step > value:
                    errors.append(((*loc, "step"), "min + step must not be above the capacity's value"))
                if default is not None and (default - vmin) % step:
                    errors.append(((*loc, "step"), "default - min must be a multiple of step"))
                if vmax is not None and (vmax - vmin) % step:
                    errors.append(((*loc, "step"), "max - min must be a multiple of step"))
    return errors


class Device(StrictModel):
    name: DNSLabel
    allow_multiple_allocations: StrictBool = False
    attributes: dict[DeviceQualifiedName, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[DeviceQualifiedName, DeviceCapacity] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Device:
        errors: list[tuple[tuple[Any, ...], str]] = []
        for key, capacity in self.capacity.items():
            unit = key.rpartition("/")[2]
            if (reason := quantity_error(capacity.value, unit)) is not None:
                errors.append((("capacity", key, "value"), reason))
            for loc, why in _policy_errors(capacity, unit, self.allow_multiple_allocations):
                if loc != ("value",):
                    errors.append((("capacity", key, *loc), why))
        if len(self.attributes) + len(self.capacity) > MAX_ATTRIBUTES_AND_CAPACITIES:
            errors.append(((), f"at most {MAX_ATTRIBUTES_AND_CAPACITIES} attributes and capacities together may be set"))
        raise_errors("Device", errors)
        return self


class ResourcePool(StrictModel):
    name: PoolName
    generation: StrictInt = Field(None, ge=0, le=INT64_MAX)  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    resource_slice_count: StrictInt = Field(None, ge=1, le=INT64_MAX)  # type: ignore[assignment]  # may be absent, never null: see StrictModel


class ResourceSlice(StrictModel):
    """A resource slice: `PUT /v1/clusters/{cluster}/resourceslices/{name}`. Exactly one of
    `nodeName`, `allNodes: true` or `nodeSelector` says which nodes reach its devices."""
    name: DNSSubdomain = Field(None, description="Optional; when given, it must equal the name in the path.")
    driver: DriverName
    pool: ResourcePool
    node_name: DNSSubdomain = None
    all_nodes: StrictBool = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    node_selector: LabelMap = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel
    devices: list[Device] = Field(default_factory=list, max_length=MAX_DEVICES_PER_SLICE)

    @model_validator(mode="after")
    def _check(self) -> ResourceSlice:
        errors: list[tuple[tuple[Any, ...], str]] = []
        chosen = [field for field, given in (("nodeName", self.node_name is not None),
                                             ("allNodes", self.all_nodes is True),
                                             ("nodeSelector", self.node_selector is not None)) if given]
        if len(chosen) != 1:
            errors.append(((), one_reach(chosen)))
        if self.node_selector is not None and not self.node_selector:
            errors.append((("nodeSelector",), "must not be empty"))
        _duplicates(errors, ("devices",), [d.name for d in self.devices])
        raise_errors("ResourceSlice", errors)
        return self


class CapacityRequirements(StrictModel):
    """`capacity.requests`: what each device given to the request must supply (sharing.md)."""
    requests: dict[DeviceQualifiedName, Quantity] = Field(default_factory=dict, max_length=MAX_REQUESTS)

    @model_validator(mode="after")
    def _amounts(self) -> CapacityRequirements:
        errors: list[tuple[tuple[Any, ...], str]] = []
        for key, amount in self.requests.items():
            if (reason := quantity_error(amount, key.rpartition("/")[2])) is not None:
                errors.append((("requests", key), reason))
        raise_errors("CapacityRequirements", errors)
        return self


class ExactDeviceRequest(StrictModel):
    device_class_name: DNSSubdomain
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    count: StrictInt = Field(1, ge=1, le=2**31 - 1)
    selectors: list[DeviceSelector] = Field(default_factory=list, max_length=MAX_SELECTORS)
    capacity: CapacityRequirements = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel

    @model_validator(mode="after")
    def _count(self) -> ExactDeviceRequest:
        if self.allocation_mode == "All" and "count" in self.model_fields_set:
            raise_errors("ExactDeviceRequest", [(("count",), ALL_WITH_COUNT)])
        return self


class DeviceRequest(StrictModel):
    name: DNSLabel
    exactly: ExactDeviceRequest


class DeviceConstraint(StrictModel):
    requests: list[DNSLabel] = Field(None, max_length=MAX_REQUESTS,  # type: ignore[arg-type]  # may be absent, never null: see StrictModel
                                     description="The requests it applies to; omitted: all of them.")
    match_attribute: DeviceQualifiedName = None  # may be absent, never null: see StrictModel
    distinct_attribute: DeviceQualifiedName = None  # may be absent, never null: see StrictModel

    @model_validator(mode="after")
    def _one(self) -> DeviceConstraint:
        if (self.match_attribute is None) == (self.distinct_attribute is None):
            raise_errors("DeviceConstraint", [((), ONE_CONSTRAINT)])
        return self


class DeviceClaim(StrictModel):
    requests: list[DeviceRequest] = Field(default_factory=list, max_length=MAX_REQUESTS)
    constraints: list[DeviceConstraint] = Field(default_factory=list, max_length=MAX_CONSTRAINTS)

    @model_validator(mode="after")
    def _references(self) -> DeviceClaim:
        errors: list[tuple[tuple[Any, ...], str]] = []
        names = [r.name for r in self.requests]
        _duplicates(errors, ("requests",), names)
        known = set(names)
        for i, constraint in enumerate(self.constraints):
            for j, request in enumerate(constraint.requests or ()):
                if request not in known:
                    errors.append((("constraints", i, "requests", j), unknown_request(request)))
        raise_errors("DeviceClaim", errors)
        return self


class ResourceClaimSpec(StrictModel):
    devices: DeviceClaim
