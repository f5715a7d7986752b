"""Many files as one input (client.md, *Everyday use*): every `-f` and every file under a folder read
together before anything is converted, so a PodGroup, a ResourceClaimTemplate or a PriorityClass in one
file serves a workload in another; then a plan of objects, each applied on its own (`apply_cli`), each
refusal naming its file and object.

The cluster's own objects (`v1` Node, `scheduling.k8s.io/v1` PriorityClass, `resource.k8s.io/v1`
DeviceClass and ResourceSlice) become the bodies of the inventory routes here; workloads go through
`gangplank_client.kube.convert` (with `keep_going`, so one refused object does not stop the others).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

# (apiVersion group, served versions) of each inventory kind, as the API server serves them
INVENTORY: dict[str, tuple[str, tuple[str, ...]]] = {
    "Node": ("", ("v1",)),
    "PriorityClass": ("scheduling.k8s.io", ("v1",)),
    "DeviceClass": ("resource.k8s.io", ("v1", "v1beta2", "v1beta1")),
    "ResourceSlice": ("resource.k8s.io", ("v1", "v1beta2", "v1beta1")),
}


@dataclass
class Item:
    """One object to apply: an inventory PUT (`kind`, `name`, `body`), a workload (`namespace`, `body`),
    or a refusal (`errors`); `origin` names the file it came from."""
    origin: str
    label: str  # "Node n1", "JobSet demo", "document 2"
    kind: str = ""  # Node | PriorityClass | DeviceClass | ResourceSlice | Workload | Refused
    name: str = ""
    namespace: str = ""
    body: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


@dataclass
class Plan:
    items: list[Item] = field(default_factory=list)
    stages: list[Any] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # skipped objects and warnings (stderr)
    conversion: Any = None  # the manifests' Conversion: a server's 422 named at the manifest's paths


def _label(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    return f"{obj.get('kind')} {(meta or {}).get('name') or '?'}"


def read(files: list[str], stdin: Any, namespace: str | None, ignore_unenforced: bool, *,
         inventory: bool) -> Plan:
    """The plan of every input: files that cannot be read or parsed are refusals of their own."""
    from gangplank_client.kube import ManifestError, load, read_sources

    plan = Plan()
    docs: list[tuple[str, dict[str, Any]]] = []
    try:
        sources = read_sources(files, stdin)
    except ManifestError as exc:
        raise ValueError(str(exc)) from exc
    for origin, text in sources:
        try:
            objs = load(text)
        except ManifestError as exc:
            plan.items.append(Item(origin, "", "Refused", errors=[" ".join(str(exc).split())]))
            continue
        docs.extend((origin, o) for o in objs)
    manifests: list[dict[str, Any]] = []
    origins: dict[str, str] = {}
    for origin, obj in docs:
        if "kind" not in obj and "apiVersion" not in obj:  # a Gangplank body
            ns = namespace or obj.pop("namespace", None) or "default"
            plan.items.append(Item(origin, f"workload {ns}/{obj.get('name')}", "Workload", str(obj.get("name")), ns, obj))
        elif obj.get("kind") in INVENTORY and _served(obj):
            if inventory:
                plan.items.append(inventory_item(origin, obj))
            else:
                plan.notes.append(f"skipped: {obj.get('apiVersion')} {_label(obj)} (a cluster object: "
                                  "gangplank apply -f sets it)")
        else:
            manifests.append(obj)
            origins.setdefault(_label(obj), origin)
    if manifests:
        _convert(plan, manifests, origins, namespace, ignore_unenforced)
    order = {origin: i for i, (origin, _) in enumerate(sources)}
    plan.items.sort(key=lambda item: order.get(item.origin, len(order)))  # in file order, as kubectl goes
    return plan


def _served(obj: dict[str, Any]) -> bool:
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    served = INVENTORY[str(obj.get("kind"))]
    return group == served[0] and version in served[1]


def _convert(plan: Plan, manifests: list[dict[str, Any]], origins: dict[str, str], namespace: str | None,
             ignore_unenforced: bool) -> None:
    from gangplank_client.kube import convert

    result = convert(manifests, namespace, ignore_unenforced=ignore_unenforced, keep_going=True)
    plan.conversion = result
    many = len({*origins.values()}) > 1
    for ns, body in result.workloads:
        origin = next((o for label, o in origins.items() if label.split(" ", 1)[-1] == body.get("name")),
                      "" if many else next(iter(origins.values()), ""))
        plan.items.append(Item(origin, f"workload {ns}/{body.get('name')}", "Workload", str(body.get("name")), ns, body))
    for label, lines in result.refused:
        origin = origins.get(label) or next((o for k, o in origins.items() if label.endswith(" " + k)), "")
        plan.items.append(Item(origin, label, "Refused", errors=lines))
    plan.stages += result.stages
    plan.notes += result.skipped + result.warnings


# -- the cluster's own objects --------------------------------------------------------------------------
def inventory_item(origin: str, obj: dict[str, Any]) -> Item:
    kind = str(obj.get("kind"))
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = str((meta or {}).get("name") or "")
    item = Item(origin, f"{kind} {name or '?'}", kind, name)
    if not name:
        item.kind, item.errors = "Refused", [f"{item.label}: metadata.name: Required value"]
        return item
    errors: list[str] = []
    item.body = _BODIES[kind](obj, meta or {}, lambda path, msg: errors.append(f"{item.label}: {path}: {msg}"))
    if errors:
        item.kind, item.errors = "Refused", errors
    return item


Problem = Callable[[str, str], None]


def _map(value: Any, path: str, problem: Problem) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problem(path, f"must be an object, not {type(value).__name__}")
        return {}
    return value


def _node(obj: dict[str, Any], meta: dict[str, Any], problem: Problem) -> dict[str, Any]:
    """A v1 Node: its labels, status.allocatable, spec.taints (key, value, effect) and spec.unschedulable."""
    spec, status = _map(obj.get("spec"), "spec", problem), _map(obj.get("status"), "status", problem)
    body: dict[str, Any] = {"labels": {str(k): str(v) for k, v in _map(meta.get("labels"), "metadata.labels",
                                                                      problem).items()},
                            "allocatable": {str(k): str(v) for k, v in _map(status.get("allocatable"),
                                                                            "status.allocatable", problem).items()}}
    taints = spec.get("taints") or []
    if not isinstance(taints, list):
        problem("spec.taints", "must be a list")
        taints = []
    body["taints"] = [{k: t[k] for k in ("key", "value", "effect") if t.get(k) is not None}
                      for t in taints if isinstance(t, dict)]
    if spec.get("unschedulable") is not None:
        body["unschedulable"] = spec["unschedulable"]
    return body


def _priority_class(obj: dict[str, Any], meta: dict[str, Any], problem: Problem) -> dict[str, Any]:
    if "value" not in obj:
        problem("value", "Required value")
    body = {"value": obj.get("value")}
    if obj.get("preemptionPolicy") is not None:
        body["preemptionPolicy"] = obj["preemptionPolicy"]
    return body


def _device_class(obj: dict[str, Any], meta: dict[str, Any], problem: Problem) -> dict[str, Any]:
    spec = _map(obj.get("spec"), "spec", problem)
    return {"selectors": spec.get("selectors") or []}


_SLICE_DEVICE_FIELDS = ("name", "attributes", "capacity", "allowMultipleAllocations")


def _resource_slice(obj: dict[str, Any], meta: dict[str, Any], problem: Problem) -> dict[str, Any]:
    """A ResourceSlice: driver, pool, nodeName / allNodes / a nodeSelector of one term of `In` single
    values (as Gangplank's label map), and each device's name, attributes and capacity."""
    spec = _map(obj.get("spec"), "spec", problem)
    body: dict[str, Any] = {k: spec[k] for k in ("driver", "pool", "nodeName", "allNodes") if spec.get(k) is not None}
    if spec.get("nodeSelector") is not None:
        body["nodeSelector"] = _node_selector(spec["nodeSelector"], problem)
    devices = spec.get("devices") or []
    body["devices"] = [{k: d[k] for k in _SLICE_DEVICE_FIELDS if d.get(k) is not None}
                       for d in devices if isinstance(d, dict)]
    return body


def _node_selector(value: Any, problem: Problem) -> dict[str, str]:
    terms = value.get("nodeSelectorTerms") if isinstance(value, dict) else None
    if not isinstance(terms, list) or len(terms) != 1:
        problem("spec.nodeSelector", "Gangplank takes one nodeSelectorTerm of matchExpressions `In` one value")
        return {}
    out: dict[str, str] = {}
    for i, e in enumerate((terms[0] or {}).get("matchExpressions") or []):
        values = e.get("values") or []
        if e.get("operator") != "In" or len(values) != 1:
            problem(f"spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[{i}]",
                    "Gangplank takes `In` with one value (a label map)")
            continue
        out[str(e.get("key"))] = str(values[0])
    return out


_BODIES: dict[str, Callable[[dict[str, Any], dict[str, Any], Problem], dict[str, Any]]] = {
    "Node": _node, "PriorityClass": _priority_class, "DeviceClass": _device_class, "ResourceSlice": _resource_slice}
