"""The shape of a composite workload (composite.md *Shape*): expansion of `compositePodGroups`.

A body's tree of composite pod groups (CPGs) is expanded once, at submission: `count`
stamps copies, names get prefixed inside stamped copies, `disruptionMode` is inherited.
The result lists the CPGs and the pod groups in pre-order (a CPG before its children; a
CPG's `podGroups` before its `compositePodGroups`; roots in order), which is both the
order of the views and the order in which the tree routine visits them.

Pure, and used by validation too (service/schemas/composite.py), which checks the sizes
with `expanded_sizes` before anything is materialised.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

SINGLE = "Single"
ALL = "All"
MAX_LEVELS = 4  # counting the pod groups: a root CPG is level 1
MAX_EXPANDED_GROUPS = 64
MAX_EXPANDED_CPGS = 64
MAX_COUNT = 64

Loc = tuple[Any, ...]


@dataclass(frozen=True)
class CpgSpec:
    """One expanded CPG. Indices are into WorkloadSpec.cpgs / WorkloadSpec.groups."""
    name: str
    index: int
    parent: int | None
    root: int  # the index of its root among the workload's roots
    level: int
    gang: bool
    min_group_count: int  # basic: 1
    disruption_all: bool
    topology_key: str | None
    child_groups: tuple[int, ...]
    child_cpgs: tuple[int, ...]
    loc: Loc  # where its entry is in the body (for messages)

    @property
    def children(self) -> int:
        return len(self.child_groups) + len(self.child_cpgs)


@dataclass(frozen=True)
class TreeGroup:
    """One expanded pod group of a tree: its body (as a flat pod group, `count` dropped,
    the expanded name and the inherited disruptionMode filled in) and its parent CPG."""
    name: str
    parent: int
    body: dict[str, Any]
    loc: Loc


@dataclass(frozen=True)
class Tree:
    cpgs: tuple[CpgSpec, ...]
    groups: tuple[TreeGroup, ...]
    roots: tuple[int, ...]  # CPG indices of the roots, in order


def _copies(entry: dict[str, Any], name: str, in_copy: bool, parent_name: str | None) -> list[tuple[str, bool]]:
    """The expanded names of one entry, and whether each is inside a stamped copy."""
    base = f"{parent_name}-{name}" if in_copy and parent_name is not None else name
    if "count" in entry:
        return [(f"{base}-{i}", True) for i in range(int(entry["count"]))]
    return [(base, in_copy)]


def expand(roots: list[dict[str, Any]]) -> Tree:
    """Expand a validated `compositePodGroups` list (the caller checked the sizes)."""
    cpgs: list[CpgSpec | None] = []
    groups: list[TreeGroup] = []
    root_ids: list[int] = []

    def visit(entry: dict[str, Any], name: str, in_copy: bool, parent: int | None, root: int, level: int,
              inherited: str, loc: Loc) -> int:
        index = len(cpgs)
        cpgs.append(None)  # pre-order: the CPG before its children
        mode = entry.get("disruptionMode") or inherited
        policy = entry.get("schedulingPolicy") or {"basic": {}}
        gang = "gang" in policy
        child_groups: list[int] = []
        for i, g in enumerate(entry.get("podGroups") or ()):
            for gname, _ in _copies(g, g["name"], in_copy, name):
                body = {k: v for k, v in g.items() if k != "count"}
                body["name"] = gname
                body["disruptionMode"] = g.get("disruptionMode") or mode
                child_groups.append(len(groups))
                groups.append(TreeGroup(gname, index, body, (*loc, "podGroups", i)))
        child_cpgs: list[int] = []
        for i, c in enumerate(entry.get("compositePodGroups") or ()):
            for cname, c_in_copy in _copies(c, c["name"], in_copy, name):
                child_cpgs.append(visit(c, cname, c_in_copy, index, root, level + 1, mode,
                                        (*loc, "compositePodGroups", i)))
        cpgs[index] = CpgSpec(
            name=name, index=index, parent=parent, root=root, level=level, gang=gang,
            min_group_count=int(policy["gang"]["minGroupCount"]) if gang else 1,
            disruption_all=mode == ALL, topology_key=(entry.get("topology") or {}).get("key"),
            child_groups=tuple(child_groups), child_cpgs=tuple(child_cpgs), loc=loc)
        return index

    for i, entry in enumerate(roots):
        for name, in_copy in _copies(entry, entry["name"], False, None):
            root_ids.append(visit(entry, name, in_copy, None, len(root_ids), 1, SINGLE,
                                  ("compositePodGroups", i)))
    return Tree(cpgs=tuple(c for c in cpgs if c is not None), groups=tuple(groups), roots=tuple(root_ids))


def expanded_sizes(roots: list[dict[str, Any]]) -> tuple[int, int, int]:
    """(CPGs, pod groups, pods) after expansion, by arithmetic: nothing is materialised
    (a body may stamp 64**4 copies; validation refuses it without building them)."""
    def pods_of(g: dict[str, Any]) -> int:
        return sum(int(p.get("count", 1)) for p in g.get("pods") or ())

    def sizes(entry: dict[str, Any]) -> tuple[int, int, int]:
        c, g, p = 1, 0, 0
        for child in entry.get("podGroups") or ():
            n = int(child.get("count", 1))
            g += n
            p += n * pods_of(child)
        for child in entry.get("compositePodGroups") or ():
            n = int(child.get("count", 1))
            cc, cg, cp = sizes(child)
            c, g, p = c + n * cc, g + n * cg, p + n * cp
        return c, g, p

    total = (0, 0, 0)
    for entry in roots:
        n = int(entry.get("count", 1))
        c, g, p = sizes(entry)
        total = (total[0] + n * c, total[1] + n * g, total[2] + n * p)
    return total


def depth_errors(roots: list[dict[str, Any]]) -> list[tuple[Loc, str]]:
    """CPGs too deep for their pod groups to sit at level 4 or above."""
    errors: list[tuple[Loc, str]] = []

    def walk(entry: dict[str, Any], level: int, loc: Loc) -> None:
        if level >= MAX_LEVELS:
            errors.append((loc, f"too deep: a composite pod group sits at level {level}; at most "
                                f"{MAX_LEVELS} levels counting the pod groups (a root is level 1)"))
            return
        for i, child in enumerate(entry.get("compositePodGroups") or ()):
            walk(child, level + 1, (*loc, "compositePodGroups", i))

    for i, entry in enumerate(roots):
        walk(entry, 1, ("compositePodGroups", i))
    return errors


def group_bodies(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod group body of a workload (flat or tree, unexpanded): for checks that look
    at each group's pods once (requested resources, say)."""
    out: list[dict[str, Any]] = list(body.get("podGroups") or ()) + list(body.get("podGroupTemplates") or ())
    stack = list(body.get("compositePodGroups") or ())
    while stack:
        entry = stack.pop()
        out.extend(entry.get("podGroups") or ())
        stack.extend(entry.get("compositePodGroups") or ())
    return out
