"""The bodies of a job's life (lifecycle.md): finished pods (`podstatus`).

Shape only; what a body names is checked against the state by the domain (domain/decide/lifecycle.py).
"""
from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from service.schemas.common import StrictModel
from service.schemas.errors import raise_errors
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
