"""evolve(state, event) -> state: fold one recorded event into the cluster state.

Every change the decider makes goes through here, so folding a stream's events
from an empty state gives exactly the live state (a property test checks it).

`FOLDS` is the one table of how each event type is folded: `apply` (here), and the fast
replay's handlers (replay.py), by name, for the event types it folds its own way. The fast
path stays a second path for speed only: it folds a workload submitted and deleted within
the replayed events without placing its pods (they would come out net zero), which `apply`
cannot know; tests/domain/test_replay.py checks both give the same state. The rules both
paths apply (conditions, explanations) are the functions below the handlers.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from service.domain import dra
from service.domain.fold import resize
from service.domain.model import events as ev
from service.domain.model.specs import NodeSpec, PriorityClass, workload_from_submission
from service.domain.model.workload import PHASE_CODES, Composite, cpg_satisfied, subtree_cpgs, subtree_groups
from service.domain.placement import scoring
from service.domain.state.cluster import ClusterState, Group, Workload


class UnknownEventType(ValueError):
    """An event type this code has no fold for (recorded by a newer release, or not a Gangplank
    stream): the fold stops there, naming the type and the position."""

    def __init__(self, event_type: str, position: int) -> None:
        super().__init__(f"event {position} has the type {event_type!r}, which this release cannot fold "
                         f"(it knows {len(FOLDS) + len(NO_OPS)} types: recorded by a newer release?)")
        self.type, self.position = event_type, position


def check_foldable(event: ev.Event) -> None:
    """UnknownEventType unless the event's type has a fold entry or is a no-op (for a caller that
    looks at an event before folding it: the verification, the what-if)."""
    if event.type not in FOLDS and event.type not in NO_OPS:
        raise UnknownEventType(event.type, event.position)


def evolve(state: ClusterState, event: ev.Event) -> ClusterState:
    fold = FOLDS.get(event.type)
    if fold is not None:
        fold.apply(state, event)
    elif event.type not in NO_OPS:
        raise UnknownEventType(event.type, event.position)
    state.position = event.position
    return state


def _node_upserted(state: ClusterState, e: ev.Event) -> None:
    nodes = state.nodes
    spec = NodeSpec.from_body(e.data["name"], e.data)
    before = nodes.index.get(spec.name)
    old = nodes.specs[before] if before is not None and nodes.alive[before] else None
    row = nodes.upsert(spec)
    state._ensure_node_rows()
    if old is None or _may_change_placement(state, old, spec):
        state.index.dirty.add(row)  # it may have gained room, labels or schedulability
        state.index.node_changes += 1
        state.index.gained_room()


def _may_change_placement(state: ClusterState, old: NodeSpec, new: NodeSpec) -> bool:
    """False when only labels changed and no queued entry reads any of them (issue 21: such an
    input frees nothing, and no pass re-tries anything for it)."""
    if (old.allocatable, old.unschedulable, old.taints) != (new.allocatable, new.unschedulable, new.taints):
        return True
    changed = set(dict(old.labels).items() ^ dict(new.labels).items())
    return state.index.label_read({k for k, _ in changed})


def _node_removed(state: ClusterState, e: ev.Event) -> None:
    state.nodes.remove(e.data["name"])


def _priority_class(state: ClusterState, e: ev.Event) -> None:
    state.priority_classes[e.data["name"]] = PriorityClass.from_body(e.data["name"], e.data)


def _device_class_upserted(state: ClusterState, e: ev.Event) -> None:
    state.device_classes[e.data["name"]] = e.data
    dra.upsert_class(state.dra, e.data["name"], e.data)
    state.index.classes.clear()  # what devices match changed: every queue bound is void


def _device_class_removed(state: ClusterState, e: ev.Event) -> None:
    state.device_classes.pop(e.data["name"], None)
    dra.remove_class(state.dra, e.data["name"])
    state.index.classes.clear()


# a slice change's lost claims are keyed by the event's position: the state's, plus one
def _slice_upserted(state: ClusterState, e: ev.Event) -> None:
    state.resource_slices[e.data["name"]] = e.data
    dra.upsert_slice(state.dra, e.data["name"], e.data, state.position + 1)
    state.index.classes.clear()  # devices came, went or changed: every queue bound is void


def _slice_removed(state: ClusterState, e: ev.Event) -> None:
    state.resource_slices.pop(e.data["name"], None)
    dra.remove_slice(state.dra, e.data["name"], state.position + 1)
    state.index.classes.clear()


def _scheduler_configured(state: ClusterState, e: ev.Event) -> None:
    scoring.configure(state, e.data["scoringStrategy"], e.position)


def _submitted(state: ClusterState, e: ev.Event) -> None:
    spec = workload_from_submission(e.data)
    wl = Workload(spec=spec, body=e.data["spec"], position=e.position)
    for i, gs in enumerate(spec.groups):
        g = Group(workload=wl, index=i, spec=gs, node_of=[-1] * len(gs.pod_names),
                  placed_at=[None] * len(gs.pod_names))
        g.class_key = _class_key(wl, g) if gs.parent is None else None  # a tree's groups queue as its root
        wl.groups.append(g)
    wl.composites = [Composite(workload=wl, spec=cs) for cs in spec.cpgs]
    state.add_workload(wl.key, wl)
    for shape in range(len(spec.shapes)):
        state.shape_vector(wl, shape)  # adds resource columns now, not mid-decision
    for g in wl.groups:
        state.sync_queue(g)
    for ci in spec.roots:
        state.sync_root(wl.composites[ci])
    wl.events.append(e.position)
    if "podGroupTemplates" in wl.body:  # live without pods of its own: light snapshots keep it (snapshots.py)
        state.keep_live(wl)


def _class_key(wl: Workload, g: Group) -> tuple[Any, ...] | None:
    """Groups with equal keys are placed identically from an empty start (skip index).

    Claims a pod holds alone are keyed by their templates' content (two workloads may
    name equal templates differently, or differ under one name); shared claims carry
    state of their own, so their groups get no class."""
    spec = wl.spec
    if spec.claims or g.spec.claims:
        return None
    templates = dict(spec.templates)
    runs: list[tuple[Any, int]] = []
    for s in g.spec.pod_shapes:
        shape = spec.shapes[s]
        if runs and runs[-1][0] == shape:
            runs[-1] = (shape, runs[-1][1] + 1)
        else:
            runs.append((shape, 1))
    claims = tuple(json.dumps(templates.get(ref.template), sort_keys=True)
                   for shape, _ in runs for ref in shape.claims)
    return (tuple(runs), g.spec.gang, g.spec.min_count, g.spec.topology_key, spec.priority,
            spec.preemption_policy, claims)


def _deleted(state: ClusterState, e: ev.Event) -> None:
    wl = state.workloads[(e.data["namespace"], e.data["name"])]
    for g in wl.groups:
        if g.placed:
            state.release_pods(g, [pod for pod, node in enumerate(g.node_of) if node >= 0])
    dra.workload_released(state.dra, wl)
    for pg in {id(g.workload): g.workload for g in wl.groups if g.workload is not wl}.values():
        _gone(state, pg, e.position)  # its live PodGroup objects go with it (lifecycle.md)
    _gone(state, wl, e.position)
    for g in wl.groups:
        state.sync_queue(g)
    for ci in wl.spec.roots:
        state.sync_root(wl.composites[ci])
    wl.events.append(e.position)
    if "podGroupTemplates" not in wl.body:  # a workload of templates keeps its PodGroups' groups
        wl.compact()


def _gone(state: ClusterState, wl: Workload, position: int) -> None:
    """A workload (or PodGroup object) deleted: its claims, its cached request vectors."""
    dra.workload_released(state.dra, wl)
    wl.deleted_at = position
    if wl.position in state.finishing:
        state.finishing.discard(wl.position)
    for shape in range(len(wl.spec.shapes)):
        state._shape_vectors.pop((wl.position, shape), None)


def _podgroup_created(state: ClusterState, e: ev.Event) -> None:
    """PodGroupCreated (lifecycle.md *Creating a PodGroup*): a workload of its own, with one group,
    at its priority and creation position, sharing its owner's name, claims and history."""
    owner = state.workloads[(e.data["namespace"], e.data["workload"])]
    body = {"podGroups": [e.data["spec"]], "resourceClaims": owner.body.get("resourceClaims") or [],
            "resourceClaimTemplates": owner.body.get("resourceClaimTemplates") or []}
    spec = workload_from_submission({"namespace": owner.spec.namespace, "name": owner.spec.name,
                                     "priority": e.data["priority"], "preemptionPolicy": e.data["preemptionPolicy"],
                                     "spec": body})
    pg = Workload(spec=spec, body=body, position=e.position, events=owner.events)
    pg.owner, pg.template = owner, e.data["template"]
    gs = spec.groups[0]
    g = Group(workload=pg, index=0, spec=gs, node_of=[-1] * len(gs.pod_names), placed_at=[None] * len(gs.pod_names))
    g.class_key = _class_key(pg, g)
    pg.groups.append(g)
    owner.groups.append(g)
    state.add_podgroup(pg, e.data["name"])
    for shape in range(len(spec.shapes)):
        state.shape_vector(pg, shape)
    state.sync_queue(g)
    owner.events.append(e.position)


def _podgroup_deleted(state: ClusterState, e: ev.Event) -> None:
    """PodGroupDeleted (lifecycle.md *Deleting a PodGroup*): its pods and claims released, and the
    workload's claims when no other pod group of the workload has a pod Running."""
    pg = state.podgroups[(e.data["namespace"], e.data["name"])]
    g = pg.groups[0]
    running = [pod for pod, node in enumerate(g.node_of) if node >= 0]
    if running:
        claims = dra.claims_released(state.dra, state.nodes, g, running)
        state.release_pods(g, running)
        dra.claims_dropped(state.dra, g, claims)
    _gone(state, pg, e.position)
    assert pg.owner is not None
    pg.owner.groups.remove(g)
    state.sync_queue(g)
    pg.owner.events.append(e.position)


def _rejected(state: ClusterState, e: ev.Event) -> None:
    wl = state.workloads.get((e.data.get("namespace") or "", e.data.get("name") or ""))
    if wl is not None:
        wl.events.append(e.position)


def _group_of(state: ClusterState, data: dict[str, Any]) -> Group:
    return state.group(data["namespace"], data["workload"], data["podGroup"])


def _scheduled(state: ClusterState, e: ev.Event) -> None:
    g = _group_of(state, e.data)
    _place_group(state, g, e.data, e.position, e.data.get("explanation"))
    g.workload.events.append(e.position)
    if g.spec.parent is not None:
        _composites_changed(g.workload, e.position)


def _place_group(state: ClusterState, g: Group, data: dict[str, Any], position: int,
                 explanation: dict[str, Any] | None) -> None:
    was_scheduled = g.scheduled
    index = state.nodes.index
    state.place_pods(g, [(g.pod_index(p["pod"]), index[p["node"]]) for p in data["pods"]], position)
    if "domain" in data and data["domain"] is not None:
        g.domain = data["domain"]["value"]
    dra.claims_allocated(state.dra, g, data.get("claims") or [])
    placed_rule(g, was_scheduled, g.scheduled, g.spec.min_count, explanation, position)
    satisfied_rule(g, g.scheduled, g.succeeded, g.spec.min_count, position)
    state.sync_queue(g)


def _child_explanations(explanation: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Name -> explanation of every child a tree explanation names, at any depth."""
    out: dict[str, dict[str, Any]] = {}
    stack = [explanation] if explanation is not None else []
    while stack:
        x = stack.pop()
        for child in x.get("children") or ():
            if child.get("explanation") is not None:
                out[child["name"]] = child["explanation"]
                if child["kind"] == "CompositePodGroup":
                    stack.append(child["explanation"])
    return out


def _composites_changed(wl: Workload, position: int) -> None:
    """After a tree's placements changed: conditions of CPGs newly satisfied; pins forgotten for
    CPGs released, with no pod of their subtree placed (composite.md): a report may leave a CPG
    unsatisfied with pods running, and it keeps its pods and its pin (lifecycle.md *Trees*);
    roots released need an explanation."""
    for c in wl.composites:
        if cpg_satisfied(wl, c.spec.index):
            c.explanation = None
            if not c.ever_scheduled:
                c.ever_scheduled = True
                c.conditions["CompositePodGroupInitiallyScheduled"] = {
                    "type": "CompositePodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
                    "message": f"minGroupCount {c.spec.min_group_count} of {c.spec.children} children satisfied",
                    "position": position}
        elif not any(wl.groups[gi].placed for gi in subtree_groups(wl, c.spec.index)):
            c.domain = None
            if c.spec.parent is None:
                c.needs_explanation = True


def _composite_scheduled(state: ClusterState, e: ev.Event) -> None:
    wl = state.workloads[(e.data["namespace"], e.data["workload"])]
    by_name = {g.spec.name: g for g in wl.groups}
    explained = _child_explanations(e.data.get("explanation"))
    for entry in e.data["groups"]:
        g = by_name[entry["podGroup"]]
        _place_group(state, g, entry, e.position, explained.get(entry["podGroup"]))
    cpgs = {c.spec.name: c for c in wl.composites}
    for entry in e.data["composites"]:
        c = cpgs[entry["compositePodGroup"]]
        if entry.get("domain") is not None and entry["satisfied"]:
            c.domain = entry["domain"]["value"]
        if not entry["satisfied"]:
            c.explanation = explained.get(c.spec.name)
    root = cpgs[e.data["compositePodGroup"]]
    while root.spec.parent is not None:
        root = wl.composites[root.spec.parent]
    wl.events.append(e.position)
    _composites_changed(wl, e.position)
    root.needs_explanation = False


def _composite_unschedulable(state: ClusterState, e: ev.Event) -> None:
    wl = state.workloads[(e.data["namespace"], e.data["workload"])]
    root = next(c for c in wl.composites if c.spec.name == e.data["compositePodGroup"])
    root.explanation = e.data["explanation"]
    root.needs_explanation = False
    explained = _child_explanations(e.data["explanation"])
    for c in wl.composites:
        if c.spec.root == root.spec.root and c is not root:
            c.explanation = explained.get(c.spec.name)
    for g in wl.groups:
        if g.spec.parent is not None and wl.spec.cpgs[g.spec.parent].root == root.spec.root:
            g.explanation = explained.get(g.spec.name, g.explanation)
            g.needs_explanation = False
    state.sync_root(root)
    wl.events.append(e.position)


def _unschedulable(state: ClusterState, e: ev.Event) -> None:
    g = _group_of(state, e.data)
    g.explanation = e.data["explanation"]
    g.needs_explanation = False
    state.sync_queue(g)
    g.workload.events.append(e.position)


def _release(state: ClusterState, g: Group, pods: list[dict[str, Any]],
             claims: list[dict[str, Any]] | None, position: int) -> None:
    indices = [g.pod_index(p["pod"]) for p in pods]
    state.release_pods(g, indices)
    dra.claims_dropped(state.dra, g, claims)
    g.needs_explanation = True
    satisfied_rule(g, g.scheduled, g.succeeded, g.spec.min_count, position)
    state.sync_queue(g)


def _pods_finished(state: ClusterState, e: ev.Event) -> None:
    """PodsFinished (lifecycle.md *Reporting finished pods*): each pod leaves its node, with its own
    claims, its group's once no pod of the group runs, the workload's once none of it runs."""
    wl = state.workloads[(e.data["namespace"], e.data["workload"])]
    by_group: dict[str, list[dict[str, Any]]] = {}
    for p in e.data["pods"]:
        by_group.setdefault(p["podGroup"], []).append(p)
    by_name = {g.spec.name: g for g in wl.groups}
    tree = False
    for name, pods in by_group.items():
        g = by_name[name]
        was_scheduled = g.scheduled
        indices = [g.pod_index(p["pod"]) for p in pods]
        claims = dra.claims_released(state.dra, state.nodes, g, indices)
        for phase, code in PHASE_CODES.items():
            chosen = [i for i, p in zip(indices, pods) if p["phase"] == phase]
            if chosen:
                state.finish_pods(g, chosen, code)
        dra.claims_dropped(state.dra, g, claims)
        if was_scheduled and not g.scheduled:
            g.needs_explanation = True  # unsatisfied now: its next failed try is explained
        satisfied_rule(g, g.scheduled, g.succeeded, g.spec.min_count, e.position)
        state.sync_queue(g)
        tree = tree or g.spec.parent is not None
    if tree:
        _composites_changed(wl, e.position)
    wl.events.append(e.position)


def _scaled(state: ClusterState, e: ev.Event) -> None:
    """WorkloadScaled (lifecycle.md *Growing and shrinking*): the Running pods it removes leave their
    nodes (their own claims, and shared ones as a report frees them), then the workload takes
    the new spec; a group that gained pods, or that a raised minCount leaves unsatisfied, explains
    its next failed try."""
    wl = state.workloads[(e.data["namespace"], e.data["workload"])]
    by_name = {g.spec.name: g for g in wl.groups}
    for record in e.data["podGroups"]:
        running = [p["pod"] for p in record["removedPods"] if p["node"] is not None]
        if running:
            g = by_name[record["podGroup"]]
            indices = [g.pod_index(p) for p in running]
            claims = dra.claims_released(state.dra, state.nodes, g, indices)
            state.release_pods(g, indices)
            dra.claims_dropped(state.dra, g, claims)
    was_scheduled = {g.spec.name: g.scheduled for g in wl.groups}
    for target, patch, _ in resize.targets(wl, e.data["patch"]):
        resize.rebind(state, target, resize.merge(target.body, patch).body, _class_key)
    changed = {r["podGroup"]: r for r in e.data["podGroups"] if r["change"] != "Removed"}
    for g in wl.groups:
        record = changed.get(g.spec.name)
        if record is None:
            continue
        if record["addedPods"] or (was_scheduled.get(g.spec.name) and not g.scheduled):
            g.needs_explanation = True
        satisfied_rule(g, g.scheduled, g.succeeded, g.spec.min_count, e.position)
    if wl.composites:
        _composites_changed(wl, e.position)
        for root in resize.touched(wl, e.data):
            root.needs_explanation = True
        for ci in wl.spec.roots:
            state.sync_root(wl.composites[ci])
    wl.events.append(e.position)


def _preempted(state: ClusterState, e: ev.Event) -> None:
    g = _group_of(state, e.data)
    _release(state, g, e.data["pods"], e.data.get("claimsReleased"), e.position)
    pre = e.data["preemptor"]
    g.conditions["DisruptionTarget"] = disruption_target(pre, e.position)
    g.workload.events.append(e.position)
    if g.spec.parent is not None:
        wl = g.workload
        top = e.data.get("compositePodGroup")
        if top is not None:  # the CPG that went as a whole, and every CPG inside it (composite.md *Views*)
            ci = next(c.spec.index for c in wl.composites if c.spec.name == top)
            for cj in subtree_cpgs(wl, ci):
                wl.composites[cj].conditions["DisruptionTarget"] = disruption_target(pre, e.position)
        _composites_changed(wl, e.position)
    preemptor = state.workloads.get((pre["namespace"], pre["workload"]))
    if preemptor is not None and preemptor.events is not g.workload.events:  # PodGroups share their owner's
        preemptor.events.append(e.position)


def _lost(state: ClusterState, e: ev.Event) -> None:
    g = _group_of(state, e.data)
    _release(state, g, e.data["pods"], e.data.get("claimsReleased"), e.position)
    g.workload.events.append(e.position)
    if g.spec.parent is not None:
        _composites_changed(g.workload, e.position)


# -- the rules the fast replay applies too ---------------------------------------------------
class GroupRecord(Protocol):
    """What the rules read and write of a group: a live `Group`, or the fast replay's record."""
    placed: int
    explanation: Any
    needs_explanation: bool
    conditions: dict[str, dict[str, Any]]
    ever_scheduled: bool

    @property
    def total(self) -> int: ...

    @property
    def pending(self) -> bool: ...


def placed_rule(g: GroupRecord, was_scheduled: bool, scheduled: bool, min_count: int, explanation: Any,
                position: int) -> None:
    """After pods of g were placed (PodGroupScheduled / PodsScheduled): its explanation, and the
    PodGroupInitiallyScheduled condition the first time it is scheduled."""
    if explanation is not None:
        g.explanation = explanation
    g.needs_explanation = False
    if scheduled and not was_scheduled and not g.ever_scheduled:
        g.ever_scheduled = True
        g.conditions["PodGroupInitiallyScheduled"] = {
            "type": "PodGroupInitiallyScheduled", "status": "True", "reason": "Scheduled",
            "message": f"{g.placed} of {g.total} pods placed (minCount {min_count})",
            "position": position}
    if not g.pending:
        g.explanation = None


SATISFIED = "PodGroupSatisfied"


def satisfied_rule(g: GroupRecord, satisfied: bool, succeeded: int, min_count: int, position: int) -> None:
    """The PodGroupSatisfied condition (lifecycle.md *Conditions and views*), from the group's first
    scheduling on: its status and `position` change when the group turns satisfied or not; its
    message follows the counts."""
    if not g.ever_scheduled:
        return
    status = "True" if satisfied else "False"
    message = f"{g.placed} running, {succeeded} succeeded, minCount {min_count}"
    cond = g.conditions.get(SATISFIED)
    if cond is None or cond["status"] != status:
        g.conditions[SATISFIED] = {"type": SATISFIED, "status": status,
                                   "reason": "MinCountMet" if satisfied else "MinCountNotMet",
                                   "message": message, "position": position}
    elif cond["message"] != message:
        g.conditions[SATISFIED] = {**cond, "message": message}


def disruption_target(pre: dict[str, Any], position: int) -> dict[str, Any]:
    """The condition a PodGroupPreempted sets on its victim group."""
    return {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
            "message": f"preempted by {pre['namespace']}/{pre['workload']} (priority {pre['priority']})",
            "position": position}


# -- the table ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Fold:
    """How one event type is folded: `apply` by evolve; `replay` (dict data) and `replay_lean`
    (the stored JSON text) name the methods of replay.Replay that fold it for a transient
    workload (returning False to leave the event to `apply`)."""
    apply: Callable[[ClusterState, ev.Event], None]
    replay: str | None = None
    replay_lean: str | None = None


FOLDS: dict[str, Fold] = {
    ev.NODE_UPSERTED: Fold(_node_upserted),
    ev.NODE_REMOVED: Fold(_node_removed),
    ev.PRIORITY_CLASS_UPSERTED: Fold(_priority_class),
    ev.DEVICE_CLASS_UPSERTED: Fold(_device_class_upserted),
    ev.DEVICE_CLASS_REMOVED: Fold(_device_class_removed),
    ev.RESOURCE_SLICE_UPSERTED: Fold(_slice_upserted),
    ev.RESOURCE_SLICE_REMOVED: Fold(_slice_removed),
    ev.WORKLOAD_SUBMITTED: Fold(_submitted, "_submitted", "_submitted_lean"),
    ev.WORKLOAD_DELETED: Fold(_deleted, "_deleted", "_deleted_lean"),
    ev.COMMAND_REJECTED: Fold(_rejected),
    ev.SCHEDULER_CONFIGURED: Fold(_scheduler_configured),
    ev.PODS_FINISHED: Fold(_pods_finished, "_lifecycle"),
    ev.WORKLOAD_SCALED: Fold(_scaled, "_lifecycle"),
    ev.POD_GROUP_CREATED: Fold(_podgroup_created, "_lifecycle"),
    ev.POD_GROUP_DELETED: Fold(_podgroup_deleted, "_lifecycle"),
    ev.POD_GROUP_SCHEDULED: Fold(_scheduled, "_scheduled", "_scheduled_lean"),
    ev.PODS_SCHEDULED: Fold(_scheduled, "_scheduled", "_scheduled_lean"),
    ev.POD_GROUP_UNSCHEDULABLE: Fold(_unschedulable, "_unschedulable"),
    ev.POD_GROUP_PREEMPTED: Fold(_preempted, "_preempted"),
    ev.PODS_LOST: Fold(_lost, "_lost"),
    ev.COMPOSITE_POD_GROUP_SCHEDULED: Fold(_composite_scheduled),
    ev.COMPOSITE_POD_GROUP_UNSCHEDULABLE: Fold(_composite_unschedulable),
}

# Event types whose fold changes nothing but the state's position, each with why. Every type of
# events.SCHEMA_VERSIONS has an entry in FOLDS or here (tests/domain/test_fold_table.py); any other
# type stops a fold (UnknownEventType).
NO_OPS: dict[str, str] = {}
