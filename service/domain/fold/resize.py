"""Growing and shrinking (lifecycle.md *Growing and shrinking*): the spec with a `scale` body applied,
and the surgery its input, WorkloadScaled, folds with (decide/scale.py holds the command's accept).

- `merge(body, patch)`: the spec with a (shape-valid) scale body applied; entries are found by
  `name` as written in the spec, before stamping. Pure: accept and the fold both call it.
- `rebind(state, wl, body)`: the workload's groups and CPGs rebuilt from the new spec, each
  surviving one keeping its object and its state by name. A grown entry earlier in a group (or a
  stamped copy earlier in a tree) moves the indices of what follows, so the keys that hold
  indices (node rows, the running index, the queue, device claims) are moved with them.
- `frees_room`, `touched`: the pass's scope.
"""
from __future__ import annotations

from typing import Any

from service.domain import dra
from service.domain.model.rejection import Rejection
from service.domain.model.specs import WorkloadSpec, workload_from_submission
from service.domain.model.workload import Composite, Group, Workload
from service.domain.state.cluster import ClusterState

Loc = tuple[Any, ...]

# what each kind of entry holds: (list field, kind of its entries)
_CHILDREN: dict[str, tuple[tuple[str, str], ...]] = {
    "podGroup": (("pods", "pod"),),
    "treePodGroup": (("pods", "pod"),),
    "compositePodGroup": (("podGroups", "treePodGroup"), ("compositePodGroups", "compositePodGroup")),
    "pod": (),
}
_NOUNS = {"pod": "pod entry", "podGroup": "pod group", "treePodGroup": "pod group",
          "compositePodGroup": "composite pod group"}


class Refused(Exception):
    def __init__(self, rejection: Rejection) -> None:
        super().__init__(rejection.detail)
        self.rejection = rejection


def bad(loc: Loc, message: str) -> Refused:
    return Refused(Rejection(422, "InvalidChange", message, ("body", *loc)))


# -- the merge ---------------------------------------------------------------------------------
class Merged:
    """The new spec body, and for each spec entry the patch named (by its place in the spec):
    where the patch named it and the patch entry."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.body = body
        self.named: dict[Loc, tuple[Loc, dict[str, Any]]] = {}

    def loc(self, spec_loc: Loc, field: str | None = None) -> Loc:
        """Where to point for a rule broken at this spec entry: the patch's field when it gave it,
        else the patch entry that named it (or its nearest named ancestor)."""
        probe = spec_loc
        while probe:
            hit = self.named.get(probe)
            if hit is not None:
                patch_loc, entry = hit
                return (*patch_loc, field) if probe == spec_loc and field in entry else patch_loc
            probe = probe[:-1]
        return ()

    def policy_loc(self, spec_loc: Loc, leaf: str) -> Loc:
        at = self.loc(spec_loc, "schedulingPolicy")
        return (*at, "gang", leaf) if at[-1:] == ("schedulingPolicy",) else at


def merge(body: dict[str, Any], patch: dict[str, Any]) -> Merged:
    """The spec with the patch applied (raises Refused for a name that names nothing, a count on
    an entry submitted without one, a policy on a basic entry)."""
    out = Merged(dict(body))
    for key, kind in (("podGroups", "podGroup"), ("compositePodGroups", "compositePodGroup")):
        entries = patch.get(key)
        if entries is None:
            continue
        if body.get(key) is None:
            other = "compositePodGroups" if key == "podGroups" else "podGroups"
            raise bad((key,), f"the workload was submitted with {other}, not {key}")
        out.body[key] = _merge_list(out, body[key], entries, (key,), (key,), kind)
    return out


def _merge_list(out: Merged, spec: list[dict[str, Any]], patch: list[dict[str, Any]], spec_loc: Loc,
                patch_loc: Loc, kind: str) -> list[dict[str, Any]]:
    by_name = {entry["name"]: i for i, entry in enumerate(spec)}
    merged = list(spec)
    for j, entry in enumerate(patch):
        i = by_name.get(entry["name"])
        if i is None:
            raise bad((*patch_loc, j, "name"), f"the spec has no {_NOUNS[kind]} named {entry['name']!r} here"
                                                f" (names are as written in the spec, before stamping)")
        out.named[(*spec_loc, i)] = ((*patch_loc, j), entry)
        merged[i] = _merge_entry(out, spec[i], entry, (*spec_loc, i), (*patch_loc, j), kind)
    return merged


def _merge_entry(out: Merged, spec: dict[str, Any], patch: dict[str, Any], spec_loc: Loc, patch_loc: Loc,
                 kind: str) -> dict[str, Any]:
    new = dict(spec)
    name = spec["name"]
    if "count" in patch:
        if kind != "pod" and "count" not in spec:
            raise bad((*patch_loc, "count"), f"{name!r} was submitted without count: adding one would rename "
                                              f"it (its copies are named {name}-0 …)")
        new["count"] = patch["count"]
    if "schedulingPolicy" in patch:
        policy = spec.get("schedulingPolicy") or {"basic": {}}
        if "gang" not in policy:
            raise bad((*patch_loc, "schedulingPolicy"), f"{name!r} is basic: it takes no schedulingPolicy "
                                                         f"(the kind of a policy never changes)")
        new["schedulingPolicy"] = {"gang": {**policy["gang"], **patch["schedulingPolicy"]["gang"]}}
    for key, child in _CHILDREN[kind]:
        if key in patch:
            new[key] = _merge_list(out, spec.get(key) or [], patch[key], (*spec_loc, key), (*patch_loc, key), child)
    return new


def targets(wl: Workload, patch: dict[str, Any]) -> list[tuple[Workload, dict[str, Any], int]]:
    """What a scale body changes: (a workload, the body for it, the entry's index in `podGroups`).
    The workload itself; for a workload of templates, each PodGroup object its `podGroups` name
    (a PodGroup object is a workload of its own: lifecycle.md *Scheduling a PodGroup object*)."""
    if "podGroupTemplates" not in wl.body:
        return [(wl, patch, 0)]
    if patch.get("compositePodGroups") is not None:
        raise bad(("compositePodGroups",), "a workload of templates has no compositePodGroups: name its PodGroup "
                                           "objects in podGroups")
    live = {g.spec.name: g.workload for g in wl.groups}
    out = []
    for i, entry in enumerate(patch.get("podGroups") or ()):
        pg = live.get(entry["name"])
        if pg is None:
            raise bad(("podGroups", i, "name"), f"workload {wl.spec.namespace}/{wl.spec.name} has no live PodGroup "
                                                f"object named {entry['name']!r}")
        out.append((pg, {"podGroups": [entry]}, i))
    return sorted(out, key=lambda t: t[0].position)  # view order: creation order


def spec_of(wl: Workload, body: dict[str, Any]) -> WorkloadSpec:
    s = wl.spec
    return workload_from_submission({"namespace": s.namespace, "name": s.name, "priority": s.priority,
                                     "preemptionPolicy": s.preemption_policy, "spec": body})


def frees_room(data: dict[str, Any]) -> bool:
    """The change removed Running pods: its pass sweeps every pending group."""
    return any(p["node"] is not None for r in data["podGroups"] for p in r["removedPods"])


def touched(wl: Workload, data: dict[str, Any]) -> list[Group | Composite]:
    """The queue entries a change brings or alters: its pod groups, or for a tree the roots of
    what it names (a submission's pass tries those)."""
    names = {r["podGroup"] for r in data["podGroups"] if r["change"] != "Removed"}
    if not wl.composites:
        return [g for g in wl.groups if g.spec.name in names]
    cpgs = {r["compositePodGroup"] for r in data["compositePodGroups"]} | \
        {r["parent"] for r in [*data["podGroups"], *data["compositePodGroups"]] if r["parent"] is not None}
    roots = {wl.spec.cpgs[g.spec.parent].root for g in wl.groups if g.spec.name in names and g.spec.parent is not None}
    roots |= {c.spec.root for c in wl.composites if c.spec.name in cpgs}
    return [wl.composites[ci] for ci in wl.spec.roots if wl.composites[ci].spec.root in roots]


# -- the fold's surgery --------------------------------------------------------------------------
def rebind(state: ClusterState, wl: Workload, body: dict[str, Any], class_key: Any) -> None:
    """Rebuild wl's groups and CPGs from the new spec body. Removed pods are released before
    (every pod left out of the new spec is Pending here). `class_key(wl, g)`: evolve's."""
    spec = spec_of(wl, body)
    assert spec.shapes == wl.spec.shapes, "a change of sizes keeps every pod entry, so every shape"
    _unindex(state, wl)
    old = {g.spec.name: g for g in wl.groups}
    group_moves: dict[int, int] = {}
    pod_moves: dict[tuple[int, int], tuple[int, int]] = {}
    groups = []
    for i, gs in enumerate(spec.groups):
        g = old.get(gs.name)
        if g is None:
            g = Group(workload=wl, index=i, spec=gs, node_of=[-1] * len(gs.pod_names),
                      placed_at=[None] * len(gs.pod_names))
        else:
            at = {n: k for k, n in enumerate(g.spec.pod_names)}
            keep = [at.get(n) for n in gs.pod_names]
            group_moves[g.index] = i
            pod_moves.update({(g.index, k): (i, j) for j, k in enumerate(keep) if k is not None})
            g.node_of = [g.node_of[k] if k is not None else -1 for k in keep]
            g.placed_at = [g.placed_at[k] if k is not None else None for k in keep]
            g.index, g.spec, g._pod_index = i, gs, None
        fresh = g.placed == 0 and g.finished == 0 and gs.parent is None
        g.class_key = class_key(wl, g) if fresh else None
        groups.append(g)
    cpgs = {c.spec.name: c for c in wl.composites}
    composites = []
    for cs in spec.cpgs:
        c = cpgs.get(cs.name) or Composite(workload=wl, spec=cs)
        c.spec, c.memo = cs, None
        composites.append(c)
    wl.spec, wl.body, wl.groups, wl.composites = spec, body, groups, composites
    if any(k != v for k, v in pod_moves.items()):
        dra.claims_moved(state.dra, wl.position, group_moves, pod_moves)
    state.dra.infos = {k: v for k, v in state.dra.infos.items() if k[0] != wl.position}
    _index(state, wl)


def _unindex(state: ClusterState, wl: Workload) -> None:
    """Take wl's groups and roots out of every index that holds their indices (node rows, the
    running groups, the queue), journaled as moves."""
    for g in wl.groups:
        if g.spec.parent is None:
            state.queue.pop(g.key, None)
            state.index.update(g, False)
        state._journal(g.running_key)
        if g.placed:
            del state.running[g.running_key]
            for pod, row in enumerate(g.node_of):
                if row >= 0:
                    state.node_pods[row].discard((wl.position, g.index, pod))
    for ci in wl.spec.roots:
        root = wl.composites[ci]
        state.queue.pop(root.key, None)
        state.index.update(root, False)  # type: ignore[arg-type]  # a solo bucket, as a Group's


def _index(state: ClusterState, wl: Workload) -> None:
    for g in wl.groups:
        state._journal(g.running_key)
        if g.placed:
            state.running[g.running_key] = g
            for pod, row in enumerate(g.node_of):
                if row >= 0:
                    state.node_pods[row].add((wl.position, g.index, pod))
        state.sync_queue(g)
    for ci in wl.spec.roots:
        state.sync_root(wl.composites[ci])
