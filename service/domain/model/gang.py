"""The gang and quorum rules, written once (model.md *Placing a group* step 4, composite.md *Satisfied*).

- A pod group needs `minCount` pods placed together (a basic group: one) and is satisfied
  while it has that many Running or Succeeded (lifecycle.md); an unsatisfied one needs its
  deficit placed together.
- A composite pod group (CPG) is satisfied while at least `minGroupCount` of its children are
  (a basic CPG: one).

Everything that asks "is this group / CPG satisfied, with these counts?" asks here: the
workload's live state (workload.py), the tree routine's trials (tree_routine.py), the tree's
events and loss (tree_decide.py), the queue and the decider (`need`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from service.domain.model.composite import CpgSpec
    from service.domain.model.specs import GroupSpec, WorkloadSpec


def need(spec: GroupSpec) -> int:
    """Pods a group needs placed together: minCount for a gang, one for a basic group."""
    return spec.min_count if spec.gang else 1


def group_satisfied(spec: GroupSpec, counted: int) -> bool:
    """`counted`: its Running plus Succeeded pods (lifecycle.md: finished members did their part;
    Kubernetes issue 142330). Failed pods never count."""
    return counted >= need(spec)


def deficit(spec: GroupSpec, counted: int) -> int:
    """What an unsatisfied group needs placed together: minCount - (Running + Succeeded)."""
    return max(0, need(spec) - counted)


def quorum(spec: CpgSpec, satisfied_children: int) -> bool:
    """A CPG with this many satisfied children is satisfied."""
    return satisfied_children >= spec.min_group_count


def satisfied_children(wl: WorkloadSpec, ci: int, placed: Callable[[int], int]) -> int:
    """How many children of CPG ci are satisfied when pod group gi has `placed(gi)` pods placed."""
    spec = wl.cpgs[ci]
    return sum(1 for gi in spec.child_groups if group_satisfied(wl.groups[gi], placed(gi))) + \
        sum(1 for cj in spec.child_cpgs if cpg_satisfied(wl, cj, placed))


def cpg_satisfied(wl: WorkloadSpec, ci: int, placed: Callable[[int], int]) -> bool:
    """CPG ci is satisfied when pod group gi has `placed(gi)` pods placed."""
    return quorum(wl.cpgs[ci], satisfied_children(wl, ci, placed))
