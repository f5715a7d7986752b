"""The bodies of a job's life (lifecycle.md): finished pods (`podstatus`) and sizes (`scale`).

Shape only; what a body names is checked against the state by the domain (domain/decide/lifecycle.py).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, StrictInt, model_validator

from service.domain.model.composite import MAX_COUNT, MAX_EXPANDED_CPGS, MAX_EXPANDED_GROUPS
from service.schemas.common import StrictModel
from service.schemas.errors import raise_errors
from service.schemas.groups import MAX_PODS_PER_WORKLOAD
from service.schemas.names import DNSLabel

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


# -- scale (lifecycle.md *Growing and shrinking*) -----------------------------------------------
MAX_SCALE_ENTRIES = 64


class ScaleGang(StrictModel):
    min_count: StrictInt = Field(ge=1, le=MAX_PODS_PER_WORKLOAD)


class ScalePolicy(StrictModel):
    """`{"gang": {"minCount": N}}`: only a gang pod group takes one (its kind never changes)."""
    gang: ScaleGang


class ScaleCpgGang(StrictModel):
    min_group_count: StrictInt = Field(ge=1, le=MAX_EXPANDED_GROUPS + MAX_EXPANDED_CPGS)


class ScaleCpgPolicy(StrictModel):
    """`{"gang": {"minGroupCount": N}}`: only a gang composite pod group takes one."""
    gang: ScaleCpgGang


class ScalePodEntry(StrictModel):
    """A pod entry of the spec, found by `name`; `count` its new size."""
    name: DNSLabel
    count: StrictInt = Field(None, ge=1, le=MAX_PODS_PER_WORKLOAD)  # type: ignore[assignment]  # may be absent, never null


class ScalePodGroup(StrictModel):
    """A pod group of the workload (one of its PodGroup objects included), found by `name`."""
    name: DNSLabel
    scheduling_policy: ScalePolicy = None  # type: ignore[assignment]  # may be absent, never null
    pods: list[ScalePodEntry] = Field(None, min_length=1, max_length=MAX_SCALE_ENTRIES)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _distinct(self) -> ScalePodGroup:
        raise_errors("ScalePodGroup", _twice(("pods",), self.pods))
        return self


class ScaleTreePodGroup(ScalePodGroup):
    """A pod group entry inside a composite pod group: `count` only if it was submitted with one."""
    count: StrictInt = Field(None, ge=1, le=MAX_COUNT)  # type: ignore[assignment]  # may be absent, never null


class ScaleCompositePodGroup(StrictModel):
    """A composite pod group entry of the spec, found by `name` among its siblings."""
    name: DNSLabel
    count: StrictInt = Field(None, ge=1, le=MAX_COUNT)  # type: ignore[assignment]  # may be absent, never null
    scheduling_policy: ScaleCpgPolicy = None  # type: ignore[assignment]  # may be absent, never null
    pod_groups: list[ScaleTreePodGroup] = Field(None, min_length=1, max_length=MAX_SCALE_ENTRIES)  # type: ignore[arg-type]
    composite_pod_groups: list[ScaleCompositePodGroup] = Field(
        None, min_length=1, max_length=MAX_SCALE_ENTRIES)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _distinct(self) -> ScaleCompositePodGroup:
        raise_errors("ScaleCompositePodGroup", _twice(("podGroups",), self.pod_groups)
                     + _twice(("compositePodGroups",), self.composite_pod_groups))
        return self


ScaleCompositePodGroup.model_rebuild()


class Scale(StrictModel):
    """`POST .../workloads/{name}/scale`: a sparse copy of the spec's lists, each entry found by `name`
    (as written in the spec, before stamping): pod entries' `count`, gangs' `minCount`, and inside
    trees stamped entries' `count` and `minGroupCount`."""
    model_config = {**StrictModel.model_config, "json_schema_extra": {
        "anyOf": [{"required": ["podGroups"]}, {"required": ["compositePodGroups"]}]}}
    pod_groups: list[ScalePodGroup] = Field(None, min_length=1, max_length=MAX_SCALE_ENTRIES)  # type: ignore[arg-type]
    composite_pod_groups: list[ScaleCompositePodGroup] = Field(
        None, min_length=1, max_length=MAX_SCALE_ENTRIES)  # type: ignore[arg-type]

    @model_validator(mode="after")
    def _check(self) -> Scale:
        errors: list[tuple[tuple[Any, ...], str]] = []
        if self.pod_groups is None and self.composite_pod_groups is None:
            errors.append((("podGroups",), "Field required (or compositePodGroups: the roots of a tree)"))
        errors += _twice(("podGroups",), self.pod_groups) + _twice(("compositePodGroups",), self.composite_pod_groups)
        raise_errors("Scale", errors)
        return self


def _twice(loc: tuple[Any, ...], entries: list[Any] | None) -> list[tuple[tuple[Any, ...], str]]:
    seen: set[str] = set()
    errors: list[tuple[tuple[Any, ...], str]] = []
    for i, entry in enumerate(entries or ()):
        if entry.name in seen:
            errors.append(((*loc, i, "name"), f"{entry.name!r} is named twice in this list"))
        seen.add(entry.name)
    return errors
