"""Victim units (model.md *Preemption* step 1; composite.md *Preemption*): the seam that flat and
tree preemption share.

A unit is what preemption removes and reprieves at once: one or more pod groups' pods
(`members`). Flat groups and the pod groups of a tree outside any `disruptionMode: All` CPG
form units as model.md says (`group_is_whole`): the whole group, or its pods one by one. The
highest CPG with `disruptionMode: All` of a tree is one whole-group unit holding every placed pod
of its subtree. `close` turns the units chosen as victims into victims per pod group, applying
the two closing rules: a gang that would lose more than its surplus goes whole, and a CPG that
would be left unsatisfied with pods of its subtree placed goes whole (its highest such CPG).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from service.domain import dra
from service.domain.model import events as ev
from service.domain.model import gang
from service.domain.model import reasons as rs
from service.domain.model.workload import Group, Workload, subtree_groups

if TYPE_CHECKING:
    from service.domain.state.cluster import ClusterState

# what a unit is (the kinds of audit.md's victim units; CompositePodGroup for a tree's CPG)
DISRUPTION_ALL = rs.DISRUPTION_MODE_ALL
GANG_AT_MIN = rs.GANG_AT_MIN_COUNT
SURPLUS_EXCEEDED = rs.SURPLUS_EXCEEDED
GANG_SURPLUS = rs.GANG_SURPLUS
BASIC_PODS = rs.BASIC_PODS
CPG_ALL = rs.COMPOSITE_DISRUPTION_MODE_ALL  # the highest CPG with disruptionMode All: one unit
CPG_UNSATISFIED = rs.COMPOSITE_UNSATISFIED  # the victims would have left this CPG unsatisfied


@dataclass
class Unit:
    members: list[tuple[Group, list[int]]]  # (group, its pods in the unit), groups in pre-order
    whole: bool
    cpg: int | None = None  # the CPG (index in its workload) this unit is, if any

    @classmethod
    def of(cls, g: Group, pods: list[int], whole: bool) -> Unit:
        return cls([(g, pods)], whole)

    @property
    def group(self) -> Group:
        """The unit's first (for a unit of one group, its only) pod group."""
        return self.members[0][0]

    @property
    def pods(self) -> list[int]:
        """The pods of a unit of one group."""
        return self.members[0][1]

    @property
    def workload(self) -> Workload:
        return self.members[0][0].workload

    @property
    def npods(self) -> int:
        return sum(len(p) for _, p in self.members)

    @property
    def importance(self) -> tuple[int, int, int, tuple[int, int]]:
        """Ascending = most important first (model.md *Reprieve*): higher priority, whole before
        single pods, more pods, placed earlier (the smallest (position, pod index) over its pods)."""
        earliest = min(at for g, pods in self.members for p in pods if (at := g.placed_at[p]) is not None)
        return (-self.workload.spec.priority, 0 if self.whole else 1, -self.npods, earliest)

    def describe(self) -> dict[str, Any]:
        """A reprieved unit as a placement's `preemption.reprieved` lists it."""
        g = self.group
        if self.cpg is None:
            out = {**g.ref, "priority": g.workload.spec.priority,
                   "pods": [g.spec.pod_names[p] for p in self.pods], "wholeGroup": self.whole}
            if g.spec.parent is not None:
                out["compositePodGroup"] = None
            return out
        wl = self.workload
        return {"namespace": wl.spec.namespace, "workload": wl.spec.name,
                "compositePodGroup": wl.spec.cpgs[self.cpg].name, "priority": wl.spec.priority,
                "podGroups": [{"podGroup": m.spec.name, "pods": [m.spec.pod_names[p] for p in pods]}
                              for m, pods in self.members],
                "wholeGroup": True}


def group_is_whole(g: Group) -> bool:
    """A pod group's pods go as one unit: its disruptionMode is All, or it is a gang with no pod
    placed above minCount (model.md step 1); otherwise one by one."""
    spec = g.spec
    return spec.disruption_all or (spec.gang and g.surplus <= 0)  # Succeeded pods count (lifecycle.md)


def group_units(g: Group) -> list[Unit]:
    placed = [i for i, n in enumerate(g.node_of) if n >= 0]
    if not placed:
        return []
    if group_is_whole(g):
        return [Unit.of(g, placed, True)]
    return [Unit.of(g, [p], False) for p in placed]


def highest_all(wl: Workload, ci: int) -> int | None:
    """The highest CPG with disruptionMode All on the path from the root to CPG ci (itself included)."""
    found = None
    while True:
        spec = wl.spec.cpgs[ci]
        if spec.disruption_all:
            found = ci
        if spec.parent is None:
            return found
        ci = spec.parent


def tree_units(wl: Workload) -> list[Unit]:
    """The victim units of a tree's placed pods (composite.md *Preemption*)."""
    units: list[Unit] = []
    done: set[int] = set()
    for g in wl.groups:
        if not g.placed or g.index in done:
            continue
        top = highest_all(wl, g.spec.parent) if g.spec.parent is not None else None
        if top is None:
            units.extend(group_units(g))
            continue
        members = []
        for gi in subtree_groups(wl, top):
            done.add(gi)
            m = wl.groups[gi]
            pods = [i for i, n in enumerate(m.node_of) if n >= 0]
            if pods:
                members.append((m, pods))
        units.append(Unit(members, True, top))
    return units


# -- victims --------------------------------------------------------------------------------------
@dataclass
class Victim:
    """The pods one decision evicts of one pod group."""
    group: Group
    pods: list[int]
    whole: bool  # wholeGroup: every placed pod of the group goes
    kind: str  # the unit it went in (DISRUPTION_ALL ... CPG_UNSATISFIED)
    cpg: str | None = None  # a tree's: the highest CPG that went as a whole


def _satisfied(wl: Workload, ci: int, placed: dict[int, int]) -> bool:
    return gang.cpg_satisfied(wl.spec, ci, lambda gi: placed[gi] + wl.groups[gi].succeeded)  # Running + Succeeded


def close(units: list[Unit]) -> list[Victim]:
    """Victims per pod group (in queue order) from the units chosen: a gang taken beyond its
    surplus goes whole (model.md step 1); then, per tree, bottom up, every CPG left unsatisfied
    with pods of its subtree placed takes all of them, named by the highest CPG so left."""
    taken: dict[int, tuple[Group, set[int]]] = {}
    kinds: dict[int, str] = {}
    cpg_of: dict[int, str] = {}
    for u in units:
        for g, unit_pods in u.members:
            taken.setdefault(id(g), (g, set()))[1].update(unit_pods)
            if u.cpg is not None:
                kinds[id(g)] = CPG_ALL
                cpg_of[id(g)] = g.workload.spec.cpgs[u.cpg].name
            elif u.whole:
                kinds[id(g)] = DISRUPTION_ALL if g.spec.disruption_all else GANG_AT_MIN
            else:
                kinds.setdefault(id(g), GANG_SURPLUS if g.spec.gang else BASIC_PODS)
    for g, chosen in list(taken.values()):
        if kinds[id(g)] == GANG_SURPLUS and len(chosen) > g.surplus:
            chosen.update(i for i, n in enumerate(g.node_of) if n >= 0)
            kinds[id(g)] = SURPLUS_EXCEEDED
    trees = {g.workload.position: g.workload for g, _ in taken.values() if g.spec.parent is not None}
    for wl in trees.values():
        left = {gi: g.placed - len(taken[id(g)][1]) if id(g) in taken else g.placed for gi, g in enumerate(wl.groups)}
        for ci in range(len(wl.spec.cpgs) - 1, -1, -1):  # children come after their parents: bottom up
            members = subtree_groups(wl, ci)
            if not any(left[gi] for gi in members) or _satisfied(wl, ci, left):
                continue
            name = wl.spec.cpgs[ci].name  # the higher CPG overwrites: the highest so left names them
            for gi in members:
                g = wl.groups[gi]
                if left[gi]:
                    taken.setdefault(id(g), (g, set()))[1].update(i for i, n in enumerate(g.node_of) if n >= 0)
                    left[gi] = 0
                if id(g) in taken:
                    kinds[id(g)] = CPG_UNSATISFIED
                    cpg_of[id(g)] = name
    out = []
    for g, chosen in sorted(taken.values(), key=lambda t: t[0].key):
        kind = kinds[id(g)]
        whole = kind in (DISRUPTION_ALL, GANG_AT_MIN, SURPLUS_EXCEEDED, CPG_ALL, CPG_UNSATISFIED) or len(chosen) == g.placed
        out.append(Victim(g, sorted(chosen), whole, kind, cpg_of.get(id(g))))
    return out


# -- what a preemption decides ---------------------------------------------------------------------
WOULD_NOT_HELP = "PreemptionWouldNotHelp"
NO_VICTIMS = "NoLowerPriorityVictims"
NOT_ALLOWED = "PreemptionNotAllowed"


@dataclass(frozen=True)
class Refusal:
    """No preemption: why, and how many pods even removing every candidate would place."""
    reason: str
    placeable: int


@dataclass
class Plan:
    """A preemption: the preemptor's placement (a pod group's `pl.Attempt`, or a tree's routine
    and outcome), its victims per pod group, and the units reprieved."""
    placement: Any
    victims: list[Victim] = field(default_factory=list)
    reprieved: list[Unit] = field(default_factory=list)
    outcome: Any = None  # a tree's: the routine's Outcome


def emit_victims(state: ClusterState, victims: list[Victim], preemptor: dict[str, Any],
                 emit: Callable[[str, dict[str, Any]], None]) -> list[dict[str, Any]]:
    """One PodGroupPreempted per victim group (model.md step 4), each folded as it is emitted;
    returns the preemptor's `preemption.victims` entries. A tree's pod group carries
    `compositePodGroup` (the highest CPG that went as a whole, or null); a flat one does not."""
    names = state.nodes.names
    entries = []
    for v in victims:
        vg, pods = v.group, v.pods
        tree = {"compositePodGroup": v.cpg} if vg.spec.parent is not None else {}
        entries.append({**vg.ref, "priority": vg.workload.spec.priority,
                        "pods": [vg.spec.pod_names[p] for p in pods], "wholeGroup": v.whole, "reason": v.kind,
                        "minCount": vg.spec.min_count, **tree})
        emit(ev.POD_GROUP_PREEMPTED, {
            **vg.ref, "priority": vg.workload.spec.priority, "preemptor": preemptor,
            "pods": [{"pod": vg.spec.pod_names[p], "node": names[vg.node_of[p]]} for p in pods],
            "wholeGroup": v.whole, "reason": v.kind, "minCount": vg.spec.min_count, **tree,
            "claimsReleased": dra.claims_released(state.dra, state.nodes, vg, pods)})
    return entries


def reprieved_entries(units: list[Unit]) -> list[dict[str, Any]]:
    return [{**u.describe(), "reason": rs.PREEMPTOR_STILL_FITS} for u in units]
