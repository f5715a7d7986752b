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


class DeviceCapacity(StrictModel):
    value: Annotated[Any, WithJsonSchema(QUANTITY_SCHEMA)]


class Device(StrictModel):
    name: DNSLabel
    attributes: dict[DeviceQualifiedName, DeviceAttribute] = Field(default_factory=dict)
    capacity: dict[DeviceQualifiedName, DeviceCapacity] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Device:
        errors: list[tuple[tuple[Any, ...], str]] = []
        for key, capacity in self.capacity.items():
            if (reason := quantity_error(capacity.value, key.rpartition("/")[2])) is not None:
                errors.append((("capacity", key, "value"), reason))
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


class ExactDeviceRequest(StrictModel):
    device_class_name: DNSSubdomain
    allocation_mode: Literal["ExactCount", "All"] = "ExactCount"
    count: StrictInt = Field(1, ge=1, le=2**31 - 1)
    selectors: list[DeviceSelector] = Field(default_factory=list, max_length=MAX_SELECTORS)

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
    match_attribute: DeviceQualifiedName


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
