"""Reference victim units of trees (composite.md *Preemption*), written from the spec: which pods
go as one unit, and which further pods the victims chosen take with them. The service's
victims.py computes the same bottom up in one walk; this one repeats a plain rule until nothing
changes. Not used by the service."""
from __future__ import annotations

from service.domain.model.workload import Group, Workload
from service.domain.preemption import victims as vu


def _ancestors(wl: Workload, ci: int) -> list[int]:
    """ci and its ancestors, the root last."""
    out = [ci]
    while wl.spec.cpgs[out[-1]].parent is not None:
        out.append(wl.spec.cpgs[out[-1]].parent)  # type: ignore[arg-type]
    return out


def _groups_under(wl: Workload, ci: int) -> list[int]:
    return [gi for gi, gs in enumerate(wl.spec.groups) if gs.parent is not None and ci in _ancestors(wl, gs.parent)]


def tree_units(wl: Workload) -> list[vu.Unit]:
    units: list[vu.Unit] = []
    seen: set[int] = set()
    for g in wl.groups:
        if not g.placed or g.index in seen:
            continue
        alls = [ci for ci in _ancestors(wl, g.spec.parent) if wl.spec.cpgs[ci].disruption_all]  # type: ignore[arg-type]
        if alls:
            top = alls[-1]  # the highest
            members = [(wl.groups[gi], [p for p, n in enumerate(wl.groups[gi].node_of) if n >= 0])
                       for gi in _groups_under(wl, top)]
            seen.update(gi for gi in _groups_under(wl, top))
            units.append(vu.Unit([(m, p) for m, p in members if p], True, top))
        elif g.spec.disruption_all or (g.spec.gang and g.placed + g.succeeded <= g.spec.min_count):
            units.append(vu.Unit.of(g, [p for p, n in enumerate(g.node_of) if n >= 0], True))
        else:
            units.extend(vu.Unit.of(g, [p], False) for p, n in enumerate(g.node_of) if n >= 0)
    return units


def _sat(wl: Workload, ci: int, left: dict[int, int]) -> bool:
    spec = wl.spec.cpgs[ci]
    ok = sum(1 for gi in spec.child_groups
             if left[gi] + wl.groups[gi].succeeded >= (wl.spec.groups[gi].min_count if wl.spec.groups[gi].gang else 1))
    ok += sum(1 for cj in spec.child_cpgs if _sat(wl, cj, left))
    return ok >= spec.min_group_count


def close(units: list[vu.Unit]) -> list[vu.Victim]:
    pods: dict[int, set[int]] = {}
    groups: dict[int, Group] = {}
    kind: dict[int, str] = {}
    name: dict[int, str] = {}
    for u in units:
        for g, ps in u.members:
            groups[id(g)] = g
            pods.setdefault(id(g), set()).update(ps)
            if u.cpg is not None:
                kind[id(g)], name[id(g)] = vu.CPG_ALL, g.workload.spec.cpgs[u.cpg].name
            elif u.whole:
                kind[id(g)] = vu.DISRUPTION_ALL if g.spec.disruption_all else vu.GANG_AT_MIN
            else:
                kind[id(g)] = vu.GANG_SURPLUS if g.spec.gang else vu.BASIC_PODS
    for key, g in groups.items():  # a gang loses at most its surplus as single pods
        if kind[key] == vu.GANG_SURPLUS and len(pods[key]) > g.placed + g.succeeded - g.spec.min_count:
            pods[key] = {p for p, n in enumerate(g.node_of) if n >= 0}
            kind[key] = vu.SURPLUS_EXCEEDED
    changed = True
    while changed:  # a CPG left unsatisfied with pods placed: its highest such ancestor goes whole
        changed = False
        for wl in {g.workload.position: g.workload for g in groups.values() if g.spec.parent is not None}.values():
            left = {gi: g.placed - len(pods.get(id(g), ())) for gi, g in enumerate(wl.groups)}
            bad = [ci for ci in range(len(wl.spec.cpgs))
                   if any(left[gi] for gi in _groups_under(wl, ci)) and not _sat(wl, ci, left)]
            if not bad:
                continue
            top = [ci for ci in _ancestors(wl, bad[0]) if ci in bad][-1]
            for gi in _groups_under(wl, top):
                g = wl.groups[gi]
                if g.placed:
                    groups[id(g)] = g
                    pods[id(g)] = {p for p, n in enumerate(g.node_of) if n >= 0}
                    kind[id(g)], name[id(g)] = vu.CPG_UNSATISFIED, wl.spec.cpgs[top].name
            changed = True
    out = []
    for key, g in sorted(groups.items(), key=lambda kv: kv[1].key):
        whole = kind[key] not in (vu.GANG_SURPLUS, vu.BASIC_PODS) or len(pods[key]) == g.placed
        out.append(vu.Victim(g, sorted(pods[key]), whole, kind[key], name.get(key)))
    return out
