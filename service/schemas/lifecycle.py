"""The bodies of a job's life (lifecycle.md): finished pods (`podstatus`) and sizes (`scale`).

Shape only; what a body names is checked against the state by the domain (domain/lifecycle.py).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictInt, model_validator

from service.schemas.common import StrictModel
from service.schemas.errors import raise_errors
from service.schemas.names import DNSLabel
from service.schemas.workload import MAX_PODS_PER_WORKLOAD

MAX_REPORTED_PODS = 10_000


class FinishedPod(StrictModel):
    """A pod that finished: its group, its name, the phase it finished in."""
    pod_group: DNSLabel = Field(description="A pod group of the workload: embedded, inside a tree, "
                                            "or a PodGroup object of it.")
    name: DNSLabel = Field(description="One of the group's pods.")
    phase: Literal["Succeeded", "Failed"]


class PodStatusReport(StrictModel):
    """`POST .../workloads/{name}/podstatus`: pods reported finished, each at most once."""
    pods: list[FinishedPod] = Field(min_length=1, max_length=MAX_REPORTED_PODS)

    @model_validator(mode="after")
    def _once(self) -> PodStatusReport:
        seen: set[tuple[str, str]] = set()
        errors: list[tuple[tuple[Any, ...], str]] = []
        for i, pod in enumerate(self.pods):
            key = (pod.pod_group, pod.name)
            if key in seen:
                errors.append((("pods", i, "name"), f"pod {pod.pod_group}/{pod.name} is reported twice"))
            seen.add(key)
        raise_errors("PodStatusReport", errors)
        return self


def podstatus_cross_field_errors(body: dict[str, Any]) -> list[tuple[tuple[Any, ...], str]]:
    """A pod reported twice, named also when the body fails elsewhere."""
    pods = body.get("pods")
    seen: set[tuple[str, str]] = set()
    errors: list[tuple[tuple[Any, ...], str]] = []
    for i, pod in enumerate(pods if isinstance(pods, list) else ()):
        if isinstance(pod, dict) and isinstance(pod.get("podGroup"), str) and isinstance(pod.get("name"), str):
            key = (pod["podGroup"], pod["name"])
            if key in seen:
                errors.append((("pods", i, "name"), f"pod {key[0]}/{key[1]} is reported twice"))
            seen.add(key)
    return errors


# -- scale ------------------------------------------------------------------------------------
Count = StrictInt


class ScaleGang(StrictModel):
    min_count: StrictInt = Field(default=None, ge=1, le=MAX_PODS_PER_WORKLOAD)  # type: ignore[assignment]
    min_group_count: StrictInt = Field(default=None, ge=1, le=MAX_PODS_PER_WORKLOAD)  # type: ignore[assignment]

    @model_validator(mode="after")
    def _one(self) -> ScaleGang:
        if (self.min_count is None) == (self.min_group_count is None):
            raise_errors("ScaleGang", [((), "exactly one of minCount or minGroupCount must be set")])
        return self


class ScalePolicy(StrictModel):
    gang: ScaleGang


class ScalePodEntry(StrictModel):
    name: DNSLabel
    count: Count = Field(default=None, ge=1, le=MAX_PODS_PER_WORKLOAD)  # type: ignore[assignment]


class ScalePodGroup(StrictModel):
    name: DNSLabel
    scheduling_policy: ScalePolicy = None  # type: ignore[assignment]
    pods: list[ScalePodEntry] = Field(default=None, max_length=64)  # type: ignore[assignment]
    count: Count = Field(default=None, ge=1, le=MAX_PODS_PER_WORKLOAD)  # type: ignore[assignment]


class ScaleCompositePodGroup(StrictModel):
    name: DNSLabel
    scheduling_policy: ScalePolicy = None  # type: ignore[assignment]
    pod_groups: list[ScalePodGroup] = Field(default=None, max_length=64)  # type: ignore[assignment]
    composite_pod_groups: list[ScaleCompositePodGroup] = Field(default=None, max_length=64)  # type: ignore[assignment]
    count: Count = Field(default=None, ge=1, le=MAX_PODS_PER_WORKLOAD)  # type: ignore[assignment]


class Scale(StrictModel):
    """`POST .../workloads/{name}/scale`: a sparse copy of the spec's lists, entries found by name."""
    pod_groups: list[ScalePodGroup] = Field(default=None, max_length=64)  # type: ignore[assignment]
    composite_pod_groups: list[ScaleCompositePodGroup] = Field(default=None, max_length=64)  # type: ignore[assignment]


ScaleCompositePodGroup.model_rebuild()
