"""A Kubernetes pod template as a Gangplank pod entry: effective requests, placement fields, and a
refusal (never a silent drop) for every field Gangplank cannot honour."""
from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from gangplank_client import quantity
from gangplank_client.kube._read import Refusals

# pod-level resources (PodLevelResources) cover these; the rest still come from the containers
POD_LEVEL_RESOURCES = ("cpu", "memory")
TOLERATION_FIELDS = ("key", "operator", "value", "effect")


def _requests(resources: Mapping[str, Any] | None, path: str, out: Refusals) -> dict[str, Fraction]:
    """A container's requests as the API server defaults them: a limit without a request is the request."""
    if not isinstance(resources, Mapping):
        if resources is not None:
            out.add(f"{path}.resources", "must be an object")
        return {}
    merged = {**out.get_map(resources, "limits", f"{path}.resources"), **out.get_map(resources, "requests", f"{path}.resources")}
    amounts: dict[str, Fraction] = {}
    for name, value in merged.items():
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            out.add(f"{path}.resources.requests.{name}", f"Invalid value: must be a quantity, not {type(value).__name__}")
            continue
        try:
            amounts[name] = quantity.parse(value)
        except ValueError as exc:
            out.add(f"{path}.resources.requests.{name}", str(exc))
    return amounts


def _add(a: dict[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {k: a.get(k, Fraction(0)) + b.get(k, Fraction(0)) for k in {*a, *b}}


def _max(a: dict[str, Fraction], b: Mapping[str, Fraction]) -> dict[str, Fraction]:
    return {k: max(a.get(k, Fraction(0)), b.get(k, Fraction(0))) for k in {*a, *b}}


def effective_requests(spec: Mapping[str, Any], path: str, out: Refusals) -> dict[str, str]:
    """A pod's requests as Kubernetes computes them (component-helpers' PodRequests): the containers'
    sum plus every restartable (sidecar) init container, or the largest init container if larger
    (an init container runs alongside the sidecars started before it), plus `overhead`; pod-level
    `resources` replace the containers' cpu and memory."""
    total: dict[str, Fraction] = {}
    for i, c in enumerate(out.get_maps(spec, "containers", path)):
        total = _add(total, _requests(c.get("resources"), f"{path}.containers[{i}]", out))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for i, c in enumerate(out.get_maps(spec, "initContainers", path)):
        own = _requests(c.get("resources"), f"{path}.initContainers[{i}]", out)
        if c.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, own)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(own, sidecars))
    total = _max(_add(total, sidecars), init_peak)
    pod_level = _requests(spec.get("resources"), path, out)
    for name in POD_LEVEL_RESOURCES:
        if name in pod_level:
            total[name] = pod_level[name]
    total = _add(total, _requests({"requests": out.get_map(spec, "overhead", path)}, f"{path}.overhead", out))
    return {name: quantity.format_units(quantity.units(total[name], name), name) for name in sorted(total)}


STORAGE = "storage is not modelled; a volume bound to a zone is not enforced"


def _refuse_unplaceable(spec: Mapping[str, Any], path: str, out: Refusals) -> None:
    affinity = out.get_map(spec, "affinity", path)
    for key in ("podAffinity", "podAntiAffinity"):
        if affinity.get(key):
            out.unenforced(f"{path}.affinity.{key}", "inter-pod affinity cannot be honoured (Gangplank places by node only)")
    if spec.get("topologySpreadConstraints"):
        out.unenforced(f"{path}.topologySpreadConstraints", "topology spread cannot be honoured (use a group's topology)")
    if spec.get("nodeName"):
        out.add(f"{path}.nodeName", "a pod bound to a node by name bypasses the scheduler")
    if spec.get("schedulingGates"):
        out.add(f"{path}.schedulingGates", "scheduling gates hold the pod outside Gangplank's decision")
    for i, v in enumerate(out.get_maps(spec, "volumes", path)):
        for key in ("persistentVolumeClaim", "ephemeral"):
            if key in v:
                out.warn(f"{path}.volumes[{i}].{key}", STORAGE)
    for kind in ("initContainers", "containers"):
        for i, c in enumerate(out.get_maps(spec, kind, path)):
            for j, port in enumerate(out.get_maps(c, "ports", f"{path}.{kind}[{i}]")):
                if port.get("hostPort") or (spec.get("hostNetwork") and port.get("containerPort")):
                    out.add(f"{path}.{kind}[{i}].ports[{j}].hostPort", "host ports cannot be honoured")


def claim_entries(claims: Any, path: str, out: Refusals) -> list[dict[str, str]]:
    """Pod, PodGroup or Job claims: each must come from a template (Gangplank has no standalone claims)."""
    entries = []
    for i, c in enumerate(claims if isinstance(claims, list) else ()):
        if not isinstance(c, Mapping) or not c.get("name"):
            out.add(f"{path}[{i}].name", "Required value")
        elif c.get("resourceClaimTemplateName"):
            entries.append({"name": c["name"], "resourceClaimTemplateName": c["resourceClaimTemplateName"]})
        else:
            out.add(f"{path}[{i}].resourceClaimName", "an existing ResourceClaim cannot be honoured: "
                    "use resourceClaimTemplateName")
    return entries


def pod_shape(spec: Mapping[str, Any], path: str, out: Refusals) -> dict[str, Any]:
    """A pod entry without name and count."""
    _refuse_unplaceable(spec, path, out)
    entry: dict[str, Any] = {"requests": effective_requests(spec, path, out)}
    if selector := out.get_map(spec, "nodeSelector", path):
        entry["nodeSelector"] = {str(k): str(v) for k, v in selector.items()}
    tolerations = []
    for i, t in enumerate(out.get_maps(spec, "tolerations", path)):
        if t.get("tolerationSeconds") is not None:
            out.add(f"{path}.tolerations[{i}].tolerationSeconds", "eviction after a delay cannot be honoured")
        tolerations.append({k: t[k] for k in TOLERATION_FIELDS if t.get(k) not in (None, "")})
    if tolerations:
        entry["tolerations"] = tolerations
    node_affinity = out.get_map(out.get_map(spec, "affinity", path), "nodeAffinity", f"{path}.affinity")
    if node_affinity:
        entry["affinity"] = {"nodeAffinity": node_affinity}
    claims = claim_entries(spec.get("resourceClaims"), f"{path}.resourceClaims", out)
    if claims:
        entry["resourceClaims"] = claims
    return entry


class Priority:
    """The workload's priority, from every template that gives one: they must agree."""

    def __init__(self, out: Refusals) -> None:
        self.out = out
        self.fields: dict[str, tuple[Any, str]] = {}

    def add(self, source: Mapping[str, Any], path: str) -> None:
        for key in ("priorityClassName", "priority", "preemptionPolicy"):
            value = source.get(key)
            if value is None:
                continue
            if key in self.fields and self.fields[key][0] != value:
                self.out.add(f"{path}.{key}", f"{value!r} differs from {self.fields[key][0]!r} at "
                             f"{self.fields[key][1]}: a workload has one priority")
            self.fields.setdefault(key, (value, f"{path}.{key}"))

    def apply(self, body: dict[str, Any]) -> None:
        if "priorityClassName" in self.fields:  # the class is resolved by the server; a set value follows it
            body["priorityClassName"] = self.fields["priorityClassName"][0]
        elif "priority" in self.fields:
            body["priority"] = self.fields["priority"][0]
        if "preemptionPolicy" in self.fields:
            body["preemptionPolicy"] = self.fields["preemptionPolicy"][0]
