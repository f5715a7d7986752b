"""`scale` (lifecycle.md *Growing and shrinking*): the command's accept. The merged spec
(fold/resize.py `merge`) must be valid as a submission (422 naming the body's field); the change
must not remove a finished pod (409 PodFinished), nor leave a gang (BelowMinCount) or a CPG
(BelowMinGroupCount) with pods Running below its minimum. Accepted, it records WorkloadScaled
with every pod group and CPG the change added, removed or updated.
"""
from __future__ import annotations

from typing import Any

from service.domain.decide.lifecycle import live_workload
from service.domain.fold.resize import Merged, Refused, bad, merge, spec_of, targets
from service.domain.model import composite as shape
from service.domain.model import events as ev
from service.domain.model import gang
from service.domain.model.rejection import Accepted, Rejection
from service.domain.model.specs import MAX_WORKLOAD_PODS, WorkloadSpec
from service.domain.model.workload import FINISHED_PHASES, Group, Workload
from service.domain.state.cluster import ClusterState

Loc = tuple[Any, ...]
DNS_LABEL_MAX = 63


def _pods_of(group: dict[str, Any]) -> int:
    return sum(int(p.get("count", 1)) for p in group.get("pods") or ())


def _check_group(m: Merged, group: dict[str, Any], loc: Loc) -> None:
    gang_policy = (group.get("schedulingPolicy") or {}).get("gang")
    if gang_policy is not None and int(gang_policy["minCount"]) > _pods_of(group):
        raise bad(m.policy_loc(loc, "minCount"),
                   f"minCount {gang_policy['minCount']} of pod group {group['name']!r} must be at most its pod count "
                   f"({_pods_of(group)}) after the change")


def _check_tree(m: Merged, entry: dict[str, Any], loc: Loc) -> None:
    for i, g in enumerate(entry.get("podGroups") or ()):
        _check_group(m, g, (*loc, "podGroups", i))
    for i, c in enumerate(entry.get("compositePodGroups") or ()):
        _check_tree(m, c, (*loc, "compositePodGroups", i))
    gang_policy = (entry.get("schedulingPolicy") or {}).get("gang")
    children = sum(int(c.get("count", 1)) for key in ("podGroups", "compositePodGroups") for c in entry.get(key) or ())
    if gang_policy is not None and int(gang_policy["minGroupCount"]) > children:
        raise bad(m.policy_loc(loc, "minGroupCount"),
                   f"minGroupCount {gang_policy['minGroupCount']} of {entry['name']!r} must be at most its children "
                   f"({children}, after stamping) after the change")


def check(m: Merged) -> None:
    """The rules of a submission a change of sizes can break (lifecycle.md: count ranges are the
    body's; minCount, minGroupCount, names after stamping, sizes, 10,000 pods)."""
    body = m.body
    if body.get("podGroups") is not None:
        for i, g in enumerate(body["podGroups"]):
            _check_group(m, g, ("podGroups", i))
        total = sum(_pods_of(g) for g in body["podGroups"])
        if total > MAX_WORKLOAD_PODS:
            raise bad(("podGroups",), f"a workload has at most {MAX_WORKLOAD_PODS} pods over its life "
                                       f"(finished ones included): this change makes {total}")
        return
    roots = body["compositePodGroups"]
    for i, root in enumerate(roots):
        _check_tree(m, root, ("compositePodGroups", i))
    cpgs, groups, pods = shape.expanded_sizes(roots)
    for what, n, most in (("composite pod groups", cpgs, shape.MAX_EXPANDED_CPGS),
                          ("pod groups", groups, shape.MAX_EXPANDED_GROUPS), ("pods", pods, MAX_WORKLOAD_PODS)):
        if n > most:
            raise bad(("compositePodGroups",), f"a workload has at most {most} {what} after stamping: "
                                                f"this change makes {n}")
    tree = shape.expand(roots)
    seen: set[str] = set()
    for name, loc in [(c.name, c.loc) for c in tree.cpgs] + [(g.name, g.loc) for g in tree.groups]:
        if len(name) > DNS_LABEL_MAX:
            raise bad(m.loc(loc, "count"), f"the stamped name {name!r} would be longer than {DNS_LABEL_MAX} "
                                            f"characters")
        if name in seen:
            raise bad(m.loc(loc, "count"), f"the stamped name {name!r} would not be distinct in the workload")
        seen.add(name)


# -- what the change does ----------------------------------------------------------------------
def _view_order(old: list[str], new: list[str]) -> list[str]:
    """The new names in order, each old name that is gone where it stood (after the nearest name
    before it)."""
    order = list(new)
    kept = set(new)
    for k, name in enumerate(old):
        if name in kept:
            continue
        prev = next((old[j] for j in range(k - 1, -1, -1) if old[j] in kept), None)
        order.insert(0 if prev is None else order.index(prev) + 1, name)
        kept.add(name)
    return order


def _removed_pods(g: Group, keep: set[str]) -> list[int]:
    return [p for p, n in enumerate(g.spec.pod_names) if n not in keep]


def _group_records(state: ClusterState, wl: Workload, new: WorkloadSpec) -> list[dict[str, Any]]:
    names = state.nodes.names
    old = {g.spec.name: g for g in wl.groups}
    fresh = {gs.name: gs for gs in new.groups}
    out = []
    for name in _view_order(list(old), list(fresh)):
        g, gs = old.get(name), fresh.get(name)
        spec = gs if gs is not None else g.spec  # type: ignore[union-attr]  # one of them is there
        cpgs = new.cpgs if gs is not None else wl.spec.cpgs
        before = set(g.spec.pod_names) if g is not None else set()
        added = [p for p in gs.pod_names if p not in before] if gs is not None else []
        removed = [] if g is None else _removed_pods(g, set(gs.pod_names) if gs is not None else set())
        change = "Added" if g is None else "Removed" if gs is None else "Updated"
        if change == "Updated" and not added and not removed and g.spec.min_count == gs.min_count:  # type: ignore[union-attr]
            continue
        out.append({"podGroup": name, "parent": None if spec.parent is None else cpgs[spec.parent].name,
                    "change": change, "minCount": spec.min_count if spec.gang else None,
                    "podCount": len(spec.pod_names), "addedPods": added,
                    "removedPods": [] if g is None else [
                        {"pod": g.spec.pod_names[p], "node": names[g.node_of[p]] if g.node_of[p] >= 0 else None}
                        for p in removed]})
    return out


def _cpg_records(wl: Workload, new: WorkloadSpec) -> list[dict[str, Any]]:
    old = {c.spec.name: c.spec for c in wl.composites}
    fresh = {c.name: c for c in new.cpgs}
    out = []
    for name in _view_order(list(old), list(fresh)):
        before, after = old.get(name), fresh.get(name)
        spec = after if after is not None else before
        assert spec is not None
        cpgs = new.cpgs if after is not None else wl.spec.cpgs
        change = "Added" if before is None else "Removed" if after is None else "Updated"
        if change == "Updated" and before.min_group_count == after.min_group_count:  # type: ignore[union-attr]
            continue
        out.append({"compositePodGroup": name, "parent": None if spec.parent is None else cpgs[spec.parent].name,
                    "change": change, "minGroupCount": spec.min_group_count if spec.gang else None})
    return out


def _refusals(wl: Workload, new: WorkloadSpec) -> None:
    """409 PodFinished, BelowMinCount, BelowMinGroupCount (lifecycle.md), in that order."""
    fresh = {gs.name: (i, gs) for i, gs in enumerate(new.groups)}
    after: dict[int, int] = {}  # new group index -> Running pods after the change
    counted: dict[int, int] = {}
    lost: dict[int, int] = {}  # new group index -> Running pods the change removes
    for g in wl.groups:
        hit = fresh.get(g.spec.name)
        removed = _removed_pods(g, set(hit[1].pod_names) if hit is not None else set())
        for p in removed:
            if g.node_of[p] in FINISHED_PHASES:
                raise Refused(Rejection(409, "PodFinished", f"the change would remove pod {g.spec.name}/"
                                         f"{g.spec.pod_names[p]}, which {FINISHED_PHASES[g.node_of[p]].lower()}: "
                                         f"finished pods are the job's history"))
        running = sum(1 for p in removed if g.node_of[p] >= 0)
        if hit is not None:
            after[hit[0]] = g.placed - running
            counted[hit[0]] = g.placed - running + g.succeeded
            lost[hit[0]] = running
    for i, gs in enumerate(new.groups):
        if gs.gang and lost.get(i) and after[i] > 0 and counted[i] < gs.min_count:
            raise Refused(Rejection(409, "BelowMinCount", f"the change would leave pod group {gs.name} with "
                                     f"{after[i]} pods Running and {counted[i] - after[i]} Succeeded, below its "
                                     f"minCount {gs.min_count}: lower minCount in the same body"))
    old_children = {c.spec.name: c.spec.children for c in wl.composites}
    for c in new.cpgs:
        subtree = _subtree(new, c.index)
        if old_children.get(c.name, 0) <= c.children and not any(lost.get(gi) for gi in subtree):
            continue
        if c.name not in old_children or not any(after.get(gi, 0) for gi in subtree):
            continue
        satisfied = gang.satisfied_children(new, c.index, lambda gi: counted.get(gi, 0))
        if not gang.quorum(c, satisfied):
            raise Refused(Rejection(409, "BelowMinGroupCount", f"the change would leave composite pod group "
                                     f"{c.name} with pods Running but {satisfied} of its children satisfied, below "
                                     f"its minGroupCount {c.min_group_count}: lower minGroupCount in the same body"))


def _subtree(spec: WorkloadSpec, ci: int) -> list[int]:
    c = spec.cpgs[ci]
    out = list(c.child_groups)
    for cj in c.child_cpgs:
        out += _subtree(spec, cj)
    return out


def scale(state: ClusterState, name: str, namespace: str | None, body: dict[str, Any]) -> Accepted | Rejection:
    """WorkloadScaled (lifecycle.md *Growing and shrinking*), or the 404/409/422 refusals."""
    ns = namespace or ""
    wl = live_workload(state, ns, name)
    if isinstance(wl, Rejection):
        return wl
    groups: list[dict[str, Any]] = []
    cpgs: list[dict[str, Any]] = []
    try:
        for target, patch, index in targets(wl, body):
            try:
                merged = merge(target.body, patch)
                check(merged)
            except Refused as refused:  # a PodGroup object's body is its entry of `podGroups`
                raise _at_entry(refused, index) if target is not wl else refused from None
            new = spec_of(target, merged.body)
            _refusals(target, new)
            groups += _group_records(state, target, new)
            cpgs += _cpg_records(target, new)
    except Refused as refused:
        return refused.rejection
    return ev.WORKLOAD_SCALED, {"namespace": ns, "workload": name, "patch": body, "podGroups": groups,
                                "compositePodGroups": cpgs}


def _at_entry(refused: Refused, index: int) -> Refused:
    r = refused.rejection
    loc = r.loc
    if loc is not None and loc[1:3] == ("podGroups", 0):
        loc = (*loc[:2], index, *loc[3:])
    return Refused(Rejection(r.status, r.reason, r.detail, loc))
