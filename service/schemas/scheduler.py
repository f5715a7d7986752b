"""The scheduler configuration: `PUT /v1/clusters/{cluster}/scheduler` (sharing.md)."""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, StrictInt, WithJsonSchema, model_validator

from service.schemas.common import QUANTITY_SCHEMA, StrictModel, quantity_error
from service.schemas.devices import MAX_SELECTORS, CapacityRequirements, DeviceSelector
from service.schemas.errors import raise_errors
from service.schemas.names import DeviceQualifiedName, DNSSubdomain

Quantity = Annotated[Any, WithJsonSchema(QUANTITY_SCHEMA)]


class ShapeDevices(StrictModel):
    count: StrictInt = Field(1, ge=1, le=32)
    selectors: list[DeviceSelector] = Field(default_factory=list, max_length=MAX_SELECTORS)
    capacity: CapacityRequirements = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel


class TargetShape(StrictModel):
    """A typical pod: its weight, cpu and, for a pod using devices of the class, `devices`."""
    weight: StrictInt = Field(ge=1, le=1_000_000_000)
    cpu: Quantity = None
    devices: ShapeDevices = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel

    @model_validator(mode="after")
    def _cpu(self) -> TargetShape:
        if self.cpu is not None and (reason := quantity_error(self.cpu, "cpu")) is not None:
            raise_errors("TargetShape", [(("cpu",), reason)])
        return self


class FromHistory(StrictModel):
    pods: StrictInt = Field(10_000, ge=1, le=1_000_000)
    coverage: StrictInt = Field(95, ge=1, le=100)


class TargetWorkload(StrictModel):
    """The pods to keep room for: exactly one of `shapes` and `fromHistory`."""
    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["shapes"]}, {"required": ["fromHistory"]}]})
    shapes: list[TargetShape] = Field(None, min_length=1, max_length=1024)  # type: ignore[arg-type]  # may be absent, never null: see StrictModel
    from_history: FromHistory = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel

    @model_validator(mode="after")
    def _one(self) -> TargetWorkload:
        if (self.shapes is None) == (self.from_history is None):
            raise_errors("TargetWorkload", [((), "exactly one of shapes and fromHistory must be set")])
        return self


class FragmentationAware(StrictModel):
    device_class_name: DNSSubdomain
    capacity: DeviceQualifiedName
    tolerance: StrictInt = Field(80, ge=0, le=1_000_000_000)
    target_workload: TargetWorkload


class ScoringStrategy(StrictModel):
    type: Literal["MostAllocated", "LeastAllocated", "FragmentationAware"]
    fragmentation_aware: FragmentationAware = None  # type: ignore[assignment]  # may be absent, never null: see StrictModel

    @model_validator(mode="after")
    def _fa(self) -> ScoringStrategy:
        if self.type == "FragmentationAware" and self.fragmentation_aware is None:
            raise_errors("ScoringStrategy", [(("fragmentationAware",), "is required with FragmentationAware")])
        if self.type != "FragmentationAware" and self.fragmentation_aware is not None:
            raise_errors("ScoringStrategy", [(("fragmentationAware",), "is allowed with FragmentationAware only")])
        return self


class SchedulerConfiguration(StrictModel):
    """The cluster's scheduler configuration (sharing.md, *The scheduler configuration*)."""
    scoring_strategy: ScoringStrategy
