"""The command registry: the one list of command types.

For each type: the body it carries (a model name of service/schemas' BODY_MODELS, None when it
carries none), its addressing (a workload in a namespace, or a named cluster object), the
collection it lives in (the HTTP path segment), the domain's accept function, and the view its
answer shows. The Kafka envelope, the JSON Schemas, the HTTP inventory routes and the answers
all derive from it. A new command type is one entry here and one accept function in
service/domain/decide/commands.py.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from service.domain import ClusterState, Event
from service.domain.decide.commands import ACCEPT, AcceptFn
from service.domain.model import events as ev
from service.domain.placement import scoring
from service.domain.read import views

Addressing = Literal["workload", "object"]
# (state after the pass, the command's name and namespace, the pass's decisions) -> the answer's view
ViewFn = Callable[[ClusterState, str, "str | None", list[Event]], dict[str, Any]]


@dataclass(frozen=True)
class CommandSpec:
    type: str
    body: str | None  # the body model's name (service.schemas.validate.BODY_MODELS); None: no body
    addressing: Addressing
    collection: str  # "nodes", "deviceclasses", ... ("workloads" for workload commands)
    noun: str  # what its objects are called in messages: "node", "device class", ...
    accept: AcceptFn
    view: ViewFn

    @property
    def for_workload(self) -> bool:
        return self.addressing == "workload"


def released_pods(decisions: list[Event]) -> list[dict[str, Any]]:
    """Every pod a removal released, with the node it was on (a gang left below minCount goes
    back whole: its pods on other nodes are released too), from the pass's PodsLost decisions."""
    return [{"namespace": d.data["namespace"], "workload": d.data["workload"], "podGroup": d.data["podGroup"],
             "pod": p["pod"], "node": p.get("node")}
            for d in decisions if d.type == ev.PODS_LOST for p in d.data["pods"]]


def _workload_view(state: ClusterState, name: str, namespace: str | None, decisions: list[Event]) -> dict[str, Any]:
    return views.workload_view(state, state.workloads[(namespace or "", name)])


def _podgroup_view(state: ClusterState, name: str, namespace: str | None, decisions: list[Event]) -> dict[str, Any]:
    pg = state.podgroups[(namespace or "", name)]
    return views.podgroup_view(state, pg)


def _node_view(state: ClusterState, name: str, namespace: str | None, decisions: list[Event]) -> dict[str, Any]:
    return views.node_view(state, name) or {}


def _removed_node_view(state: ClusterState, name: str, namespace: str | None,
                       decisions: list[Event]) -> dict[str, Any]:
    return {"name": name, "released": released_pods(decisions)}


def _object_view(collection: str, *, removal: bool = False) -> ViewFn:
    """The object's view, or {"name", "removed": true} once it is gone; a removal's answer also
    names the pods it released, as `DELETE /nodes/{name}` does."""
    def view(state: ClusterState, name: str, namespace: str | None, decisions: list[Event]) -> dict[str, Any]:
        found = [o for o in views.object_views(state, collection) if o["name"] == name]
        body = found[0] if found else {"name": name, "removed": True}
        return {**body, "released": released_pods(decisions)} if removal else body
    return view


def _scheduler_view(state: ClusterState, name: str, namespace: str | None, decisions: list[Event]) -> dict[str, Any]:
    return scoring.scheduler_view(state)


def _spec(type_: str, body: str | None, addressing: Addressing, collection: str, noun: str,
          view: ViewFn) -> CommandSpec:
    return CommandSpec(type_, body, addressing, collection, noun, ACCEPT[type_], view)


COMMANDS: dict[str, CommandSpec] = {spec.type: spec for spec in (
    _spec("UpsertNode", "Node", "object", "nodes", "node", _node_view),
    _spec("RemoveNode", None, "object", "nodes", "node", _removed_node_view),
    _spec("UpsertDeviceClass", "DeviceClass", "object", "deviceclasses", "device class",
          _object_view("deviceclasses")),
    _spec("RemoveDeviceClass", None, "object", "deviceclasses", "device class",
          _object_view("deviceclasses", removal=True)),
    _spec("UpsertResourceSlice", "ResourceSlice", "object", "resourceslices", "resource slice",
          _object_view("resourceslices")),
    _spec("RemoveResourceSlice", None, "object", "resourceslices", "resource slice",
          _object_view("resourceslices", removal=True)),
    _spec("UpsertPriorityClass", "PriorityClass", "object", "priorityclasses", "priority class",
          _object_view("priorityclasses")),
    _spec("ConfigureScheduler", "SchedulerConfiguration", "object", "scheduler", "scheduler configuration",
          _scheduler_view),
    _spec("SubmitWorkload", "Workload", "workload", "workloads", "workload", _workload_view),
    _spec("DeleteWorkload", None, "workload", "workloads", "workload", _workload_view),
    _spec("FinishPods", "PodStatusReport", "workload", "workloads", "workload", _workload_view),
    _spec("ScaleWorkload", "Scale", "workload", "workloads", "workload", _workload_view),
    _spec("CreatePodGroup", "PodGroupObject", "workload", "podgroups", "PodGroup", _podgroup_view),
    _spec("DeletePodGroup", None, "workload", "podgroups", "PodGroup", _podgroup_view),
)}
assert COMMANDS.keys() == ACCEPT.keys(), "every accept function has its entry here, and only those"
COMMAND_TYPES: tuple[str, ...] = tuple(COMMANDS)
